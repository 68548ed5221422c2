"""Module constants an `apply` call unpacks: `ARGS = (1.0,)` bound once, so `*ARGS` counts (D10)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping

from .ast_walk import parse_quietly, walk


def sequence_constants(source: str, names: Iterable[str]) -> dict[str, int]:
    """Of `names`, those bound exactly once in the whole module, and that once by a module-scope
    `NAME = (a, b)` / `NAME = [a, b]` with no starred element: name -> how many elements.

    Read from the full text, never from a slice, so that the check and the slicer's pre-test
    give the same answer whatever the slice kept: another binding anywhere (a local of the
    same name, `global NAME`, a loop target, an import) leaves the name unknown."""
    wanted = {
        name
        for name in names
        if re.search(rf"^{re.escape(name)}[ \t]*=[ \t]*[(\[]", source, re.MULTILINE)
    }
    if not wanted:
        return {}  # no line can bind one (the common case): `ast` is never run
    tree = parse_quietly(source)
    if tree is None:
        return {}
    counts: dict[str, int] = {}
    for node in walk(tree):
        for name in _bound(node):
            if name == "*":
                return {}  # `from m import *` may bind any name
            counts[name] = counts.get(name, 0) + 1
    out: dict[str, int] = {}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id in wanted
            and counts.get(stmt.targets[0].id) == 1
        ):
            size = literal_size(stmt.value)
            if size is not None:
                out[stmt.targets[0].id] = size
    return out


def literal_size(value: ast.expr) -> int | None:
    """The length of a tuple or list literal with no starred element; None for anything else."""
    if isinstance(value, (ast.Tuple, ast.List)) and not any(
        isinstance(e, ast.Starred) for e in value.elts
    ):
        return len(value.elts)
    return None


def positional_count(args: list[ast.expr], constants: Mapping[str, int]) -> int | None:
    """How many positional arguments a call passes: `*(a, b)` and `*NAME` (a constant of
    `constants`) by their length; None when an unpacked one is of unknown length."""
    total = 0
    for arg in args:
        if not isinstance(arg, ast.Starred):
            total += 1
            continue
        value = arg.value
        size = constants.get(value.id) if isinstance(value, ast.Name) else literal_size(value)
        if size is None:
            return None
        total += size
    return total


def starred_names(args: list[ast.expr]) -> list[str]:
    """The names a call unpacks with `*NAME`."""
    return [
        a.value.id for a in args if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name)
    ]


def _bound(node: ast.AST) -> list[str]:
    """The names one node binds (or unbinds), in any scope."""
    if isinstance(node, ast.Name):
        return [node.id] if isinstance(node.ctx, (ast.Store, ast.Del)) else []
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split(".")[0]]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest else []
    return []
