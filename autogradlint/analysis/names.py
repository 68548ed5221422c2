"""Name resolution with a plain import-alias table (no libcst scope metadata: 4-7x a parse)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..text.bindings import Bindings


def dotted(expr: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    # Exact types: a failed isinstance against a libcst class goes through ABCMeta (this runs
    # on most expressions of every analysed file).
    while type(expr) is cst.Attribute:
        parts.append(expr.attr.value)
        expr = expr.value
    if type(expr) is cst.Name:
        parts.append(expr.value)
        return ".".join(reversed(parts))
    return None


def callee_text(expr: cst.BaseExpression) -> str | None:
    """Like `dotted`, but renders intermediate calls as `()`: `MoeLoader().load`."""
    parts: list[str] = []
    while True:
        if isinstance(expr, cst.Attribute):
            parts.append(expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Call):
            parts.append("()")
            expr = expr.func
        elif isinstance(expr, cst.Name):
            parts.append(expr.value)
            break
        else:
            return None
    text = ""
    for part in reversed(parts):
        text = text + part if part == "()" or not text else f"{text}.{part}"
    return text


def _module_name(node: cst.BaseExpression | None) -> str:
    return (dotted(node) or "") if node is not None else ""


class ImportTable(Bindings):
    """Bindings read from libcst import statements, resolving libcst expressions."""

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                asname = alias.asname.name if alias.asname is not None else None
                self.bind_import(
                    _module_name(alias.name), asname.value if isinstance(asname, cst.Name) else None
                )
            return
        if isinstance(node.names, cst.ImportStar):
            return
        base = "." * len(node.relative) + _module_name(node.module)
        for alias in node.names:
            asname = alias.asname.name if alias.asname is not None else None
            self.bind_from(
                base,
                _module_name(alias.name),
                asname.value if isinstance(asname, cst.Name) else None,
            )

    def resolve(self, expr: cst.BaseExpression) -> str | None:
        """The qualified name an expression stands for, or its own dotted text when local."""
        text = dotted(expr)
        return None if text is None else self.resolve_dotted(text)


def iter_statements(body: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every statement below `body`, entering compound statements but never expressions."""
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        # Exact types: isinstance against libcst's classes goes through ABCMeta (slow).
        kind = type(node)
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            yield from node.body  # type: ignore[attr-defined]
            continue
        if kind is not cst.Module:
            yield node
        children: list[cst.CSTNode] = []
        if kind is cst.Module or kind is cst.IndentedBlock:
            children.extend(node.body)  # type: ignore[attr-defined]
        elif kind in _COMPOUND:
            suite = getattr(node, "body", None)  # `match` has cases, not a body
            if suite is not None:
                children.append(suite)
            for attr in ("orelse", "finalbody"):
                extra = getattr(node, attr, None)
                if extra is not None:
                    children.append(extra)
            for handler in getattr(node, "handlers", ()):
                children.append(handler)
            for case in getattr(node, "cases", ()):
                children.append(case)
        elif kind in _CLAUSES:
            children.append(node.body)  # type: ignore[attr-defined]
        stack.extend(reversed(children))


def _concrete(base: type) -> frozenset[type]:
    found: set[type] = set()
    pending = [base]
    while pending:
        subclasses: list[type] = pending.pop().__subclasses__()
        pending.extend(subclasses)
        found.update(subclasses)
    return frozenset(found)


_COMPOUND = _concrete(cst.BaseCompoundStatement)
_CLAUSES = frozenset(
    {cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase}
)
