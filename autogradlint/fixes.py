"""Fixes: edits checks attach to violations, applied in one transform and re-linted to a fixpoint.

Pure: source in, source out. A fix edits one method; at most one fix per method is applied per
pass (so edits never overlap), and passes repeat until nothing fixable is left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

ExprEdit = Callable[[cst.CSTNode], cst.CSTNode]
BlockEdit = Callable[[cst.IndentedBlock], cst.IndentedBlock]


@dataclass
class Edits:
    """Edits keyed by the identity of the original node they replace."""

    torch_name: str
    nodes: dict[int, ExprEdit] = field(default_factory=dict)
    blocks: dict[int, BlockEdit] = field(default_factory=dict)
    needs_torch: bool = False

    def torch(self, *attrs: str) -> cst.BaseExpression:
        """`torch.<attrs>` spelled with the module's own name for torch; notes the import."""
        self.needs_torch = True
        expr: cst.BaseExpression = cst.Name(self.torch_name)
        for attr in attrs:
            expr = cst.Attribute(expr, cst.Name(attr))
        return expr


@dataclass(frozen=True)
class Fix:
    """A repair for one violation: `build` registers its edits; `scope` is the method it edits."""

    safety: str  # safe | unsafe
    scope: cst.CSTNode
    build: Callable[[Edits], None]
    title: str = ""


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: Edits) -> None:
        self.edits = edits

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        key = id(original_node)
        if key in self.edits.blocks and isinstance(updated_node, cst.IndentedBlock):
            updated_node = self.edits.blocks[key](updated_node)
        if key in self.edits.nodes:
            return self.edits.nodes[key](updated_node)
        return updated_node


def torch_alias(module: cst.Module) -> str | None:
    """The local name module-level code uses for `torch` (`torch`, or `th` for `import torch as th`)."""
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        name = cst.Module([]).code_for_node(alias.name)
                        if name == "torch":
                            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                                return alias.asname.name.value
                            return "torch"
                        if name.startswith("torch.") and alias.asname is None:
                            return "torch"
    return None


def _add_import_torch(module: cst.Module) -> cst.Module:
    """Insert `import torch` after the docstring and `__future__` imports."""
    body = list(module.body)
    index = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            small = stmt.body[0]
            is_doc = (
                i == 0
                and isinstance(small, cst.Expr)
                and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString))
            )
            is_future = isinstance(small, cst.ImportFrom) and (
                isinstance(small.module, cst.Name) and small.module.value == "__future__"
            )
            if is_doc or is_future:
                index = i + 1
                continue
        break
    new = cst.parse_statement("import torch\n")
    if index < len(body):
        # Take over the blank lines/comments above the statement we insert before, so the
        # import joins the module's import block instead of hugging the docstring.
        following = body[index]
        new = new.with_changes(leading_lines=following.leading_lines)
        body[index] = following.with_changes(leading_lines=())
    body.insert(index, new)
    return module.with_changes(body=body)


def apply_fixes(module: cst.Module, fixes: list[Fix]) -> tuple[str, list[Fix]]:
    """Apply non-overlapping fixes (one per method); returns the new code and what was applied."""
    alias = torch_alias(module)
    edits = Edits(torch_name=alias or "torch")
    applied: list[Fix] = []
    scopes: set[int] = set()
    for fix in fixes:
        if id(fix.scope) in scopes:
            continue
        scopes.add(id(fix.scope))
        fix.build(edits)
        applied.append(fix)
    new_module = module.visit(_Apply(edits))
    if edits.needs_torch and alias is None:
        new_module = _add_import_torch(new_module)
    return new_module.code, applied


def diff_span(old: str, new: str) -> tuple[int, int, int]:
    """(start, end in old, end in new) of the one region where two texts differ."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return start, end_old, end_new
