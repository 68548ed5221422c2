"""How long the language server takes from a keystroke to its diagnostics, with a real client.

Usage: python benchmarks/lsp_latency.py [--classes 64] [--edits 10]

Starts `autogradlint lsp` over stdio, opens a ~2,000-line module holding 64 autograd Function
classes (each with a finding), then makes edits one at a time inside different classes and
times each from the didChange notification to the publishDiagnostics of that version: what a
person waits for (the server's 50 ms debounce included). Prints the median and the worst.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

UNIT = '''\
class Fn{i}(torch.autograd.Function):
    """A fused scale-and-recompute step ({i}), as a training loop would call it.

    forward computes `sum(x * w) * scale` along the last dimension; backward recomputes the
    activation of `x` to add its gradient. The recomputation is the bug the linter reports:
    it runs with grad mode off in ordinary training.
    """

    @staticmethod
    def forward(ctx, x, w, scale):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        y = x * w
        out = y.sum(dim=-1) * scale
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (x, w) = ctx.saved_tensors
        g = grad_output.unsqueeze(-1) * ctx.scale
        grad_x = g * w
        grad_w = (g * x).sum(0)
        # recompute the activation to differentiate it (cheaper than saving it for large x)
        y = x.sigmoid() * x
        extra = torch.autograd.grad(y, x, g)[0]
        grad_x = grad_x + extra
        # the scale is a Python number: it gets no gradient
        return grad_x, grad_w, None


'''


def module(classes: int) -> str:
    return "import torch\n\n\n" + "".join(UNIT.format(i=i) for i in range(classes))


class Client:
    """Just enough JSON-RPC over stdio to open, change and wait for diagnostics."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autogradlint", "lsp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.published: dict[int, float] = {}  # version -> when its diagnostics arrived
        self.event = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def send(self, message: dict[str, object]) -> None:
        data = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        self.proc.stdin.flush()

    def _read(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        while True:
            length = 0
            while True:  # headers, up to the blank line
                header = stream.readline()
                if not header:
                    return
                if header in (b"\r\n", b"\n"):
                    break
                if header.lower().startswith(b"content-length"):
                    length = int(header.split(b":")[1])
            body = json.loads(stream.read(length))
            if body.get("method") == "textDocument/publishDiagnostics":
                with self.event:
                    self.published[body["params"].get("version")] = time.perf_counter()
                    self.event.notify_all()

    def wait(self, version: int, timeout: float = 60.0) -> float:
        with self.event:
            self.event.wait_for(lambda: version in self.published, timeout)
        return self.published[version]

    def close(self) -> None:
        self.proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--classes", type=int, default=64)
    parser.add_argument("--edits", type=int, default=10)
    args = parser.parse_args()
    text = module(args.classes)
    uri = Path("/tmp/autogradlint-lsp-bench/model.py").as_uri()
    client = Client()
    try:
        client.send(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
        )
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        start = time.perf_counter()
        client.send(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {
                        "uri": uri,
                        "languageId": "python",
                        "version": 1,
                        "text": text,
                    }
                },
            }
        )
        first = client.wait(1) - start
        timings = []
        for n in range(args.edits):
            version = n + 2
            target = f"class Fn{(n * 7) % args.classes}("
            at = text.index(target)
            line = text.index("        grad_x = g * w\n", at)
            text = text[:line] + f"        grad_x = g * w  # edit {n}\n" + text[line + 23 :]
            start = time.perf_counter()
            client.send(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didChange",
                    "params": {
                        "textDocument": {"uri": uri, "version": version},
                        "contentChanges": [{"text": text}],
                    },
                }
            )
            timings.append(client.wait(version) - start)
    finally:
        client.close()
    lines = text.count("\n")
    print(
        f"LSP, {lines:,} lines with {args.classes} Function classes: first diagnostics "
        f"{first * 1000:.0f} ms; after an edit: median {statistics.median(timings) * 1000:.0f} ms, "
        f"worst {max(timings) * 1000:.0f} ms (over {len(timings)} edits, debounce included)"
    )


if __name__ == "__main__":
    main()
