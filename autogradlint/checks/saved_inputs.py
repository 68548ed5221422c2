"""AGL203: a forward input saved as it came reaches compiled code in backward, read as dense."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from ..analysis.compiled import RAW_READ, compiled_by_evidence, compiled_callee
from ..analysis.flow import CallSite, MethodFlow
from ..analysis.names import dotted
from ..analysis.reading import Unreadable
from ..analysis.source_text import code_of
from ..edits import Fix
from ..text.ast_walk import ast_dotted
from ..text.ast_walk import walk as walk_ast
from .compiled_grads import CompiledGradients, GradState
from .gates import function_gate
from .reads import Reads

_SAVED = frozenset({"saved_tensors", "saved_variables"})
_HELPER_DEPTH = 2  # how many project calls deep forward's dense copy is looked for


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

    def _trace(
        self,
        expr: cst.BaseExpression,
        flow: MethodFlow,
        grads: set[str],
        order: int,
        depth: int = 0,
    ) -> GradState | None:
        position = self._saved_position(expr, flow, order)
        if position is not None:
            saved = self._saved.get(position)
            if saved is None:
                return None
            root = code_of(expr) if not isinstance(expr, cst.Name) else expr.value
            self._roots[root] = saved
            return GradState(root, False, False, root)
        return super()._trace(expr, flow, grads, order, depth)

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
                saved[position] = SavedInput(
                    name, self._dense_copy(forward, name), self._raw_in(forward, name)
                )
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

    def _dense_copy(self, forward: MethodFlow, name: str) -> str:
        """Where forward, or a project function it hands the input to, makes it contiguous."""
        for site in self._given(forward, name):
            call = site.node
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "contiguous":
                return f"makes it contiguous for its own kernel (`{code_of(call)}`)"
            written = dotted(call.func)
            if written is None:
                continue
            for position, arg in enumerate(call.args):
                if arg.star or not _is_input(arg.value, forward, name, site.order):
                    continue
                found = self.ctx.summaries.function(written)
                if found is None:
                    continue
                param = _parameter(found[1], position, arg.keyword)
                shown = self._made_dense(found[0], found[1], param, 0)
                if shown:
                    return f"hands it to `{written}`, which makes it contiguous ({shown})"
        return ""

    def _made_dense(
        self, path: str, function: ast.FunctionDef, param: str | None, depth: int
    ) -> str:
        """How a project function makes its parameter `param` contiguous (its code), or ""."""
        if param is None:
            return ""
        for node in walk_ast(function):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "contiguous"
                and isinstance(func.value, ast.Name)
                and func.value.id == param
            ):
                return f"`{param}.contiguous()` in `{function.name}`"
            written = ast_dotted(func)
            if depth >= _HELPER_DEPTH or written is None:
                continue
            for position, arg in enumerate(node.args):
                if isinstance(arg, ast.Name) and arg.id == param:
                    found = self.ctx.summaries.function(written, path)
                    if found is None:
                        break
                    inner = _parameter(found[1], position, None)
                    shown = self._made_dense(found[0], found[1], inner, depth + 1)
                    if shown:
                        return shown
        return ""

    def _raw_in(self, forward: MethodFlow, name: str) -> bool:
        """Whether forward hands the input as it came to compiled code: itself, or through a
        project function that passes it on without making it contiguous."""
        facts, settings, native = self.ctx.facts, self.ctx.settings, self.ctx.native
        for site in self._given(forward, name):
            call = site.node
            given = [
                (position, arg)
                for position, arg in enumerate(call.args)
                if not arg.star and _is_input(arg.value, forward, name, site.order)
            ]
            if not given:
                continue
            if compiled_callee(call, facts, settings, native) or compiled_by_evidence(
                call, facts, native
            ):
                return True
            where = self._where(site, forward)
            if isinstance(where, (tuple, list, Unreadable)):
                return True  # a table of compiled functions, or code that cannot be read
            written = dotted(call.func)
            found = self.ctx.summaries.function(written) if written is not None else None
            summary = self.ctx.summaries.summary(*found) if found is not None else None
            if summary is None:
                continue
            for position, arg in given:
                index = position
                if arg.keyword is not None and arg.keyword.value in summary.params:
                    index = summary.params.index(arg.keyword.value)
                if any(r.param == index and not r.guarded for r in summary.reaches):
                    return True
        return False

    @staticmethod
    def _given(forward: MethodFlow, name: str) -> Iterator[CallSite]:
        """Forward's calls that are handed the input as it came, or called on it."""
        for site in forward.calls:
            call = site.node
            on = call.func.value if isinstance(call.func, cst.Attribute) else None
            if (on is not None and _is_input(on, forward, name, site.order)) or any(
                _is_input(arg.value, forward, name, site.order) for arg in call.args
            ):
                yield site

    # --- findings: the gate, and what the help says ------------------------------------------
    def _raw_read(
        self,
        value: cst.BaseExpression,
        fix: Fix | None,
        severity: str | None,
        *,
        callee: str,
        cls: str,
        evidence: str,
        grad: str = "",
    ) -> None:
        """AGL203, with no fix, where the evidence holds: forward makes the input dense for
        its own kernel (a non-contiguous input is expected there), or the backward kernel
        is proven to read it raw (an error) and forward never handed it to compiled code."""
        state = self._state(value, self._flow, {"<saved>"}, self._order_of(self._flow, value))
        saved = self._roots.get(state.root) if state is not None else None
        if saved is None:
            return
        proven = severity in (None, "error") and RAW_READ in evidence
        if not saved.dense and (not proven or saved.raw_in_forward):
            return
        why = f"Forward saves its input `{saved.name}` as it came" + (
            f", yet {saved.dense}." if saved.dense else ", and hands it to no kernel itself."
        )
        super()._raw_read(
            value, None, severity, callee=callee, cls=cls, evidence=f"{why} {evidence}", grad=grad
        )

    def _write(self, *args: object, **kwargs: object) -> None:
        """A write into a saved input is not this rule's (AGL409 reads backward's writes)."""

    def _through_apply(self, site: CallSite, flow: MethodFlow, grads: set[str], cls: str) -> bool:
        return False  # another Function's forward: its own saves are its own backward's


def _is_input(value: cst.BaseExpression, forward: MethodFlow, name: str, order: int) -> bool:
    """Whether `value` is forward's input `name` as it came (the parameter, not rebound)."""
    if not isinstance(value, cst.Name) or value.value != name:
        return False
    definition = forward.definition_before(name, order)
    return definition is not None and definition.kind == "param"


def _parameter(function: ast.FunctionDef, position: int, keyword: cst.Name | None) -> str | None:
    """The parameter of `function` an argument at `position` (or by `keyword`) binds."""
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if keyword is not None:
        return keyword.value if keyword.value in params else None
    return params[position] if position < len(params) else None
