"""The source text of a node, for messages and the few checks that compare text.

A tree the engine rebuilt from `ast` (speed/rebuild.py) has no formatting, so it cannot give a
node's text: `code_of` raises `NeedsParse` while one is checked, and the engine checks the file
again on libcst's parse; so does a check's first finding (its message and position come from
libcst's tree). Every check asks here, never `Module.code_for_node` directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import libcst as cst

_BARE = cst.Module([])
_REBUILT: ContextVar[bool] = ContextVar("autogradlint_rebuilt_tree", default=False)


class NeedsParse(Exception):
    """A check asked for the text of a node of a rebuilt tree."""


@contextmanager
def rebuilt_tree() -> Iterator[None]:
    """While the checks read a tree rebuilt from `ast`."""
    token = _REBUILT.set(True)
    try:
        yield
    finally:
        _REBUILT.reset(token)


def require_source() -> None:
    """Raise NeedsParse on a rebuilt tree: what comes next needs libcst's own (a finding's
    message and position, a node's text)."""
    if _REBUILT.get():
        raise NeedsParse


def code_of(node: cst.CSTNode, module: cst.Module | None = None) -> str:
    """The code of `node` as written (`module` gives the indentation of multi-line code)."""
    require_source()
    return (module or _BARE).code_for_node(node)
