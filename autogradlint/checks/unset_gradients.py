"""AGL412: backward returns a gradient it assigned only on some paths.

`if ctx.needs_input_grad[1]: gw = g * x` followed by `return gx, gw` works while every input
requires grad and raises UnboundLocalError as soon as one does not (a frozen weight, semantics
D12.1). The fix sets the name to None at the top of backward: every path that did not raise
read a value assigned on it, so it is unchanged, and the paths that raised return None (FIX-D1).
That is right when the skipped assignment is guarded by `needs_input_grad` (the input needs no
gradient); for any other branch None is silently no gradient for an input that may need one
(D12.3), so the same fix is then in the unsafe tier.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.flow import MethodFlow
from ..analysis.unbound import unbound_reads
from ..edits import Edits, Fix
from ..preconditions import Unproven, verdict
from .base import Check
from .common import body_start
from .fix_proofs import introspects_locals


class UnsetGradients(Check):
    """AGL412 on every Function backward and custom-op backward of the file."""

    def run(self) -> None:
        for info in self.ctx.contract().classes():
            backward = info.methods.get("backward")
            if backward is not None:
                self.ctx.enter(info.node)
                self._check(info.name, backward)
        for op in self.ctx.facts.custom_ops:
            if op.backward is not None:
                self.ctx.enter(op.subject)
                self._check(op.op, op.backward)

    def _check(self, owner: str, backward: cst.FunctionDef) -> None:
        reads = unbound_reads(backward)
        if not reads:
            return
        flow = self.ctx.flow(backward)
        needs = _needs_names(flow)
        for read in reads:
            guards = read.skipped
            when = " and ".join(
                f"`{text}` is {'true' if value else 'false'}" for text, value in sorted(guards)
            )
            other = [text for text, _ in guards if not _mentions_needs(text, needs)]
            why = (
                f"`{other[0]}` decides it"
                if other
                else "no branch decides it"
                if not guards
                else ""
            )
            self.report(
                "AGL412",
                read.node,
                fix=_none_first(backward, read.name, why),
                cls=owner,
                name=read.name,
                detail=when or "a branch skips its assignment",
            )


def _needs_names(flow: MethodFlow) -> set[str]:
    """Locals bound from `ctx.needs_input_grad` (`needs_x, needs_w = ctx.needs_input_grad`)."""
    out: set[str] = set()
    for name, definitions in flow.defs.items():
        for definition in definitions:
            value = definition.expression
            if value is not None and _reads_needs(value):
                out.add(name)
    return out


def _reads_needs(expr: cst.CSTNode) -> bool:
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute) and node.attr.value == "needs_input_grad":
            return True
        stack.extend(node.children)
    return False


def _mentions_needs(text: str, needs: set[str]) -> bool:
    if "needs_input_grad" in text:
        return True
    words = set(text.replace("(", " ").replace(")", " ").replace("[", " ").split())
    return bool(words & needs)


def _none_first(backward: cst.FunctionDef, name: str, unguarded: str) -> Fix | None:
    """`name = None` as the first statement of backward (after its docstring); safe when no
    branch but a `needs_input_grad` test skips the assignment (`unguarded` says which does)
    and backward reads its variables only by name."""
    if not isinstance(backward.body, cst.IndentedBlock):
        return None
    block = backward.body
    index = body_start(block)

    def build(edits: Edits) -> None:
        def edit(updated: cst.IndentedBlock) -> cst.IndentedBlock:
            body = list(updated.body)
            statement = cst.parse_statement(f"{name} = None\n")
            if index < len(body):
                first = body[index]
                leading = getattr(first, "leading_lines", ())
                body[index] = first.with_changes(leading_lines=())
                statement = statement.with_changes(leading_lines=leading)
            body.insert(index, statement)
            return updated.with_changes(body=body)

        edits.blocks[id(block)] = edit

    introspected = introspects_locals(backward)
    safety, note = verdict(
        [
            Unproven("AGL412", "needs-input-grad-guard", unguarded) if unguarded else None,
            Unproven("AGL412", "locals-not-introspected", introspected) if introspected else None,
        ]
    )
    return Fix(safety, backward, build, f"set `{name}` to None at the top of backward", note)
