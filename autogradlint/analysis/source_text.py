"""The source text of a node, for messages and the few checks that compare text.

A tree the engine rebuilt from `ast` (speed/rebuild.py) has no formatting: on one, the text of a
node comes from its libcst twin (speed/twins.py parses the statement that holds it), and where
that cannot be had, `NeedsParse` sends the file to libcst's whole parse. Every check asks here,
never `Module.code_for_node` directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

import libcst as cst

_BARE = cst.Module([])


class NeedsParse(Exception):
    """A check needs what only libcst's parse of the file can give."""


class TextSource(Protocol):
    """Where the text of a rebuilt tree's nodes comes from (speed/twins.Twins)."""

    def code(self, node: cst.CSTNode, with_module: bool) -> str: ...


class _NoText:
    def code(self, node: cst.CSTNode, with_module: bool) -> str:
        raise NeedsParse


_REBUILT: ContextVar[TextSource | None] = ContextVar("autogradlint_rebuilt_tree", default=None)


@contextmanager
def rebuilt_tree(texts: TextSource | None = None) -> Iterator[None]:
    """While the checks read a tree rebuilt from `ast`, whose nodes' text `texts` gives (none
    by default: asking raises NeedsParse)."""
    token = _REBUILT.set(texts or _NoText())
    try:
        yield
    finally:
        _REBUILT.reset(token)


def code_of(node: cst.CSTNode, module: cst.Module | None = None) -> str:
    """The code of `node` as written (`module` gives the indentation of multi-line code)."""
    texts = _REBUILT.get()
    if texts is not None:
        return texts.code(node, module is not None)
    return (module or _BARE).code_for_node(node)
