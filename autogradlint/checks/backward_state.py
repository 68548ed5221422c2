"""AGL406 / AGL408 / AGL409: backward changes a gradient it was handed, destroys ctx state,
or writes into a tensor it saved."""

from __future__ import annotations

import libcst as cst

from ..analysis.contract import ALIASING, mutation, returned_names, save_for_backward_calls
from ..analysis.facts import ClassInfo
from ..analysis.flow import MethodFlow
from ..analysis.names import dotted
from .base import Check
from .common import source_of
from .gradient_copy import copy_gradient_first


class BackwardState(Check):
    """AGL406 (in-place change of an incoming gradient), AGL408 (ctx state consumed) and
    AGL409 (in-place change of a saved input or output)."""

    def run(self) -> None:
        for info in self.ctx.contract().classes():
            backward = info.methods.get("backward")
            if backward is None:
                continue
            self.ctx.enter(info.node)
            self._backward_inplace(info.name, backward)
            self._backward_ctx_state(info, backward)
            self._backward_saved_inplace(info, backward)
        for op in self.ctx.facts.custom_ops:
            if op.backward is None:
                continue
            # a custom op's backward gets the same shared gradient buffers (B2.1, B1.6)
            self.ctx.enter(op.op if op.op.isidentifier() else None)
            self._backward_inplace(op.op, op.backward)

    def _backward_inplace(self, name: str, backward: cst.FunctionDef) -> None:
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
                self.report("AGL406", found[1], fix=fix, cls=name, name=origin)

    def _backward_saved_inplace(self, info: ClassInfo, backward: cst.FunctionDef) -> None:
        """A saved tensor changed in place in backward, when forward saved one of its inputs
        or its output: the caller holds that tensor (semantics D9.1, D9.2)."""
        forward = self.ctx.contract().method(info, "forward")
        if forward is None:
            return
        saved = self._saved_from_forward(forward)
        if not saved:
            return
        flow = self.ctx.flow(backward)
        ctx_name = flow.params[0] if flow.params else None
        reported: set[int] = set()
        for node, order in flow.statements:
            found = mutation(node)
            if found is None:
                continue
            slot = _saved_slot(found[0], flow, order, ctx_name)
            if slot is None or slot[1] not in saved or slot[1] in reported:
                continue
            name, index = slot
            reported.add(index)
            self.report("AGL409", found[1], cls=info.name, name=name, detail=saved[index])

    def _saved_from_forward(self, forward: cst.FunctionDef) -> dict[int, str]:
        """Slot -> "input `x`" / "output `out`" for what forward's one `save_for_backward`
        call saves of the caller's tensors (its own intermediates are left out)."""
        flow = self.ctx.flow(forward)
        if not flow.params:
            return {}
        ctx_name, inputs = flow.params[0], set(flow.params[1:])
        calls = save_for_backward_calls(flow, ctx_name)
        if len(calls) != 1 or any(arg.star for arg in calls[0].node.args):
            return {}
        call = calls[0]
        returned = returned_names(flow)
        out: dict[int, str] = {}
        for position, arg in enumerate(call.node.args):
            value = arg.value
            if not isinstance(value, cst.Name):
                continue
            definition = flow.definition_before(value.value, call.order)
            if definition is not None and definition.kind == "param" and value.value in inputs:
                out[position] = f"input `{value.value}`"
            elif value.value in returned and not _rebound_after(flow, value.value, call.order):
                out[position] = f"output `{value.value}`"
        return out

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
                return dotted(expr.value) in ctx_aliases or held_on_ctx(expr)
            return isinstance(expr, cst.Name) and expr.value in attr_aliases

        def held_on_ctx(expr: cst.Attribute) -> bool:
            """`ctx.req.tensor` or `req.tensor` after `req = ctx.req`: state of an object
            that ctx holds (the caller's object, often), not an attribute of ctx itself."""
            base = expr.value
            while isinstance(base, (cst.Attribute, cst.Subscript)):
                inner = base.value
                if isinstance(base, cst.Attribute) and dotted(inner) in ctx_aliases:
                    return True
                base = inner
            return isinstance(base, cst.Name) and base.value in attr_aliases

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
            if isinstance(node, cst.Assign) and _is_none(node.value):
                # `ctx.req.tensor = None`: the object outlives this backward; a second one
                # reads None (semantics D8.2). `ctx.x = None` itself only frees memory.
                cleared = [
                    t.target
                    for t in node.targets
                    if isinstance(t.target, cst.Attribute) and held_on_ctx(t.target)
                ]
                if cleared:
                    self.report(
                        "AGL408", node, cls=info.name, code=source_of(self.ctx.facts.module, node)
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


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


SAVED_ATTRS = ("saved_tensors", "saved_variables")


def _is_saved(expr: cst.BaseExpression | None, ctx_name: str | None) -> bool:
    return (
        isinstance(expr, cst.Attribute)
        and expr.attr.value in SAVED_ATTRS
        and isinstance(expr.value, cst.Name)
        and expr.value.value == ctx_name
    )


def _saved_slot(
    expr: cst.BaseExpression, flow: MethodFlow, order: int, ctx_name: str | None, depth: int = 0
) -> tuple[str, int] | None:
    """(the name shown, the slot of `ctx.saved_tensors`) when `expr` is a saved tensor or a
    view of one: `x` after `x, w = ctx.saved_tensors`, `ctx.saved_tensors[0]`, `x.view(-1)`."""
    if depth > 20:
        return None
    if isinstance(expr, cst.Subscript):
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        if _is_saved(expr.value, ctx_name):
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                return cst.Module([]).code_for_node(expr), int(index.value.value)
            return None
        return _saved_slot(expr.value, flow, order, ctx_name, depth + 1)
    if isinstance(expr, cst.Attribute) and expr.attr.value in ALIASING:
        return _saved_slot(expr.value, flow, order, ctx_name, depth + 1)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in ALIASING:
            return _saved_slot(expr.func.value, flow, order, ctx_name, depth + 1)
        return None
    if not isinstance(expr, cst.Name):
        return None
    definition = flow.definition_before(expr.value, order)
    if definition is None or definition.value is None:
        return None
    if definition.kind == "unpack":
        if _is_saved(definition.value, ctx_name) and (definition.index or 0) >= 0:
            return expr.value, definition.index or 0
        return None
    if definition.kind == "augassign":
        return _saved_slot(cst.Name(expr.value), flow, definition.order, ctx_name, depth + 1)
    if definition.kind != "assign":
        return None
    found = _saved_slot(definition.value, flow, definition.order, ctx_name, depth + 1)
    return None if found is None else (expr.value, found[1])


def _rebound_after(flow: MethodFlow, name: str, order: int) -> bool:
    """Whether `name` is assigned again after `order` (then the returned tensor is another)."""
    return any(d.order > order and d.kind != "augassign" for d in flow.defs.get(name, ()))
