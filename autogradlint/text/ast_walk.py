"""`ast.walk`, twice as fast: the same nodes in the same (breadth-first) order, as a list.

`ast.walk` runs two generators per node (`iter_child_nodes` over `iter_fields`); the slicer
walks every Function class for the helpers it calls, and the summaries every helper, so on the
corpus those generators were ~5% of the analysis.
"""

from __future__ import annotations

import ast
import warnings

_AST = ast.AST


def walk(node: ast.AST) -> list[ast.AST]:
    """`node` and everything below it, in `ast.walk`'s order."""
    out = [node]
    append = out.append
    for current in out:  # the list grows while it is read: breadth first
        for name in current._fields:
            value = getattr(current, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, _AST):
                        append(item)
            elif isinstance(value, _AST):
                append(value)
    return out


def ast_dotted(expr: ast.expr) -> str | None:
    """`a.b.c` for a Name/Attribute chain (the `ast` twin of analysis.names.dotted)."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def parse_quietly(text: str) -> ast.Module | None:
    """`ast` of a text, or None when it does not parse; never a warning about the code read
    (old escape sequences in published packages)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
