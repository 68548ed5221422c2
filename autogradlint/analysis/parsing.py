"""libcst parsing without libcst's per-node validation, which parsed code cannot fail.

Every libcst node validates itself when it is constructed (`CSTNode.__post_init__`), which is
right for nodes a codemod builds by hand. Nodes libcst's own parser builds from text it just
parsed are valid by construction; libcst's source says as much ("PERF: ... would allow us to
avoid validating the tree when parsing a file"). On our slices validation is ~15% of a parse,
so parsing here switches it off for the parser's own node construction only.
"""

from __future__ import annotations

import threading

import libcst as cst

_VALIDATING = cst.CSTNode.__post_init__
_LOCK = threading.Lock()  # the switch is global: one parse at a time flips it


def _trusted(self: cst.CSTNode) -> None:
    return None


def parse_module(source: str) -> cst.Module:
    """`libcst.parse_module`, skipping node validation; raises what it raises."""
    with _LOCK:
        cst.CSTNode.__post_init__ = _trusted  # type: ignore[method-assign]
        try:
            return cst.parse_module(source)
        finally:
            cst.CSTNode.__post_init__ = _VALIDATING  # type: ignore[method-assign]
