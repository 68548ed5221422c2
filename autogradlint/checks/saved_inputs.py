"""AGL203: a forward input saved as it came reaches compiled code in backward, read as dense."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from ..analysis.compiled import RAW_READ, compiled_by_evidence, compiled_callee
from ..analysis.flow import CallSite, MethodFlow
from ..analysis.names import dotted
from ..analysis.reading import Unreadable
from ..analysis.source_text import code_of
from .compiled_grads import OTHER_STRIDES, CompiledGradients, GradState
from .gates import function_gate
from .reads import Reads

_SAVED = frozenset({"saved_tensors", "saved_variables"})
# AGL201's sentences (shared evidence) speak of a gradient; AGL203's tensor is a saved input.
_AS_INPUT = (
    ("how it reads the gradient", "how it reads the tensor"),
    (
        "a gradient laid out otherwise (the stride-0 one of `out.sum()`, a transposed one)",
        "an input laid out otherwise (a transposed or sliced one)",
    ),
    ("a non-contiguous gradient", "a non-contiguous input"),
)


@dataclass(frozen=True)
class SavedInput:
    """A forward input that `save_for_backward` keeps as it came (no dense copy)."""

    name: str  # forward's parameter
    # Where forward (or a project function it calls) makes a dense copy of this input for its
    # own kernel: the evidence that it may arrive non-contiguous and that the kernels want it
    # dense. Empty when forward shows nothing of the sort.
    dense: str
    # Forward hands the input as it came to compiled code itself: a layout the kernels refuse
    # fails in forward already, so backward only ever sees what forward accepted.
    raw_in_forward: bool


@dataclass(frozen=True)
class _Forward:
    """Where a backward's forward saves its inputs: the function holding the save, the
    forward computing with them, and how the save's arguments name forward's inputs."""

    saver: cst.FunctionDef  # forward, or setup_context
    forward: cst.FunctionDef | None  # the function whose parameters are the inputs
    skip: int  # forward's leading parameters that are not inputs (ctx)
    inputs: str | None  # setup_context's `inputs` parameter (None: the save is in forward)


class SavedInputs(CompiledGradients):
    """AGL203: what backward does with a saved raw forward input, read as AGL201 reads a
    gradient, reported only where forward shows the input may arrive non-contiguous (it makes
    a dense copy for its own kernel) or the backward kernel is proven to read it raw."""

    codes: ClassVar[tuple[str, ...]] = ("AGL203",)
    gate = function_gate(b"save_for_backward", custom_ops=True)
    reads = Reads(functions=True, custom_ops=True)
    read_code = "AGL203"

    # --- what is tracked: backward's names for the saved raw inputs --------------------------
    def _tracked(self, flow: MethodFlow) -> set[str]:
        self._flow = flow
        self._saved = self._saved_inputs()
        self._roots: dict[str, SavedInput] = {}
        if not self._saved or not flow.params:
            return set()
        self._ctx = flow.params[0]
        return {"<saved>"}  # the roots are bindings of ctx.saved_tensors, not parameters

    def _origin(self, expr: cst.BaseExpression, flow: MethodFlow, order: int) -> GradState | None:
        position = self._saved_position(expr, flow, order)
        saved = self._saved.get(position) if position is not None else None
        if saved is None:
            return None
        root = expr.value if isinstance(expr, cst.Name) else code_of(expr)
        self._roots[root] = saved
        return GradState(root, False, False, root)

    def _saved_position(self, expr: cst.BaseExpression, flow: MethodFlow, order: int) -> int | None:
        """The position in `ctx.saved_tensors` that `expr` is bound to: a name unpacked from
        it (`x, w = ctx.saved_tensors`) or an element picked from it (`ctx.saved_tensors[0]`)."""
        if isinstance(expr, cst.Name):
            definition = flow.definition_before(expr.value, order)
            value = definition.expression if definition is not None else None
            if definition is not None and definition.kind == "unpack" and self._is_saved(value):
                return definition.index if (definition.index or 0) >= 0 else None
            return None
        if isinstance(expr, cst.Subscript) and self._is_saved(expr.value):
            index = expr.slice[0].slice if len(expr.slice) == 1 else None
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                return int(index.value.value)
        return None

    def _is_saved(self, value: cst.BaseExpression | None) -> bool:
        return (
            isinstance(value, cst.Attribute)
            and value.attr.value in _SAVED
            and isinstance(value.value, cst.Name)
            and value.value.value == self._ctx
        )

    # --- what forward saved, and what it shows about the input's layout ---------------------
    def _saved_inputs(self) -> dict[int, SavedInput]:
        """Position in `saved_tensors` -> the forward input saved there as it came."""
        found = self._forward()
        if found is None:
            return {}
        saver = self.ctx.flow(found.saver)
        forward = self.ctx.flow(found.forward) if found.forward is not None else None
        inputs = forward.params[found.skip :] if forward is not None else []
        by_position: dict[int, str | None] = {}
        for site in saver.calls:
            if dotted(site.node.func) != f"{saver.params[0]}.save_for_backward":
                continue
            for position, arg in enumerate(site.node.args):
                if arg.star or arg.keyword is not None:
                    break
                name = self._input_saved(arg.value, saver, site.order, found, inputs)
                # Two saves that keep different tensors at one position: neither is certain.
                if by_position.setdefault(position, name) != name:
                    by_position[position] = None
        saved: dict[int, SavedInput] = {}
        for position, name in by_position.items():
            if name is not None and forward is not None:
                saved[position] = SavedInput(name, *self._forward_use(forward, name))
        return saved

    def _forward(self) -> _Forward | None:
        """The function that saves (forward, or setup_context) and the forward whose
        parameters are the inputs, for the backward being read."""
        node = self.info.node
        if node is not None:
            info = next((c for c in self.ctx.facts.classes if c.node is node), None)
            if info is None or "forward" not in info.methods:
                return None
            forward = info.methods["forward"]
            setup = info.methods.get("setup_context")
            if setup is None:
                return _Forward(forward, forward, 1, None)
            params = self.ctx.flow(setup).params
            return _Forward(setup, forward, 0, params[1] if len(params) > 1 else None)
        op = next((o for o in self.ctx.facts.custom_ops if o.backward is self.method), None)
        if op is None or op.setup_context is None:
            return None
        params = self.ctx.flow(op.setup_context).params
        inputs = params[1] if len(params) > 1 else None
        return _Forward(op.setup_context, op.schema, 0, inputs)

    @staticmethod
    def _input_saved(
        value: cst.BaseExpression,
        saver: MethodFlow,
        order: int,
        found: _Forward,
        inputs: list[str],
    ) -> str | None:
        """The forward input `value` is, as it came (not reassigned, not copied on the way)."""
        if not isinstance(value, cst.Name):
            if found.inputs is not None and isinstance(value, cst.Subscript):
                held = value.value
                index = value.slice[0].slice if len(value.slice) == 1 else None
                if (
                    isinstance(held, cst.Name)
                    and held.value == found.inputs
                    and isinstance(index, cst.Index)
                    and isinstance(index.value, cst.Integer)
                ):
                    position = int(index.value.value)
                    return inputs[position] if position < len(inputs) else None
            return None
        definition = saver.definition_before(value.value, order)
        if definition is None:
            return None
        if found.inputs is None:
            return value.value if definition.kind == "param" and value.value in inputs else None
        # setup_context: `x, w = inputs` names the inputs by position
        unpacked = definition.expression
        if (
            definition.kind == "unpack"
            and isinstance(unpacked, cst.Name)
            and unpacked.value == found.inputs
            and definition.index is not None
            and 0 <= definition.index < len(inputs)
        ):
            return inputs[definition.index]
        return None

    def _forward_use(self, forward: MethodFlow, name: str) -> tuple[str, bool]:
        """What forward does with its input `name` where compiled code gets it: how the help
        tells the dense copy it hands a kernel ("" when it hands none), and whether it also
        hands the input as it came to compiled code (directly, or through a project function
        that passes it on unguarded)."""
        dense, raw = "", False
        for site in forward.calls:
            held = [
                (position, arg, how)
                for position, arg in enumerate(site.node.args)
                if not arg.star and (how := _held(arg.value, forward, name, site.order))
            ]
            if not held:
                continue
            if self._compiled(site, forward):
                for _, arg, how in held:
                    raw = raw or how == "raw"
                    if how == "dense" and not dense:
                        callee = dotted(site.node.func) or code_of(site.node.func)
                        dense = (
                            f"hands its kernel a dense copy (`{code_of(arg.value)}` to `{callee}`)"
                        )
                continue
            written = dotted(site.node.func)
            found = self.ctx.summaries.function(written) if written is not None else None
            summary = self.ctx.summaries.summary(*found) if found is not None else None
            if summary is None:
                continue
            for position, arg, how in held:
                index = position
                if arg.keyword is not None and arg.keyword.value in summary.params:
                    index = summary.params.index(arg.keyword.value)
                reaches = [r for r in summary.reaches if r.param == index]
                raw = raw or (how == "raw" and any(not r.guarded for r in reaches))
                guarded = next((r for r in reaches if r.guarded or how == "dense"), None)
                if guarded is not None and not dense:
                    dense = (
                        f"hands it to `{written}`, which makes it contiguous before compiled "
                        f"`{guarded.callee.lstrip('.')}`"
                    )
        return dense, raw

    def _compiled(self, site: CallSite, forward: MethodFlow) -> bool:
        """Whether a call of forward runs compiled code, or code the linter cannot read (a
        per-device table of compiled functions included)."""
        facts, settings, native = self.ctx.facts, self.ctx.settings, self.ctx.native
        call = site.node
        if compiled_callee(call, facts, settings, native) or compiled_by_evidence(
            call, facts, native
        ):
            return True
        if not self._may_lead_somewhere(call, forward) and not isinstance(call.func, cst.Subscript):
            return False  # a method of a tensor (`x.view(...)`): torch's
        return isinstance(self._where(site, forward), (tuple, list, Unreadable))

    # --- findings: the gate, and what the help says ------------------------------------------
    def _judged(
        self, value: cst.BaseExpression, severity: str | None, evidence: str
    ) -> tuple[str, bool] | None:
        """AGL203, with no fix, where the evidence holds: forward makes the input dense for
        its own kernel (a non-contiguous input is expected there), or the backward kernel
        is proven to read it raw (an error) and forward never handed it to compiled code."""
        state = self._state(value, self._flow, {"<saved>"}, self._order_of(self._flow, value))
        saved = self._roots.get(state.root) if state is not None else None
        if saved is None or OTHER_STRIDES in evidence:
            # A launch given the strides of the tensors beside it is stride-aware code: that
            # the saved input's own were not matched (a tuple of them bound under `if`:
            # mamba's `*B_strides`) says nothing of a dense read.
            return None
        proven = severity in (None, "error") and RAW_READ in evidence
        if not saved.dense and (not proven or saved.raw_in_forward):
            return None
        why = f"Forward saves its input `{saved.name}` as it came" + (
            f", yet {saved.dense}." if saved.dense else ", and hands it to no kernel itself."
        )
        for said, meant in _AS_INPUT:
            evidence = evidence.replace(said, meant)
        return f"{why} {evidence}", False

    def _write(self, *args: object, **kwargs: object) -> None:
        """A write into a saved input is not this rule's (AGL409 reads backward's writes)."""

    def _through_apply(self, site: CallSite, flow: MethodFlow, grads: set[str], cls: str) -> bool:
        return False  # another Function's forward: its own saves are its own backward's


def _held(value: cst.BaseExpression, forward: MethodFlow, name: str, order: int) -> str:
    """How an argument holds forward's input `name`: "raw" (the input as it came), "dense"
    (its `.contiguous()`, or a name bound to that), or "" (it does not)."""
    while isinstance(value, cst.Attribute) and value.attr.value == "data":
        value = value.value  # `x.data`: the same tensor, the same layout
    if _is_input(value, forward, name, order):
        return "raw"
    if isinstance(value, cst.Name):
        definition = forward.definition_before(value.value, order)
        if definition is None or definition.kind != "assign" or definition.expression is None:
            return ""
        value, order = definition.expression, definition.order
    if (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "contiguous"
        and _is_input(value.func.value, forward, name, order)
    ):
        return "dense"
    return ""


def _is_input(value: cst.BaseExpression, forward: MethodFlow, name: str, order: int) -> bool:
    """Whether `value` is forward's input `name` as it came (the parameter, not rebound)."""
    if not isinstance(value, cst.Name) or value.value != name:
        return False
    definition = forward.definition_before(name, order)
    return definition is not None and definition.kind == "param"
