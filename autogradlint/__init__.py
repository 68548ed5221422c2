"""autogradlint: a static linter for custom PyTorch autograd code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .engine.pipeline import lint_source
    from .model import FileError, FileResult, Finding

__all__ = ["FileError", "FileResult", "Finding", "__version__", "lint_source"]


def __getattr__(name: str) -> Any:
    # Lazy: `import autogradlint` must not pay for libcst (a warm `check` never parses).
    if name == "lint_source":
        from .engine.pipeline import lint_source

        return lint_source
    if name in ("FileError", "FileResult", "Finding"):
        from . import model

        return getattr(model, name)
    raise AttributeError(name)
