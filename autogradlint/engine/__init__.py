"""The engine: one file's source in, findings (and fixes, and class summaries) out. The
pipeline (pipeline), the door every front end lints through (door), the suppression audit
(hygiene), the fix loop (fix_loop, torch_name, verify) and the editor's incremental runs
(incremental). Pure: no file system, no printing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .door import lint
    from .request import LintRequest

__all__ = ["LintRequest", "lint"]


def __getattr__(name: str) -> Any:
    # Lazy: the runner and the language server build requests without loading libcst.
    if name == "lint":
        from .door import lint

        return lint
    if name == "LintRequest":
        from .request import LintRequest

        return LintRequest
    raise AttributeError(name)
