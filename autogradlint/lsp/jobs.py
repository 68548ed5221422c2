"""What the language server asks its worker process to compute (run there, never in the server:
a document that crashes the parser must not take the server with it)."""

from __future__ import annotations

from typing import Any

from ..engine.fix_loop import fix_text, single_fixes
from ..engine.incremental import IncrementalLinter
from ..settings import Settings
from ..view import FileView

# (kind, source, path, enabled rules, settings, what the project says about the file)
Job = tuple[str, str, str, frozenset[str], Settings, FileView]
PRELOAD = ("autogradlint.lsp.jobs",)  # what each worker imports before its first job
# The worker lives as long as the server: it remembers each document's findings per class, so
# a keystroke re-analyses only the class it changed (engine/incremental.py).
LINTER = IncrementalLinter()


def run(job: Job) -> Any:
    kind, source, path, enabled, settings, project = job
    options: dict[str, Any] = {"enabled": enabled, "settings": settings, "project": project}
    if kind == "lint":
        return LINTER.lint(source, path, **options)
    if kind == "close":
        LINTER.forget(path)
        return None
    if kind == "fixes":
        return single_fixes(source, path, **options)
    if kind == "fix_all":
        return fix_text(source, path, **options)
    raise ValueError(f"unknown job kind {kind!r}")
