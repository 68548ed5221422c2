"""The module-level statements that define a custom op (`Reads.op_definitions`): kept in the slice
libcst parses, found from the text (`op_definition_chunks`, for preselect.py) and from `ast`
(`op_definition_spans`, for slicing.py, which may keep less, never more).

An op is defined by `@torch.library.custom_op(...)` on a def, by a `custom_op(...)` call
assigned to a name, or by a `.define("op(...) -> ...")` call; at module level or inside a
top-level `if` / `try` / `with` block (an optional-dependency guard), which is kept whole.
"""

from __future__ import annotations

import ast
import re

from ..text.ast_walk import walk as walk_ast
from ..text.statements import chunk_of

# `custom_op(` / `define(` anywhere in a chunk that is not a plain def or class (a decorated
# def starts with `@`, a guard block with `if` / `try` / `with`). Two searches led by a word
# each: `re` skips ahead to a literal, but tries an alternation at every character (~9x slower).
_DEFINES = (re.compile(r"custom_op[ \t]*\("), re.compile(r"define[ \t]*\("))
_DEF_OR_CLASS = re.compile(r"(?:def|async|class)\b")


def op_definition_chunks(text: str, starts: list[int]) -> set[int]:
    """The top-level chunks that may define a custom op (this may keep more, never less)."""
    if "custom_op" not in text and "define" not in text:
        return set()
    bounds = [*starts, len(text)]
    return {
        index
        for index in chunk_of(starts, _define_offsets(text))
        if 0 <= index < len(starts) and not _DEF_OR_CLASS.match(text, bounds[index])
    }


def _define_offsets(text: str) -> list[int]:
    """Where `custom_op(` and `define(` start, in order (matches of one never overlap the other's)."""
    return sorted(m.start() for pattern in _DEFINES for m in pattern.finditer(text))


def op_definition_spans(statements: list[ast.stmt]) -> list[tuple[int, int]]:
    """The line spans of the top-level statements that define a custom op."""
    spans = []
    for stmt in statements:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = any(_defines(d) for d in stmt.decorator_list)
        elif isinstance(stmt, ast.ClassDef):
            found = False
        else:
            found = any(isinstance(n, ast.Call) and _defines(n) for n in walk_ast(stmt))
        if found:
            first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
            spans.append((first, stmt.end_lineno or stmt.lineno))
    return spans


def _defines(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Call):
        return _defines(func)  # custom_op("ns::op", ...)(fn)
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("custom_op", "define")
