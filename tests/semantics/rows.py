"""`@rows("A2.1", ...)`: which rows of docs/semantics.md a test verifies (read by
tests/test_semantics_citations.py, which holds every documented row to a test)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])


def rows(*ids: str) -> Callable[[F], F]:
    def mark(test: F) -> F:
        test.semantics_rows = ids  # type: ignore[attr-defined]
        return test

    return mark


def first_line(exc: BaseException) -> str:
    """What the rows quote: the first line of str(exc)."""
    return str(exc).splitlines()[0] if str(exc) else ""
