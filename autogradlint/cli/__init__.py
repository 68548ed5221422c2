"""Command line: `check`, `fix`, `rule`, `confirm`, `lsp`, `clean`. Thin: all analysis is in
the engine, every command lints through the same runner and project view."""

from __future__ import annotations

from ..runtime.dataclass_code import cached_dataclass_code

with cached_dataclass_code("cli"):  # the CLI's dataclasses, compiled in an earlier run
    from . import check, clean, confirm, fix, rule, server  # noqa: F401 - each registers its command
    from .app import main, run

__all__ = ["main", "run"]
