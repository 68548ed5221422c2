"""A light tree walker for libcst nodes: the visitor protocol without libcst's rebuild machinery.

libcst's `node.visit(visitor)` routes every node through `_visit_and_replace_children`, built for
transformers; for read-only passes that is most of the cost of an analysis. `FastVisitor` keeps
the same method names (`visit_Call(node)`, returning False to skip children, and
`leave_Call(original_node)`), but walks the dataclass fields directly and skips whitespace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import libcst as cst

# Fields that only hold formatting: never a node any check looks at.
_TRIVIA_PREFIXES = (
    "whitespace",
    "lpar",
    "rpar",
    "comma",
    "leading_lines",
    "leading_whitespace",
    "lines_after_decorators",
    "semicolon",
    "newline",
    "header",
    "footer",
    "colon",
    "equal",
    "lbracket",
    "rbracket",
    "lbrace",
    "rbrace",
    "dot",
    "star",
    "first_line",
    "empty_lines",
    "trailing_whitespace",
    "indent",
)
_FIELDS: dict[type, tuple[str, ...]] = {}
# Per node type, a generated function listing its children: one attribute read per field
# instead of a loop over field names with getattr (the walk is most of a check's time).
_CHILDREN: dict[type, Callable[[Any], list[cst.CSTNode]]] = {}


def _fields(kind: type) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = tuple(
            f.name for f in dataclasses.fields(kind) if not f.name.startswith(_TRIVIA_PREFIXES)
        )
        _FIELDS[kind] = names
    return names


class _NodeTypes(dict[type, bool]):
    """`_NODE[type]`: whether instances of a type are libcst nodes. isinstance against libcst's
    classes goes through ABCMeta (slow): each type is asked once."""

    def __missing__(self, kind: type) -> bool:
        flag = self[kind] = issubclass(kind, cst.CSTNode)
        return flag


_NODE = _NodeTypes()


def _child_lister(kind: type) -> Callable[[Any], list[cst.CSTNode]]:
    """Generate `children` for one node type. libcst's sequence fields hold nodes only (every
    one is typed `Sequence[<node>]`); a single field may hold a node, None, a sentinel or a
    string, and `ImportFrom.names` either a sequence or a node."""
    body = ["def children(node):", "    out = []"]
    for name in _fields(kind):
        body += [
            f"    v = node.{name}",
            "    t = v.__class__",
            "    if t is list or t is tuple:",
            "        out += v",
            "    elif _NODE[t]:",
            "        out.append(v)",
        ]
    body.append("    return out")
    scope: dict[str, Any] = {"_NODE": _NODE}
    exec("\n".join(body), scope)
    lister: Callable[[Any], list[cst.CSTNode]] = scope["children"]
    _CHILDREN[kind] = lister
    return lister


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The child nodes that carry code, in field order (formatting nodes are skipped)."""
    lister = _CHILDREN.get(type(node))
    if lister is None:
        lister = _child_lister(type(node))
    return lister(node)


class FastVisitor:
    """Subclass and define `visit_<Node>` / `leave_<Node>` (and optionally `on_visit`)."""

    # Per node type: its visit and leave functions (unbound) and its child lister, found with
    # one dict lookup per node (the walk is most of a check's time).
    _dispatch: dict[type, tuple[Callable[..., Any] | None, Callable[..., Any] | None, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch = {}
        if getattr(cls, "on_visit", None) is not None:
            cls.walk = FastVisitor._walk_asking  # type: ignore[method-assign]

    def _entry(self, kind: type) -> tuple[Any, Any, Any]:
        name = kind.__name__
        entry = (
            getattr(type(self), f"visit_{name}", None),
            getattr(type(self), f"leave_{name}", None),
            _CHILDREN.get(kind) or _child_lister(kind),
        )
        self._dispatch[kind] = entry
        return entry

    def walk(self, node: cst.CSTNode) -> None:
        kind = node.__class__
        entry = self._dispatch.get(kind)
        if entry is None:
            entry = self._entry(kind)
        visit, leave, lister = entry
        if visit is not None and visit(self, node) is False:
            if leave is not None:
                leave(self, node)
            return
        for child in lister(node):
            self.walk(child)
        if leave is not None:
            leave(self, node)

    def _walk_asking(self, node: cst.CSTNode) -> None:
        """`walk` for visitors with an `on_visit`, asked first at every node."""
        if self.on_visit(node) is False:  # type: ignore[attr-defined]
            return
        FastVisitor.walk(self, node)


def names_in(expr: cst.CSTNode) -> list[str]:
    """The variable names an expression reads, in order (`a.b[c]` -> a, c; never attributes)."""
    found: list[str] = []
    _NameCollector(found).walk(expr)
    return found


class _NameCollector(FastVisitor):
    def __init__(self, found: list[str]) -> None:
        self.found = found

    def visit_Name(self, node: cst.Name) -> None:
        self.found.append(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.walk(node.value)  # `x.float` reads x; `float` is an attribute, not a variable
        return False
