"""AGL406 / AGL408 / AGL409: backward changes a gradient it was handed, destroys ctx state,
or writes into a tensor it saved."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import libcst as cst

from ..analysis.contract import (
    ALIASING,
    mutation,
    returned_names,
    save_for_backward_calls,
)
from ..analysis.facts import ClassInfo
from ..analysis.flow import MethodFlow
from ..analysis.helper_effects import helper_calls
from ..analysis.names import dotted
from ..analysis.source_text import code_of
from ..analysis.tensor_kinds import TensorKinds
from ..analysis.walk import FastVisitor
from ..preconditions import Unproven
from .base import Check
from .common import source_of, string_value
from .gates import function_gate
from .gradient_collectives import GradientCollectives
from .gradient_copy import copy_gradient_first
from .gradient_layout import reads_layout
from .reads import Reads

# What forward saved in a slot: its description, or the intermediate's expression (its text is
# read only when a finding shows it), and whether the caller holds the tensor.
_Saved = tuple[str | cst.BaseExpression, bool]


class _SavedScope(NamedTuple):
    """One backward as AGL409 reads it: its class and flow, forward's saved slots and ctx
    attributes, and what was reported (once per slot or attribute)."""

    cls: str  # the class, or the custom op, the findings name
    flow: MethodFlow
    ctx_name: str | None
    saved: Mapping[int, _Saved]
    kept: set[str]
    reported: set[object]


@dataclass(frozen=True)
class _Write:
    """Where backward changes a tensor in place: the node reported, its order in the body, and
    whether an in-place method does it (a tensor for sure; `t += 1` may be an int)."""

    node: cst.CSTNode
    order: int
    method: bool


class _EverySlot(Mapping[int, _Saved]):
    """What `save_for_backward(*args)` saved, for forward's own `*args`: in every slot, the
    input the caller passed there (how many there are is the caller's)."""

    def __init__(self, vararg: str) -> None:
        self.vararg = vararg

    def __getitem__(self, index: int) -> _Saved:
        if index < 0:
            raise KeyError(index)
        return f"input `{self.vararg}[{index}]`", True

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and index >= 0

    def __iter__(self) -> Iterator[int]:
        return iter(())  # unbounded: looked up, never listed

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return True


def _names(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name


def _described(saved: _Saved) -> tuple[str, bool]:
    what, caller_holds = saved
    if isinstance(what, str):
        return what, caller_holds
    return f"intermediate `{code_of(what)}`", caller_holds


class BackwardState(Check):
    """AGL406 (in-place change of an incoming gradient), AGL408 (ctx state consumed) and
    AGL409 (in-place change of a saved input or output)."""

    codes = ("AGL406", "AGL408", "AGL409")
    gate = function_gate(custom_ops=True)
    reads = Reads(functions=True, custom_ops=True)

    _collectives: GradientCollectives | None = None
    # A backward of another module held to this file's forward: AGL409 is reported once, at
    # that forward (the write has no place here), as AGL401 reports a count that no longer fits.
    _at: cst.FunctionDef | None = None

    def run(self) -> None:
        contract = self.ctx.contract()
        for info in contract.backward_classes():
            backward = info.methods.get("backward")
            if backward is None:
                forward = info.methods.get("forward")
                inherited = contract.method(info, "backward") if forward is not None else None
                if forward is not None and inherited is not None and contract.is_foreign(inherited):
                    # forward here, backward in a base of another module: only this file knows
                    # what was saved (oracle K39)
                    self.ctx.enter(info.node)
                    self._at = forward
                    try:
                        self._backward_saved_inplace(info, inherited)
                    finally:
                        self._at = None
                continue
            self.ctx.enter(info.node)
            self._backward_inplace(info.name, backward)
            self._backward_ctx_state(info, backward)
            self._backward_saved_inplace(info, backward)
        for op in self.ctx.facts.custom_ops:
            if op.backward is None:
                continue
            # a custom op's backward gets the same shared gradient buffers (B2.1, B1.6)
            self.ctx.enter(op.subject)
            self._backward_inplace(op.op, op.backward)
            if op.setup_context is not None:
                # and the tensors its setup_context saved: the op's inputs and outputs are
                # the caller's (D9.1, D9.2)
                saved = self._saved_from_setup(op.setup_context)
                kept = _ctx_attributes_set(self.ctx.flow(op.setup_context))
                self._saved_inplace(op.op, op.backward, saved, kept)

    def _backward_inplace(self, name: str, backward: cst.FunctionDef) -> None:
        flow = self.ctx.flow(backward)
        contract = self.ctx.contract()
        grads = set(flow.params[1:]) | ({flow.vararg} if flow.vararg else set())
        contract.kinds(flow, grads)  # the incoming gradients are tensors
        reported: set[str] = set()
        for node, order in flow.statements:
            found = mutation(node)
            if found is None:
                continue
            origin = contract.alias_of(
                found[0], flow, order, grads, {}, setitem=isinstance(node, cst.AugAssign)
            )
            if origin and origin not in reported:
                reported.add(origin)
                partial = self._partial_write(flow, origin)
                fix = copy_gradient_first(
                    backward,
                    flow,
                    origin,
                    dense=False,
                    title=f"copy `{origin}` before changing it",
                    rule_id="AGL406",
                    unproven=[
                        Unproven("AGL406", "whole-gradient-writes", partial) if partial else None,
                        self._layout_read(flow, origin),
                    ],
                )
                self.report("AGL406", found[1], fix=fix, cls=name, name=origin, detail="")
        for site, effects, bound in helper_calls(self.ctx.summaries, flow.calls):
            for slot, value in bound:
                if slot not in effects.writes:
                    continue
                origin = contract.alias_of(value, flow, site.order, grads, {})
                if origin and origin not in reported:
                    # written in a helper (one or two calls deep): no fix offered there
                    reported.add(origin)
                    self.report("AGL406", site.node, cls=name, name=origin, detail="")
        self._backward_collectives(name, backward, flow, grads, reported)

    def _backward_collectives(
        self,
        name: str,
        backward: cst.FunctionDef,
        flow: MethodFlow,
        grads: set[str],
        reported: set[str],
    ) -> None:
        """A collective writing into a gradient (gradient_collectives.py): the same finding
        and copy, never safe: gloo ignores strides, so the copy changes non-dense results
        (B2.9)."""
        if self._collectives is None:
            self._collectives = GradientCollectives(self.ctx)
        for write in self._collectives.writes(flow, grads):
            if write.origin in reported:
                continue
            reported.add(write.origin)
            fix = copy_gradient_first(
                backward,
                flow,
                write.origin,
                dense=False,
                title=f"copy `{write.origin}` before the collective writes it",
                rule_id="AGL406",
                unproven=[
                    Unproven("AGL406", "no-collective-writes", write.why_unsafe()),
                    self._layout_read(flow, write.origin),
                ],
            )
            how = write.describe()
            self.report("AGL406", write.node, fix=fix, cls=name, name=write.origin, detail=how)

    def _layout_read(self, flow: MethodFlow, gradient: str) -> Unproven | None:
        found = reads_layout(flow, self.ctx.contract(), gradient)
        return None if found is None else Unproven("AGL406", "layout-not-read", found)

    def _partial_write(self, flow: MethodFlow, origin: str) -> str | None:
        """A write into gradient `origin` that may reach only part of it: through an index or
        a view of a part (`g[0] = v`, `g.select(0, 0).zero_()`, `h.zero_()` with `h = g[0]`),
        or through a method that may copy (`g.contiguous()`: a copy of an expanded gradient, the
        very buffer of a dense copy). On an expanded gradient (stride 0) one element's memory
        is every element's, so such a write shows everywhere, and on a private copy it does
        not (None: every write is whole)."""
        for node, _order in flow.statements:
            found = mutation(node)
            if found is None:
                continue
            reach = _reach(found[0], flow, origin, 0)
            if reach == "partial" or (reach == "whole" and isinstance(node, cst.Assign)):
                return f"`{code_of(found[1]).strip()}` may write to a part of it"
        return None

    def _backward_saved_inplace(self, info: ClassInfo, backward: cst.FunctionDef) -> None:
        """A tensor backward keeps between runs, changed in place: one forward saved with
        `save_for_backward`, or kept as a ctx attribute. The caller holds a saved input or
        output (semantics D9.1, D9.2: an error); an intermediate only a second backward
        meets again, changed (D9.3 raises, D9.4 silently scales twice: a warning)."""
        contract = self.ctx.contract()
        forward = contract.method(info, "forward")
        if forward is None:
            return
        setup = contract.method(info, "setup_context")
        if setup is not None and contract.forward_of(info, forward).ctx_name is None:
            # the setup_context style: forward has no ctx, setup_context saves
            saved: Mapping[int, _Saved] = self._saved_from_setup(setup)
            kept = _ctx_attributes_set(self.ctx.flow(setup))
        else:
            saved = self._saved_from_forward(forward)
            kept = _ctx_attributes_set(self.ctx.flow(forward))
        self._saved_inplace(info.name, backward, saved, kept)

    def _saved_inplace(
        self, cls: str, backward: cst.FunctionDef, saved: Mapping[int, _Saved], kept: set[str]
    ) -> None:
        """AGL409 in one backward, given what forward (or setup_context) saved and kept."""
        if not saved and not kept:
            return
        flow = self.ctx.flow(backward)
        ctx_name = flow.params[0] if flow.params else None  # a classmethod's `cls` is not one
        scope = _SavedScope(cls, flow, ctx_name, saved, kept, set())
        for node, order in flow.statements:
            found = mutation(node)
            if found is not None:
                # `ctx.count += 1` may be an int: a kept attribute needs an in-place method
                where = _Write(found[1], order, isinstance(node, cst.Call))
                self._saved_write(scope, found[0], where)
        self._helper_writes_saved(scope)
        self._kernel_writes_saved(scope)

    def _helper_writes_saved(self, scope: _SavedScope) -> None:
        """A saved tensor (or one kept on ctx) handed to a module-level function or a static
        method that writes it in place, one or two calls deep: reported at the call."""
        flow = scope.flow
        home = self.ctx.contract().foreign_paths.get(id(flow.function))  # helpers of its file
        for site, effects, bound in helper_calls(self.ctx.summaries, flow.calls, home):
            for slot, value in bound:
                if slot in effects.writes:
                    where = _Write(site.node, site.order, slot in effects.method_writes)
                    self._saved_write(scope, value, where)

    def _saved_write(self, scope: _SavedScope, written: cst.BaseExpression, where: _Write) -> None:
        """AGL409 when `written` (changed in place at `where`) is a saved tensor or a tensor
        kept on ctx, once per slot or attribute."""
        cls, flow, ctx_name, saved, kept, reported = scope
        kinds = self.ctx.contract().kinds(flow)
        setitem = isinstance(where.node, cst.AugAssign)
        slot = _saved_slot(written, flow, where.order, ctx_name, kinds, setitem=setitem)
        if slot is not None and slot[1] in saved:
            name, index = slot
            if index in reported:
                return
            reported.add(index)
            detail, caller_holds = _described(saved[index])
            self._report_saved(
                where.node,
                cls=cls,
                name=name,
                detail=detail,
                consequence=_CALLER_HOLDS if caller_holds else _SECOND_BACKWARD_RAISES,
                severity=None if caller_holds else "warning",
            )
            return
        attribute = _kept_attribute(written, flow, where.order, ctx_name)
        if (
            attribute is not None
            and attribute in kept
            and where.method
            and attribute not in reported
            and not _assigned_in(flow, ctx_name, attribute, where.order)
        ):
            reported.add(attribute)
            self._report_saved(
                where.node,
                cls=cls,
                name=f"{ctx_name}.{attribute}",
                detail="tensor kept on ctx",
                consequence=_SECOND_BACKWARD_CHANGED,
                severity="warning",
            )

    def _kernel_writes_saved(self, scope: _SavedScope) -> None:
        """A saved tensor handed to a helper whose Triton launch stores into it (liger's
        `element_mul_kernel` scaling the gradient forward saved): a write the version counter
        never hears of, so even a second backward does not raise (semantics D9.5)."""
        cls, flow, ctx_name, saved, _kept, reported = scope
        summaries = self.ctx.summaries
        kinds = self.ctx.contract().kinds(flow)
        for site in flow.calls:
            call = site.node
            written = dotted(call.func)
            if site.in_nested_def or written is None:
                continue
            slots = {
                position: slot
                for position, arg in enumerate(call.args)
                if arg.keyword is None
                and not arg.star
                and (slot := _saved_slot(arg.value, flow, site.order, ctx_name, kinds)) is not None
                and slot[1] in saved
                and slot[1] not in reported
            }
            if not slots or any(arg.star for arg in call.args):
                continue
            found = summaries.function(written)
            summary = summaries.summary(*found) if found is not None else None
            if summary is None:
                continue
            for position, (name, index) in slots.items():
                reach = next(
                    (
                        r
                        for r in summary.reaches
                        if r.param == position and r.direct and summaries.kernel_writes(r)
                    ),
                    None,
                )
                if reach is None or index in reported:
                    continue
                reported.add(index)
                detail, caller_holds = _described(saved[index])
                kernel = reach.callee.lstrip(".")
                self._report_saved(
                    call.args[position].value,
                    cls=cls,
                    name=name,
                    detail=f"{detail}, stored into by the Triton kernel `{kernel}` through `{written}`",
                    consequence=_KERNEL_CALLER_HOLDS if caller_holds else _KERNEL_SECOND_BACKWARD,
                    severity=None if caller_holds else "warning",
                )

    def _report_saved(
        self,
        node: cst.CSTNode,
        *,
        cls: str,
        name: str,
        detail: str,
        consequence: str,
        severity: str | None,
    ) -> None:
        """AGL409 at the write; or, for a backward of another module, at this file's forward
        (once: the first write found)."""
        at = self._at
        anchor = None if at is None else at.name
        self._at = None  # at the forward: one finding per forward
        self.report(
            "AGL409",
            node if at is None else at,
            anchor=anchor,
            severity=severity,
            cls=cls,
            name=name,
            detail=detail,
            consequence=consequence,
        )

    def _saved_from_setup(self, setup: cst.FunctionDef) -> dict[int, _Saved]:
        """The same for a `setup_context(ctx, inputs, output)`: a forward input unpacked from
        `inputs` (`x, w = inputs`, `inputs[0]`) or the output (`output`, unpacked from it)
        is the caller's; anything else setup_context computed is an intermediate."""
        flow = self.ctx.flow(setup)
        if len(flow.params) < 3:
            return {}
        # torch.library passes them by keyword; a Function's setup_context gets them in order
        ctx_name, inputs_name, output_name = flow.params[:3]
        if "inputs" in flow.params and "output" in flow.params:
            inputs_name, output_name = "inputs", "output"
        calls = save_for_backward_calls(flow, ctx_name)
        if not calls or any(arg.star for site in calls for arg in site.node.args):
            return {}
        if len({code_of(site.node) for site in calls}) != 1:
            return {}
        call = calls[-1]
        out: dict[int, _Saved] = {}
        for position, arg in enumerate(call.node.args):
            value = _view_base(arg.value)
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            source = _unpacked_from(value, flow, call.order, (inputs_name, output_name))
            if source == inputs_name:
                out[position] = (f"input `{code_of(value)}`", True)
            elif source == output_name:
                out[position] = (f"output `{code_of(value)}`", True)
            else:
                out[position] = (arg.value, False)
        return out

    def _saved_from_forward(self, forward: cst.FunctionDef) -> Mapping[int, _Saved]:
        """Slot -> (what forward's one `save_for_backward` call saved there, whether the
        caller holds it): "input `x`" / "output `out`" (also through a view or `.detach()`
        of one), else the intermediate's expression (shown only in a finding)."""
        flow = self.ctx.flow(forward)
        if not flow.params:
            return {}
        ctx_name, inputs = flow.params[0], set(flow.params[1:])
        calls = save_for_backward_calls(flow, ctx_name)
        if len(calls) == 1 and flow.vararg is not None:
            # `save_for_backward(*args)` of forward's own `*args`: every slot is an input
            args = calls[0].node.args
            if len(args) == 1 and args[0].star == "*" and _names(args[0].value, flow.vararg):
                return _EverySlot(flow.vararg)
        if not calls or any(arg.star for site in calls for arg in site.node.args):
            return {}
        # Several calls that save the same values (a repeated line, Megatron's cross entropy):
        # the last replaces the others (D4.3) with what they saved, so the slots are one call's.
        if len({code_of(site.node) for site in calls}) != 1:
            return {}
        call = calls[-1]
        contract = self.ctx.contract()
        returned = returned_names(flow)
        out: dict[int, _Saved] = {}
        for position, arg in enumerate(call.node.args):
            value = _view_base(arg.value)
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            if isinstance(value, cst.Name):
                # the input itself, or a local that is still it (`exp = logits`; also a view)
                origin = contract.alias_of(value, flow, call.order, inputs, {})
                if origin is not None:
                    alias = "" if origin == value.value else f" (saved as `{value.value}`)"
                    out[position] = (f"input `{origin}`{alias}", True)
                    continue
                if value.value in returned and not _rebound_after(flow, value.value, call.order):
                    out[position] = (f"output `{value.value}`", True)
                    continue
            out[position] = (arg.value, False)
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

        read: set[str] = set()  # ctx attributes backward has read so far
        tested = _tested_values(backward, flow)
        for node, _order in flow.statements:
            cleared_own = (
                {a for a in _ctx_targets(node, ctx_name) & read if f"{ctx_name}.{a}" not in tested}
                if isinstance(node, cst.Assign) and _is_none(node.value)
                else set()
            )
            if cleared_own:
                # `buffer = ctx.buffer; ...; ctx.buffer = None`: freeing what it read leaves
                # None for a second backward (D8.3); `save_for_backward` frees by itself.
                self.report(
                    "AGL408", node, cls=info.name, code=source_of(self.ctx.facts.module, node)
                )
                return
            read |= _ctx_reads(node, ctx_name)
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
                # reads None (semantics D8.2).
                cleared = [
                    t.target
                    for t in node.targets
                    if isinstance(t.target, cst.Attribute)
                    and held_on_ctx(t.target)
                    and dotted(t.target) not in tested
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
                if (
                    consumes
                    and on_ctx(node.func.value)
                    and not self._refilled(info, node, ctx_name)
                ):
                    self.report(
                        "AGL408", node, cls=info.name, code=source_of(self.ctx.facts.module, node)
                    )
                    return
        self._helper_consumes(info, flow, ctx_aliases | attr_aliases)

    def _helper_consumes(self, info: ClassInfo, flow: MethodFlow, holders: set[str]) -> None:
        """ctx (or an object it holds) handed to a module-level function or a static method
        that consumes its state, one or two calls deep: reported at the call."""
        for site, effects, bound in helper_calls(self.ctx.summaries, flow.calls):
            for slot, value in bound:
                if slot in effects.consumes and _held_by(value, holders):
                    code = f"{code_of(site.node).strip()}: {effects.consumes[slot]}"
                    self.report("AGL408", site.node, cls=info.name, code=code)
                    return

    def _refilled(self, info: ClassInfo, call: cst.Call, ctx_name: str) -> bool:
        """`ctx.side.pop("bw")` where the backward of another Function of the file sets
        `ctx.side["bw"] = ...`: a hand-off the paired backward refills before each pass
        (thunder's ThunderOutputFunction and ThunderFunction, semantics D8.4)."""
        assert isinstance(call.func, cst.Attribute)  # `<holder>.pop(...)`
        holder = call.func.value
        key = string_value(call.args[0].value) if call.args else None
        if key is None or not (
            isinstance(holder, cst.Attribute) and dotted(holder.value) == ctx_name
        ):
            return False
        attr = holder.attr.value
        for other in self.ctx.contract().classes():
            backward = other.methods.get("backward")
            if other is info or backward is None:
                continue
            flow = self.ctx.flow(backward)
            other_ctx = flow.params[0] if flow.params else None
            for node, _order in flow.statements:
                if not isinstance(node, cst.Assign):
                    continue
                for target in node.targets:
                    written = target.target
                    if (
                        isinstance(written, cst.Subscript)
                        and isinstance(written.value, cst.Attribute)
                        and written.value.attr.value == attr
                        and dotted(written.value.value) == other_ctx
                        and len(written.slice) == 1
                        and isinstance(written.slice[0].slice, cst.Index)
                        and string_value(written.slice[0].slice.value) == key
                    ):
                        return True
        return False


# The help line, by who meets the changed tensor (rules/AGL409.yaml's `{consequence}`).
_CALLER_HOLDS = (
    "The caller holds that tensor: after backward it silently holds other values, and a second "
    'backward through the graph (retain_graph=True) raises "one of the variables needed for '
    'gradient computation has been modified by an inplace operation".'
)
_SECOND_BACKWARD_RAISES = (
    "The first backward is right; a second backward through the graph (retain_graph=True) "
    'raises "one of the variables needed for gradient computation has been modified by an '
    'inplace operation".'
)
_SECOND_BACKWARD_CHANGED = (
    "The first backward is right; a second backward through the graph (retain_graph=True) "
    "starts from the changed tensor and silently returns another gradient (scaled twice, for "
    "`mul_`)."
)


# A kernel's write bypasses the version counter (D9.5): nothing raises, ever.
_KERNEL_CALLER_HOLDS = (
    "The caller holds that tensor: after backward it silently holds other values, and since a "
    "kernel's write never bumps the version counter, a second backward (retain_graph=True) "
    "does not raise either: it silently starts from the changed values."
)
_KERNEL_SECOND_BACKWARD = (
    "The first backward is right; a kernel's write never bumps the version counter, so a second "
    "backward through the graph (retain_graph=True) raises nothing and silently returns another "
    "gradient (scaled twice, for a scaling kernel)."
)


def _held_by(expr: cst.BaseExpression, holders: set[str]) -> bool:
    """`ctx`, `ctx.k`, `ctx.k.v` or a local bound to `ctx.k`: ctx or state it holds."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value in holders


def _view_base(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`x` for `x.detach()`, `x.view(-1)`, `x.data`: what shares its storage."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value not in ALIASING:
                return expr
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute) and expr.attr.value in ALIASING:
            expr = expr.value
        else:
            return expr


def _ctx_attributes_set(flow: MethodFlow) -> set[str]:
    """The ctx attributes forward assigns (`ctx.k = ...`, `out, ctx.grads = kernel(...)`)."""
    ctx_name = flow.params[0] if flow.params else None
    found: set[str] = set()
    for node, _order in flow.statements:
        if isinstance(node, cst.Assign):
            found |= _ctx_targets(node, ctx_name)
    return found


def _kept_attribute(
    expr: cst.BaseExpression, flow: MethodFlow, order: int, ctx_name: str | None
) -> str | None:
    """`k` when `expr` is `ctx.k`, a view of it, or a local bound to one (`g = ctx.k`)."""
    expr = _view_base(expr)
    if isinstance(expr, cst.Attribute) and dotted(expr.value) == ctx_name:
        return expr.attr.value
    if isinstance(expr, cst.Name):
        definition = flow.definition_before(expr.value, order)
        if (
            definition is not None
            and definition.kind == "assign"
            and definition.expression is not None
        ):
            value = _view_base(definition.expression)
            if isinstance(value, cst.Attribute) and dotted(value.value) == ctx_name:
                return value.attr.value
    return None


def _assigned_in(flow: MethodFlow, ctx_name: str | None, attribute: str, order: int) -> bool:
    """Whether backward itself set `ctx.<attribute>` before `order` (a fresh buffer)."""
    for node, at in flow.statements:
        if at >= order:
            break
        if isinstance(node, cst.Assign) and attribute in _ctx_targets(node, ctx_name):
            return True
    return False


class _CtxReads(FastVisitor):
    def __init__(self, ctx_name: str | None) -> None:
        self.ctx_name = ctx_name
        self.found: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == self.ctx_name:
            self.found.add(node.attr.value)


def _ctx_reads(node: cst.CSTNode, ctx_name: str | None) -> set[str]:
    """The ctx attributes a statement reads (an assignment's ctx targets are not reads)."""
    visitor = _CtxReads(ctx_name)
    if isinstance(node, cst.Assign):
        visitor.walk(node.value)
        for target in node.targets:  # `ctx.cache[k] = v` reads ctx.cache
            if not isinstance(target.target, cst.Attribute):
                visitor.walk(target.target)
    else:
        visitor.walk(node)
    return visitor.found


class _Tests(FastVisitor):
    """The values a method tests (`if x`, `x is None`, `a if x else b`, `x and y`, `not x`)."""

    def __init__(self) -> None:
        self.found: set[str] = set()

    def _add(self, expr: cst.BaseExpression) -> None:
        text = dotted(expr)
        if text is not None:
            self.found.add(text)

    def visit_If(self, node: cst.If) -> None:
        self._add(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._add(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._add(node.test)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self._add(node.left)
        self._add(node.right)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if isinstance(node.operator, cst.Not):
            self._add(node.expression)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if any(_is_none(c.comparator) for c in node.comparisons):
            self._add(node.left)


def _tested_values(method: cst.FunctionDef, flow: MethodFlow) -> set[str]:
    """What backward tests for None or truth, as written (`t.saved_data`, `ctx.pinned`), and
    through a local bound to it (`pinned = ctx.pinned; ... if pinned`): state cleared to None
    that backward checks before use is handled, not consumed."""
    visitor = _Tests()
    visitor.walk(method)
    found = set(visitor.found)
    for name in visitor.found:
        for definition in flow.defs.get(name, ()):
            value = definition.expression
            if definition.kind == "assign" and value is not None:
                text = dotted(value)
                if text is not None:
                    found.add(text)
    return found


def _ctx_targets(node: cst.Assign, ctx_name: str | None) -> set[str]:
    """The ctx attributes one assignment binds, tuple targets included."""
    found: set[str] = set()
    for target in node.targets:
        stack: list[cst.BaseExpression] = [target.target]
        while stack:
            current = stack.pop()
            if isinstance(current, (cst.Tuple, cst.List)):
                stack.extend(element.value for element in current.elements)
            elif isinstance(current, cst.Attribute) and dotted(current.value) == ctx_name:
                found.add(current.attr.value)
    return found


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
    expr: cst.BaseExpression,
    flow: MethodFlow,
    order: int,
    ctx_name: str | None,
    kinds: TensorKinds,
    depth: int = 0,
    setitem: bool = False,
) -> tuple[str, int] | None:
    """(the name shown, the slot of `ctx.saved_tensors`) when `expr` is a saved tensor or a
    view of one: `x` after `x, w = ctx.saved_tensors`, `ctx.saved_tensors[0]`, `x.view(-1)`.
    Indexing with a tensor, a list or a mask copies (semantics D5.4): `count[row]` is not,
    except as the target it is written through (`setitem`: `x[rows, cols] -= v` writes x)."""
    if depth > 20:
        return None
    if isinstance(expr, cst.Subscript):
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        held: cst.BaseExpression | None = expr.value
        if isinstance(held, cst.Name):
            # `inputs = ctx.saved_tensors` then `inputs[0]`
            definition = flow.definition_before(held.value, order)
            if definition is not None and definition.kind == "assign":
                if _is_saved(definition.expression, ctx_name):
                    held = definition.expression
        if _is_saved(held, ctx_name):
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                return code_of(expr), int(index.value.value)
            return None
        if not setitem and kinds.index_copies(expr, order):
            return None
        return _saved_slot(expr.value, flow, order, ctx_name, kinds, depth + 1)
    base = _view_base(expr)  # a view of a saved tensor is that tensor's storage
    if base is not expr:
        return _saved_slot(base, flow, order, ctx_name, kinds, depth + 1)
    if not isinstance(expr, cst.Name):
        return None
    definition = flow.definition_before(expr.value, order)
    if definition is None or definition.value is None:
        return None
    if definition.kind == "augassign":
        return _saved_slot(cst.Name(expr.value), flow, definition.order, ctx_name, kinds, depth + 1)
    value = definition.expression
    assert value is not None  # neither a parameter nor an augmented assignment
    if definition.kind == "unpack":
        if _is_saved(value, ctx_name) and (definition.index or 0) >= 0:
            return expr.value, definition.index or 0
        return None
    if definition.kind != "assign":
        return None
    found = _saved_slot(value, flow, definition.order, ctx_name, kinds, depth + 1)
    return None if found is None else (expr.value, found[1])


def _unpacked_from(
    expr: cst.BaseExpression, flow: MethodFlow, order: int, sources: tuple[str, ...]
) -> str | None:
    """Which of setup_context's parameters `sources` (`inputs`, `output`) `expr` is, or is an
    element of (`inputs[0]`; `x` after `x, w = inputs` or `x = inputs[0]`), unchanged since."""
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        index = expr.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
            expr = expr.value
    if not isinstance(expr, cst.Name):
        return None
    definition = flow.definition_before(expr.value, order)
    if definition is None:
        return None
    if definition.kind == "param":
        return expr.value if expr.value in sources else None
    value = definition.expression
    if definition.kind not in ("assign", "unpack") or value is None:
        return None
    if definition.kind == "unpack" and not isinstance(value, cst.Name):
        return None  # `a, b = f(inputs)`: not the elements themselves
    return _unpacked_from(value, flow, definition.order, sources)


def _rebound_after(flow: MethodFlow, name: str, order: int) -> bool:
    """Whether `name` is assigned again after `order` (then the returned tensor is another)."""
    return any(d.order > order and d.kind != "augassign" for d in flow.defs.get(name, ()))


# Steps that give the whole tensor (a view of all of it, in the same memory), and steps that
# give a part or may copy: what decides whether a write through them reaches the whole gradient.
_WHOLE_METHODS = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "flatten",
        "t",
        "transpose",
        "permute",
        "squeeze",
        "unsqueeze",
        "detach",
        "movedim",
        "swapaxes",
    }
)
_WHOLE_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data"})


def _reach(expr: cst.BaseExpression, flow: MethodFlow, origin: str, depth: int) -> str:
    """How a write into `expr` reaches gradient `origin`: "whole", "partial" (through an
    index, a view of a part, or a method that may copy), or "none" (a new tensor)."""
    if depth > 16:
        return "partial"
    partial = False
    while isinstance(expr, (cst.Attribute, cst.Call, cst.Subscript)):
        if isinstance(expr, cst.Subscript):
            partial, expr = True, expr.value
        elif isinstance(expr, cst.Call):
            func = expr.func
            if not isinstance(func, cst.Attribute):
                return "none"  # `torch.cat(...)`, `f(g)`: a tensor of its own
            if func.attr.value not in _WHOLE_METHODS:
                partial = True
            expr = func.value
        else:
            if expr.attr.value not in _WHOLE_ATTRIBUTES:
                partial = True
            expr = expr.value
    if not isinstance(expr, cst.Name):
        return "none"
    if expr.value == origin:
        return "partial" if partial else "whole"
    found = "none"
    for definition in flow.defs.get(expr.value, ()):
        if definition.kind == "augassign":
            continue  # `h *= 2` keeps what `h` holds
        value = definition.expression
        if value is None:
            inner = "partial" if definition.kind != "param" else "none"
        else:
            inner = _reach(value, flow, origin, depth + 1)
            if inner != "none" and definition.kind in ("unpack", "loop", "with"):
                inner = "partial"  # an element of it (`a, b = g`, `for row in g`)
        if inner == "partial" or (inner == "whole" and partial):
            return "partial"
        if inner == "whole":
            found = "whole"
    return found
