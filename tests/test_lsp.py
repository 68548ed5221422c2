"""The language server, driven end to end over stdio by a real LSP client (pytest-lsp)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

BUG = """\
import torch


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x * x  # \U0001f600 an emoji: columns are UTF-16 units for the client
        return torch.autograd.grad(y, x, g)[0]
"""
FIXED = BUG.replace(
    "        y = x * x  # \U0001f600 an emoji: columns are UTF-16 units for the client\n"
    "        return torch.autograd.grad(y, x, g)[0]\n",
    "        with torch.enable_grad():\n"
    "            y = x * x  # \U0001f600 an emoji: columns are UTF-16 units for the client\n"
    "            return torch.autograd.grad(y, x, g)[0]\n",
)

pytestmark = pytest.mark.asyncio(loop_scope="function")


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "autogradlint", "lsp"]),
)
async def client(lsp_client: LanguageClient, tmp_path: Path):
    response = await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=tmp_path.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")],
        )
    )
    lsp_client.capabilities_response = response  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def _open(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=text
            )
        )
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return uri


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def _apply(text: str, edit: types.TextEdit) -> str:
    """Apply a TextEdit given in UTF-16 units (the default position encoding)."""
    lines = text.splitlines(keepends=True)

    def offset(pos: types.Position) -> int:
        before = sum(len(line) for line in lines[: pos.line])
        line = lines[pos.line] if pos.line < len(lines) else ""
        units = 0
        for index, char in enumerate(line):
            if units >= pos.character:
                return before + index
            units += 2 if ord(char) > 0xFFFF else 1
        return before + len(line)

    return text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]


async def test_capabilities(client: LanguageClient) -> None:
    caps = client.capabilities_response.capabilities  # type: ignore[attr-defined]
    assert caps.hover_provider
    assert types.CodeActionKind.QuickFix in caps.code_action_provider.code_action_kinds
    assert "source.fixAll.autogradlint" in caps.code_action_provider.code_action_kinds


async def test_diagnostics_on_open_have_code_source_href_and_utf16_range(
    client: LanguageClient, tmp_path: Path
) -> None:
    uri = await _open(client, tmp_path / "m.py", BUG)
    (diagnostic,) = client.diagnostics[uri]
    assert diagnostic.code == "AGL101"
    assert diagnostic.source == "autogradlint"
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.code_description.href.endswith("rules/AGL101.yaml")
    assert diagnostic.range.start == types.Position(line=13, character=15)
    assert diagnostic.range.end == types.Position(line=13, character=34)
    assert diagnostic.data["fixable"] == "safe"


async def test_edit_relints_the_new_version(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "m.py", BUG)
    _change(client, uri, 2, FIXED)
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    codes = [d.code for d in client.diagnostics[uri]]
    assert codes == ["AGL105"]  # the remaining warning after the safe fix


async def test_quick_fix_gives_the_fixed_source(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "m.py", BUG)
    (diagnostic,) = client.diagnostics[uri]
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    quick = [a for a in actions if a.kind == types.CodeActionKind.QuickFix and "AGL101" in a.title]
    fix = next(a for a in quick if "noqa" not in a.title)
    (edit,) = fix.edit.changes[uri]
    assert _apply(BUG, edit) == FIXED
    noqa = next(a for a in quick if "noqa" in a.title)
    (edit,) = noqa.edit.changes[uri]
    assert "return torch.autograd.grad(y, x, g)[0]  # noqa: AGL101" in _apply(BUG, edit)


async def test_fix_all_applies_safe_fixes(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "m.py", BUG)
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(
                start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)
            ),
            context=types.CodeActionContext(diagnostics=[], only=["source.fixAll.autogradlint"]),
        )
    )
    (action,) = actions
    (edit,) = action.edit.changes[uri]
    assert _apply(BUG, edit) == FIXED


async def test_hover_shows_rule_docs(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "m.py", BUG)
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=13, character=20),
        )
    )
    assert hover is not None
    assert "AGL101 autograd-grad-without-enable-grad" in hover.contents.value


async def test_close_clears(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "m.py", BUG)
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert not client.diagnostics[uri]


async def test_syntax_error_mid_edit_keeps_last_good_diagnostics(
    client: LanguageClient, tmp_path: Path
) -> None:
    uri = await _open(client, tmp_path / "m.py", BUG)
    _change(client, uri, 2, BUG.replace("return torch.autograd.grad(y, x, g)[0]", "return ("))
    await asyncio.sleep(0.5)
    assert [d.code for d in client.diagnostics[uri]] == ["AGL101"]
    _change(client, uri, 3, FIXED)  # the server is alive and lints the next good version
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [d.code for d in client.diagnostics[uri]] == ["AGL105"]


async def test_config_change_is_picked_up_without_restart(
    client: LanguageClient, tmp_path: Path
) -> None:
    uri = await _open(client, tmp_path / "m.py", BUG)
    assert client.diagnostics[uri]
    (tmp_path / "pyproject.toml").write_text('[tool.autogradlint]\nignore = ["AGL101"]\n')
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[
                types.FileEvent(
                    uri=(tmp_path / "pyproject.toml").as_uri(), type=types.FileChangeType.Created
                )
            ]
        )
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert not client.diagnostics[uri]


async def test_server_never_executes_the_document(client: LanguageClient, tmp_path: Path) -> None:
    marker = tmp_path / "EXECUTED"
    trap = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n" + BUG
    uri = await _open(client, tmp_path / "trap.py", trap)
    await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(
                start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)
            ),
            context=types.CodeActionContext(diagnostics=list(client.diagnostics[uri])),
        )
    )
    assert [d.code for d in client.diagnostics[uri]] == ["AGL101"]
    assert not marker.exists()


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "autogradlint", "lsp"],
        # Switch the prescreen off, to reach libcst's native parser as unknown input would.
        server_env={**os.environ, "AUTOGRADLINT_MAX_EXPRESSION_DEPTH": "1000000000"},
    ),
)
async def unguarded_client(lsp_client: LanguageClient, tmp_path: Path):
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=tmp_path.as_uri())
    )
    yield
    await lsp_client.shutdown_session()


async def test_a_document_that_crashes_the_parser_does_not_kill_the_server(
    unguarded_client: LanguageClient, tmp_path: Path
) -> None:
    crashing = BUG + "\n\nclass G(torch.autograd.Function):\n    @staticmethod\n"
    crashing += "    def backward(ctx, g):\n        return g * " + "-" * 30_000 + "1\n"
    client = unguarded_client
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=(tmp_path / "bad.py").as_uri(), language_id="python", version=1, text=crashing
            )
        )
    )
    await asyncio.sleep(1.0)  # it used to die here with -11
    uri = await _open(client, tmp_path / "good.py", BUG)
    assert [d.code for d in client.diagnostics[uri]] == ["AGL101"]


async def test_did_save_of_an_unopened_fifo_does_not_hang(
    client: LanguageClient, tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=fifo.as_uri())
        )
    )
    uri = await _open(client, tmp_path / "m.py", BUG)  # the server still answers
    assert [d.code for d in client.diagnostics[uri]] == ["AGL101"]


@pytest.mark.parametrize(
    ("call", "noqa_line"),
    [
        ("        return torch.autograd.grad(\\\n            y, x, g)[0]\n", 15),
        ('        return torch.autograd.grad(y, x, g, """\n        text""")[0]\n', 15),
    ],
    ids=["backslash", "string"],
)
async def test_noqa_goes_where_it_counts_and_breaks_nothing(
    client: LanguageClient, tmp_path: Path, call: str, noqa_line: int
) -> None:
    source = BUG.replace("        return torch.autograd.grad(y, x, g)[0]\n", call)
    uri = await _open(client, tmp_path / "m.py", source)
    (diagnostic,) = [d for d in client.diagnostics[uri] if d.code == "AGL101"]
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    noqa = next(a for a in actions if "noqa" in a.title)
    (edit,) = noqa.edit.changes[uri]
    new = _apply(source, edit)
    compile(new, "m.py", "exec")  # after a `\` it was a SyntaxError
    assert new.splitlines()[noqa_line - 1].endswith("# noqa: AGL101")
    assert new.count("# noqa") == 1
    from autogradlint.engine.pipeline import lint_source

    assert lint_source(new, "m.py").findings == []  # and it does suppress the finding


async def test_the_server_sees_the_rest_of_the_project(
    client: LanguageClient, tmp_path: Path
) -> None:
    """An editor opens one module of a package: Functions of the others are followed."""
    from test_project_view import BASE, MODEL, OPS

    (tmp_path / "pyproject.toml").write_text("[tool.autogradlint]\n")
    src = tmp_path / "src" / "mypkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "base.py").write_text(BASE)
    (src / "ops.py").write_text(OPS)
    (src / "model.py").write_text(MODEL)
    ops = await _open(client, src / "ops.py", OPS)
    assert [d.code for d in client.diagnostics[ops]] == ["AGL201"]
    model = await _open(client, src / "model.py", MODEL)
    assert [d.code for d in client.diagnostics[model]] == ["AGL407"]
    # An unsaved edit of another open buffer counts: base.py stops being a Function.
    base = await _open(client, src / "base.py", BASE)
    _change(client, base, 2, BASE.replace("torch.autograd.Function", "object"))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    _change(client, ops, 2, OPS + "\n")
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert not client.diagnostics[ops]
