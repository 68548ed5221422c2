"""AGL405: forward changes an input in place without `ctx.mark_dirty`."""

from __future__ import annotations

import ast
from typing import NamedTuple

import libcst as cst

from ..analysis.apply_sites import FROZEN, PARAMETER
from ..analysis.contract import StaticHelper, mutation, returned_names
from ..analysis.facts import ClassInfo
from ..analysis.flow import MethodFlow
from ..analysis.helper_effects import helper_calls
from ..analysis.names import dotted
from ..analysis.triton_writes import written_params
from .base import Check
from .gates import function_gate
from .gradient_collectives import GradientCollectives
from .reads import Reads
from .tensor_evidence import gradient_evidence, inherited_forwards


class _Forward(NamedTuple):
    """One forward as AGL405 reads it: its class and flow, its inputs, those known to be
    tensors, and the class's static helpers."""

    info: ClassInfo
    flow: MethodFlow
    inputs: set[str]
    tensors: set[str]
    helpers: dict[str, StaticHelper]


class InputMutation(Check):
    """AGL405 in forward and in the static helpers forward hands its inputs to."""

    codes = ("AGL405",)
    gate = function_gate()
    reads = Reads(functions=True)

    _collectives: GradientCollectives | None = None
    # A forward of another module held to this file's backward: the inputs only its gradients
    # prove to be tensors, and the backward AGL405 is then reported at (once: the write has
    # no place here; the other file reports every write it has the evidence for).
    _only: set[str] | None = None
    _at: cst.FunctionDef | None = None

    def _no_stale_history(
        self, info: ClassInfo, flow: MethodFlow, origin: str, node: cst.CSTNode
    ) -> bool:
        """Whether every `apply` call of the file hands this input a tensor whose change
        misleads no gradient: one that never requires grad (a `requires_grad=False`
        parameter, a buffer: semantics D5.3), or, for `x.set_(t)` returned as the output, a
        leaf parameter (the sacrificial placeholder: D5.6)."""
        setup_style = self.ctx.contract().method(info, "setup_context") is not None
        inputs = list(flow.params) if setup_style else flow.params[1:]  # after ctx
        if origin not in inputs:
            return False
        passed = self.ctx.apply_sites.passed(info.name, inputs.index(origin))
        if not passed:
            return False
        if all(kind == FROZEN for kind in passed):
            return True
        swapped = (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "set_"
            and _returned(flow, origin, node)
        )
        return swapped and all(kind in (FROZEN, PARAMETER) for kind in passed)

    def run(self) -> None:
        contract = self.ctx.contract()
        for info, seen in contract.forwards():
            self.ctx.enter(info.node)
            self._forward_inplace(
                info,
                seen.flow.function,
                seen.flow,
                seen.names,
                seen.tensors,
                seen.ctx_name,
                contract.helpers(info.name),
            )
        # `t[0] = v` / `t *= v` in a forward of another module: only this file's backward
        # proves `t` a tensor (oracle K27)
        for info, backward, seen, proven in inherited_forwards(contract):
            self.ctx.enter(info.node)
            self._only, self._at = proven, backward
            try:
                self._forward_inplace(
                    info, seen.flow.function, seen.flow, seen.names, seen.tensors, seen.ctx_name, {}
                )
            finally:
                self._only = self._at = None

    def _report(self, node: cst.CSTNode, cls: str, origin: str, evidenced: bool) -> None:
        """AGL405 at the write; for a forward of another module, once at this file's backward
        and only for a write whose tensor evidence is the backward's (`evidenced`)."""
        at = self._at
        if at is None:
            self.report("AGL405", node, cls=cls, name=origin)
        elif evidenced and self._only is not None and origin in self._only:
            self._at = None
            self.report("AGL405", at, anchor=at.name, cls=cls, name=origin)

    def _forward_inplace(
        self,
        info: ClassInfo,
        forward: cst.FunctionDef,
        flow: MethodFlow,
        inputs: set[str],
        tensors: set[str],
        ctx_name: str | None,
        helpers: dict[str, StaticHelper],
    ) -> None:
        contract = self.ctx.contract()
        dirty: set[str] = set()
        for site in flow.calls:
            if (dotted(site.node.func) or "").endswith("mark_dirty"):
                for arg in site.node.args:
                    origin = contract.alias_of(
                        arg.value, flow, site.order, inputs, helpers, info.name
                    )
                    if origin:
                        dirty.add(origin)
            elif ctx_name is not None:
                for marked in self._marked_in_helper(site.node, ctx_name):
                    origin = contract.alias_of(marked, flow, site.order, inputs, helpers, info.name)
                    if origin:
                        dirty.add(origin)
        reported: set[str] = set()
        tensors = tensors | gradient_evidence(contract, info, flow)
        for node, order in flow.statements:
            found = mutation(node)
            if found is not None:
                origin = contract.alias_of(
                    found[0],
                    flow,
                    order,
                    inputs,
                    helpers,
                    info.name,
                    setitem=isinstance(node, cst.AugAssign),
                )
                # `x += 1` on an int and `d[k] = v` on a dict are not tensor mutations: those
                # forms need evidence that the input is a tensor; `x.add_()` is evidence itself.
                if origin and not isinstance(node, cst.Call) and origin not in tensors:
                    continue
                if origin and origin not in dirty and origin not in reported:
                    if self._no_stale_history(info, flow, origin, node):
                        continue
                    reported.add(origin)
                    self._report(found[1], info.name, origin, not isinstance(node, cst.Call))
        for site in flow.calls:  # helpers that mutate what forward hands them
            helper = contract.helper_of(site.node, helpers, info.name)
            if helper is None:
                continue
            for index, statement in helper.mutates.items():
                if index >= len(site.node.args):
                    continue
                origin = contract.alias_of(
                    site.node.args[index].value, flow, site.order, inputs, helpers, info.name
                )
                if origin and origin not in dirty and origin not in reported:
                    reported.add(origin)
                    self._report(statement, info.name, origin, False)
        # `dist.all_reduce(x)` on an input, or `_reduce(x)` reaching one (Megatron's
        # _ReduceFromModelParallelRegion): the collective writes the caller's tensor in place
        if self._collectives is None:
            self._collectives = GradientCollectives(self.ctx)
        for write in self._collectives.writes(flow, inputs):
            origin = write.origin
            if origin in dirty or origin in reported:
                continue
            if self._no_stale_history(info, flow, origin, write.node):
                continue
            reported.add(origin)
            self._report(write.node, info.name, origin, False)
        forward_read = _Forward(info, flow, inputs, tensors, helpers)
        self._kernel_writes(forward_read, dirty | reported)
        self._project_helper_writes(forward_read, dirty | reported)

    def _marked_in_helper(self, call: cst.Call, ctx_name: str) -> list[cst.BaseExpression]:
        """The arguments of `call` that the project function it runs, handed forward's ctx,
        marks dirty with it (fairscale's `_reduce(ctx, input_)`: `if ctx:
        ctx.mark_dirty(input_)`, then the all-reduce)."""
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if len(positional) != len(call.args) or not any(
            isinstance(a.value, cst.Name) and a.value.value == ctx_name for a in positional
        ):
            return []
        written = dotted(call.func)
        found = self.ctx.summaries.function(written) if written is not None else None
        if found is None:
            return []
        function = found[1]
        params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        given = dict(zip(params, (a.value for a in positional), strict=False))
        holders = {
            name
            for name, value in given.items()
            if isinstance(value, cst.Name) and value.value == ctx_name
        }
        marked: list[cst.BaseExpression] = []
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "mark_dirty"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in holders
            ):
                marked += [
                    given[arg.id]
                    for arg in node.args
                    if isinstance(arg, ast.Name) and arg.id in given
                ]
        return marked

    def _kernel_writes(self, forward: _Forward, done: set[str]) -> None:
        """An input (or a view of it: `Q.reshape(...)`) handed to a Triton kernel launched in
        forward (`_rope_embedding[grid](Q, ...)`) that stores through that parameter: the
        caller's tensor changes without mark_dirty (D5.1), and the version counter never
        hears of a raw write (B3.5). Reported at the argument. Only an input forward shows
        to be a tensor: a size in the store's offset arithmetic is no write."""
        info, flow, inputs, tensors, helpers = forward
        contract = self.ctx.contract()
        summaries = self.ctx.summaries
        for site in flow.calls:
            call = site.node
            if site.in_nested_def or not isinstance(call.func, cst.Subscript):
                continue
            name = dotted(call.func.value)
            found = summaries.function(name) if name is not None else None
            if found is None:
                continue
            kernel = found[1]
            written = written_params(kernel)
            if not written:
                continue
            params = [a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args)]
            for position, arg in enumerate(call.args):
                if arg.star:
                    break
                if arg.keyword is not None:
                    param: str | None = arg.keyword.value
                else:
                    param = params[position] if position < len(params) else None
                if param not in written:
                    continue
                origin = contract.alias_of(arg.value, flow, site.order, inputs, helpers, info.name)
                if not origin or origin in done or origin not in tensors:
                    continue
                if self._no_stale_history(info, flow, origin, call):
                    continue
                done.add(origin)
                self._report(arg.value, info.name, origin, False)

    def _project_helper_writes(self, forward: _Forward, done: set[str]) -> None:
        """An input handed to a module-level function or a static method (here or in another
        project file) that writes it in place, one or two calls deep: reported at the call."""
        info, flow, inputs, tensors, helpers = forward
        contract = self.ctx.contract()
        tensors = tensors | gradient_evidence(contract, info, flow)
        home = contract.foreign_paths.get(id(flow.function))  # helpers of its own file
        for site, effects, bound in helper_calls(self.ctx.summaries, flow.calls, home):
            for slot, value in bound:
                if slot not in effects.writes:
                    continue
                origin = contract.alias_of(value, flow, site.order, inputs, helpers, info.name)
                # as inline: `t[0] = v` / `t *= 2` need evidence that the input is a tensor
                if not origin or origin in done:
                    continue
                if slot not in effects.method_writes and origin not in tensors:
                    continue
                done.add(origin)
                self._report(site.node, info.name, origin, slot not in effects.method_writes)


def _returned(flow: MethodFlow, name: str, call: cst.Call) -> bool:
    """Whether forward returns the input it changed: by name, or as the call itself
    (`return placeholder.set_(t)`)."""
    if name in returned_names(flow):
        return True
    for ret, _order in flow.returns:
        value = ret.value
        elements = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        if any(element is call for element in elements):
            return True
    return False
