"""autogradlint: a static linter for custom PyTorch autograd code."""

from __future__ import annotations

__version__ = "0.1.0"

from .engine import lint_source
from .model import FileError, FileResult, Finding

__all__ = ["FileError", "FileResult", "Finding", "__version__", "lint_source"]
