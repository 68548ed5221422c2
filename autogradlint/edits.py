"""Edits that checks attach to violations, and the one transform that applies them.

Pure: a parsed module and fixes in, the new code out. A fix edits one scope (a method, or a
call); at most one fix per scope is applied per pass, so edits never overlap, and the fix loop
repeats passes until nothing fixable is left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

ExprEdit = Callable[[cst.CSTNode], cst.CSTNode]
BlockEdit = Callable[[cst.IndentedBlock], cst.IndentedBlock]
# Where a fix is (its finding's original line) -> (the name that spells `torch` there, whether
# `import torch [as name]` must be added for it). See text/torch_name.py.
TorchNamer = Callable[[int], tuple[str, bool]]


@dataclass
class Edits:
    """Edits keyed by the identity of the original node they replace, shared by every fix of a
    pass; `torch_name` is the spelling of torch in scope of the fix being built."""

    torch_name: str = "torch"
    needs_import: bool = False
    default_indent: str = "    "
    nodes: dict[int, ExprEdit] = field(default_factory=dict)
    blocks: dict[int, BlockEdit] = field(default_factory=dict)
    imports: set[str] = field(default_factory=set)  # aliases `import torch as X` must bind

    def torch(self, *attrs: str) -> cst.BaseExpression:
        """`torch.<attrs>` as it must be spelled where the current fix edits; notes the import
        when torch is not bound to that name there."""
        if self.needs_import:
            self.imports.add(self.torch_name)
        expr: cst.BaseExpression = cst.Name(self.torch_name)
        for attr in attrs:
            expr = cst.Attribute(expr, cst.Name(attr))
        return expr

    def torch_code(self, *attrs: str) -> str:
        return cst.Module([]).code_for_node(self.torch(*attrs))

    def nested_indent(self, block: cst.IndentedBlock) -> str:
        """The indentation a block nested in `block` must use: the same unit as `block` itself
        (a module's first indented line may use tabs while this function uses spaces)."""
        return block.indent if block.indent is not None else self.default_indent

    def scoped(self, torch_name: str, needs_import: bool) -> Edits:
        """A view for one fix: its own torch spelling, the shared edit tables."""
        return Edits(
            torch_name,
            needs_import,
            self.default_indent,
            self.nodes,
            self.blocks,
            self.imports,
        )


@dataclass(frozen=True)
class Fix:
    """A repair for one violation: `build` registers its edits; `scope` is what it edits.

    `safety` is `safe` only where the rewrite is proven to give bitwise-equal results on every
    path that did not raise (tests/differential); `note` says why a fix is unsafe."""

    safety: str  # safe | unsafe
    scope: cst.CSTNode
    build: Callable[[Edits], None]
    title: str = ""
    note: str = ""


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: Edits) -> None:
        self.edits = edits

    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode:
        key = id(original_node)
        if key in self.edits.blocks and isinstance(updated_node, cst.IndentedBlock):
            updated_node = self.edits.blocks[key](updated_node)
        if key in self.edits.nodes:
            return self.edits.nodes[key](updated_node)
        return updated_node


def apply_fixes(
    module: cst.Module,
    fixes: list[tuple[Fix, int]],
    torch_namer: TorchNamer | None = None,
) -> tuple[str, list[Fix], set[str]]:
    """Apply non-overlapping fixes (one per scope), each given with its finding's line.

    Returns the new code, the fixes applied, and the aliases under which torch must be
    imported (`torch`, or a fresh one where `torch` means something else)."""
    edits = Edits(default_indent=module.default_indent)
    applied: list[Fix] = []
    scopes: set[int] = set()
    for fix, line in fixes:
        if id(fix.scope) in scopes:
            continue
        scopes.add(id(fix.scope))
        name, needs_import = torch_namer(line) if torch_namer else ("torch", False)
        fix.build(edits.scoped(name, needs_import))
        applied.append(fix)
    new_module = module.visit(_Apply(edits))
    return new_module.code, applied, edits.imports


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
