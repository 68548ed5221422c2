"""AGL406 / AGL408: backward changes a gradient it was handed, or destroys ctx state."""

from __future__ import annotations

import libcst as cst

from ..analysis.contract import mutation
from ..analysis.facts import ClassInfo
from ..analysis.names import dotted
from .base import Check
from .common import source_of
from .gradient_copy import copy_gradient_first


class BackwardState(Check):
    """AGL406 (in-place change of an incoming gradient) and AGL408 (ctx state consumed)."""

    def run(self) -> None:
        for info in self.ctx.contract().classes():
            backward = info.methods.get("backward")
            if backward is None:
                continue
            self.ctx.enter(info.node)
            self._backward_inplace(info, backward)
            self._backward_ctx_state(info, backward)

    def _backward_inplace(self, info: ClassInfo, backward: cst.FunctionDef) -> None:
        flow = self.ctx.flow(backward)
        contract = self.ctx.contract()
        grads = set(flow.params[1:]) | ({flow.vararg} if flow.vararg else set())
        reported: set[str] = set()
        for node, order in flow.statements:
            found = mutation(node)
            if found is None:
                continue
            origin = contract.alias_of(found[0], flow, order, grads, {})
            if origin and origin not in reported:
                reported.add(origin)
                fix = copy_gradient_first(
                    backward, flow, origin, dense=False, title=f"copy `{origin}` before changing it"
                )
                self.report("AGL406", found[1], fix=fix, cls=info.name, name=origin)

    def _backward_ctx_state(self, info: ClassInfo, backward: cst.FunctionDef) -> None:
        flow = self.ctx.flow(backward)
        ctx_name = flow.params[0] if flow.params else "ctx"
        ctx_aliases = {ctx_name}
        attr_aliases: set[str] = set()
        for name, defs in flow.defs.items():
            for d in defs:
                if isinstance(d.value, cst.Attribute) and dotted(d.value.value) == ctx_name:
                    attr_aliases.add(name)

        def on_ctx(expr: cst.BaseExpression) -> bool:
            while isinstance(expr, cst.Subscript):
                expr = expr.value
            if isinstance(expr, cst.Attribute):
                return dotted(expr.value) in ctx_aliases
            return isinstance(expr, cst.Name) and expr.value in attr_aliases

        for node, _order in flow.statements:
            if isinstance(node, cst.Del):
                target = node.target
                targets = (
                    [e.value for e in target.elements]
                    if isinstance(target, cst.Tuple)
                    else [target]
                )
                for t in targets:
                    if isinstance(t, cst.Name):
                        continue  # `del local` only unbinds the local name
                    if on_ctx(t):
                        self.report(
                            "AGL408",
                            node,
                            cls=info.name,
                            code=source_of(self.ctx.facts.module, node),
                        )
                        return
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                # A bare `.pop()` takes from a stack a paired Function refills (fairscale's pipe
                # checkpointing); popping a key or clearing destroys state for good.
                method = node.func.attr.value
                consumes = (method == "pop" and node.args) or method in ("popitem", "clear")
                if consumes and on_ctx(node.func.value):
                    self.report(
                        "AGL408", node, cls=info.name, code=source_of(self.ctx.facts.module, node)
                    )
                    return
