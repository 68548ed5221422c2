"""What the language server asks its worker process to compute (run there, never in the server:
a document that crashes the parser must not take the server with it)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..engine.door import lint
from ..engine.fix_loop import fix_text
from ..engine.incremental import IncrementalLinter
from ..engine.request import LintRequest

# (kind, the request: the document's text, its path, rules, settings and view of the project)
Job = tuple[str, LintRequest]
PRELOAD = ("autogradlint.lsp.jobs",)  # what each worker imports before its first job
# The worker lives as long as the server: it remembers each document's findings per class, so
# a keystroke re-analyses only the class it changed (engine/incremental.py).
LINTER = IncrementalLinter()


def run(job: Job) -> Any:
    kind, request = job
    if kind == "lint":
        return LINTER.lint(request)
    if kind == "close":
        LINTER.forget(request.path)
        return None
    if kind == "fixes":  # each finding's fix on its own: the quick fixes
        return lint(replace(request, fixes=True))
    if kind == "fix_all":
        return fix_text(request)
    raise ValueError(f"unknown job kind {kind!r}")
