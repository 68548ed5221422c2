"""Name resolution with a plain import-alias table (no libcst scope metadata: 4-7x a parse)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst


def dotted(expr: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if isinstance(expr, cst.Name):
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


class ImportTable:
    """Maps local names bound by import statements to the qualified names they stand for."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _module_name(alias.name)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.aliases[alias.asname.name.value] = full
                else:
                    # `import torch.autograd` binds `torch`, which still means torch.
                    head = full.split(".", 1)[0]
                    self.aliases.setdefault(head, head)
            return
        if isinstance(node.names, cst.ImportStar):
            return
        base = _module_name(node.module)
        dots = "." * len(node.relative)
        for alias in node.names:
            name = _module_name(alias.name)
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{dots}{base}.{name}" if base else f"{dots}{name}"

    def resolve_dotted(self, text: str) -> str:
        head, sep, rest = text.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return text
        return f"{target}{sep}{rest}" if rest else target

    def resolve(self, expr: cst.BaseExpression) -> str | None:
        """The qualified name an expression stands for, or its own dotted text when local."""
        text = dotted(expr)
        return None if text is None else self.resolve_dotted(text)

    def is_imported(self, name: str) -> bool:
        return name in self.aliases


def iter_statements(body: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every statement below `body`, entering compound statements but never expressions."""
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleStatementLine):
            yield from node.body
            continue
        if isinstance(node, cst.SimpleStatementSuite):
            yield from node.body
            continue
        if not isinstance(node, cst.Module):
            yield node
        children: list[cst.CSTNode] = []
        if isinstance(node, (cst.Module, cst.IndentedBlock)):
            children.extend(node.body)
        elif isinstance(node, cst.BaseCompoundStatement):
            body = getattr(node, "body", None)  # `match` has cases, not a body
            if body is not None:
                children.append(body)
            for attr in ("orelse", "finalbody"):
                extra = getattr(node, attr, None)
                if extra is not None:
                    children.append(extra)
            for handler in getattr(node, "handlers", ()):
                children.append(handler)
            for case in getattr(node, "cases", ()):
                children.append(case)
        elif isinstance(
            node, (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)
        ):
            children.append(node.body)
        stack.extend(reversed(children))
