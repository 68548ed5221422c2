"""A language-server client that writes JSON-RPC to the server's stdin byte for byte: for tests
that start the server as an editor does (the `autogradlint` script, in the workspace), or send
what a well-behaved client such as pytest-lsp never would (bad params, requests after shutdown).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

# What an editor runs (README): the console script installed next to this interpreter.
SCRIPT = Path(sys.executable).with_name("autogradlint")
WAIT_S = 60.0  # how long to wait for a message before calling it missing (a deadlock guard)


class Wire:
    """One server process over stdio; messages it sends are collected by a reader thread."""

    def __init__(self, cwd: Path, command: list[str] | None = None) -> None:
        assert SCRIPT.exists(), f"{SCRIPT} is missing: install the package (pip install -e .)"
        self.stderr = tempfile.TemporaryFile()  # a pipe nobody reads could block the server
        self.process = subprocess.Popen(
            command or [str(SCRIPT), "lsp"],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
        )
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = None
            while (line := stdout.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if not line or length is None:
                self.inbox.put(None)  # the server closed its output
                return
            self.inbox.put(json.loads(stdout.read(length)))

    def send(self, message: dict[str, Any] | bytes) -> None:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def request(self, method: str, params: Any = None) -> int:
        """Send a request; its id."""
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.next_id

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def wait_for(self, wanted: Any, what: str) -> dict[str, Any]:
        """The first message, old or new, for which `wanted(message)` holds."""
        for message in self.seen:
            if wanted(message):
                return message
        while True:
            try:
                message = self.inbox.get(timeout=WAIT_S)
            except queue.Empty:
                message = None
            if message is None:
                raise AssertionError(f"no {what}; the server sent {self.seen}\n{self.log()}")
            self.seen.append(message)
            if wanted(message):
                return message

    def response(self, request_id: int | None) -> dict[str, Any]:
        return self.wait_for(
            lambda m: "method" not in m and m.get("id") == request_id,
            f"answer to request {request_id}",
        )

    def diagnostics(self, uri: str) -> list[dict[str, Any]]:
        message = self.wait_for(
            lambda m: (
                m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
            ),
            f"diagnostics for {uri}",
        )
        return list(message["params"]["diagnostics"])

    def initialize(self, root: Path) -> dict[str, Any]:
        answer = self.response(
            self.request("initialize", {"capabilities": {}, "rootUri": root.as_uri()})
        )
        self.notify("initialized", {})
        return answer

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": document})
        return uri

    def exit_status(self) -> int:
        """The status the server exits with once its input is done."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=WAIT_S)

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-4000:]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=WAIT_S)
        if self.process.stdin is not None:
            self.process.stdin.close()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.stderr.close()
