"""The language server answers every request, as JSON-RPC 2.0 and LSP require, and exits with
LSP's status; driven over stdio with messages a well-behaved client never sends.

Before, pygls dropped a request whose params did not fit and every request after `shutdown`
without an answer (the client waits forever), and `exit` without `shutdown` exited 0."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import SQUARE_BUG
from lsp_wire import Wire

INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32600, -32601, -32602
PARSE_ERROR, SERVER_NOT_INITIALIZED = -32700, -32002


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Wire]:
    wire = Wire(cwd=tmp_path)
    try:
        yield wire
    finally:
        wire.close()


def _error(answer: dict[str, Any]) -> int:
    assert "result" not in answer, answer
    return int(answer["error"]["code"])


def _hover(uri: str) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": 12, "character": 20}}


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("textDocument/hover", {}),
        ("textDocument/hover", 5),
        ("textDocument/hover", {"textDocument": {"uri": 3}, "position": {"line": "x"}}),
        ("textDocument/codeAction", {"textDocument": {"uri": "file:///m.py"}}),
        ("textDocument/hover", None),  # no params at all
    ],
    ids=["empty", "number", "wrong-types", "missing-fields", "absent"],
)
def test_a_request_whose_params_do_not_fit_gets_invalid_params(
    server: Wire, tmp_path: Path, method: str, params: Any
) -> None:
    server.initialize(tmp_path)
    uri = server.open(tmp_path / "m.py", SQUARE_BUG)
    assert [d["code"] for d in server.diagnostics(uri)] == ["AGL101"]
    assert _error(server.response(server.request(method, params))) == INVALID_PARAMS
    # ...and the server goes on: the next request is answered.
    hover = server.response(server.request("textDocument/hover", _hover(uri)))
    assert "AGL101" in hover["result"]["contents"]["value"]


def test_requests_after_shutdown_get_invalid_request_and_exit_is_0(
    server: Wire, tmp_path: Path
) -> None:
    server.initialize(tmp_path)
    uri = server.open(tmp_path / "m.py", SQUARE_BUG)
    server.diagnostics(uri)
    assert server.response(server.request("shutdown"))["result"] is None
    assert _error(server.response(server.request("textDocument/hover", _hover(uri)))) == (
        INVALID_REQUEST
    )
    assert _error(server.response(server.request("shutdown"))) == INVALID_REQUEST
    server.notify("exit")
    assert server.exit_status() == 0


@pytest.mark.parametrize("ending", ["exit", "end of input"])
def test_an_end_without_shutdown_is_status_1(server: Wire, tmp_path: Path, ending: str) -> None:
    server.initialize(tmp_path)
    if ending == "exit":
        server.notify("exit")
    assert server.exit_status() == 1


def test_a_request_before_initialize_gets_server_not_initialized(
    server: Wire, tmp_path: Path
) -> None:
    uri = server.open(tmp_path / "m.py", SQUARE_BUG)  # a notification: dropped
    answer = server.response(server.request("textDocument/hover", _hover(uri)))
    assert _error(answer) == SERVER_NOT_INITIALIZED
    assert "capabilities" in server.initialize(tmp_path)["result"]
    server.response(server.request("shutdown"))
    server.notify("exit")
    assert server.exit_status() == 0


@pytest.mark.parametrize(
    ("message", "answer_id", "code"),
    [
        (b"{not json", None, PARSE_ERROR),
        (b'{"jsonrpc": "2.0", "id": 7, "params": {}}', 7, INVALID_REQUEST),  # no method
        (b'{"jsonrpc": "1.0", "id": 7, "method": "shutdown"}', 7, INVALID_REQUEST),
        (b'{"id": 7, "method": "shutdown"}', 7, INVALID_REQUEST),  # no "jsonrpc"
        (b"[1, 2]", None, INVALID_REQUEST),  # a batch: LSP has none
        (b'{"jsonrpc": "2.0", "id": 7, "method": "no/such"}', 7, METHOD_NOT_FOUND),
    ],
    ids=["not-json", "no-method", "version", "no-jsonrpc", "batch", "unknown-method"],
)
def test_what_is_not_a_request_is_answered_with_the_json_rpc_error(
    server: Wire, tmp_path: Path, message: bytes, answer_id: int | None, code: int
) -> None:
    server.initialize(tmp_path)
    server.send(message)
    assert _error(server.response(answer_id)) == code
    assert server.response(server.request("shutdown"))["result"] is None  # still serving
