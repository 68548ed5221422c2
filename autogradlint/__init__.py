"""autogradlint: a static linter for custom PyTorch autograd code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .engine.door import lint
    from .engine.request import LintRequest
    from .model import FileError, FileResult, Finding

__all__ = [
    "FileError",
    "FileResult",
    "Finding",
    "LintRequest",
    "__version__",
    "lint",
    "lint_source",
]


def lint_source(source: bytes | str, path: str = "<stdin>", **options: Any) -> FileResult:
    """`lint(LintRequest(source, path, **options))`: one file's findings."""
    from .engine.door import lint
    from .engine.request import LintRequest

    return lint(LintRequest(source, path, **options))


def __getattr__(name: str) -> Any:
    # Lazy: `import autogradlint` must not pay for libcst (a warm `check` never parses).
    if name == "lint":
        from .engine.door import lint

        return lint
    if name == "LintRequest":
        from .engine.request import LintRequest

        return LintRequest
    if name in ("FileError", "FileResult", "Finding"):
        from . import model

        return getattr(model, name)
    raise AttributeError(name)
