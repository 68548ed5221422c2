"""AGL406's collectives: a backward that hands its incoming gradient, or a view of it, to a
`torch.distributed` collective as the tensor the collective writes (`dist.all_reduce(g)`),
directly or through a project function that does (Megatron's `_reduce(grad_output)`).

The collective writes the reduced result into the caller's buffer: another consumer of the same
gradient and the caller's `grad_outputs` see it (semantics B2.4-B2.6). The input of a gather or
scatter is only read (B2.7). The fix is AGL406's copy first, in the unsafe tier: it keeps every
result on dense, transposed and offset gradients (B2.8), but gloo ignores strides, so on a
non-dense gradient the original reduces the wrong memory and the dense copy changes that (B2.9).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ..analysis.collectives import SPLITS, WRITTEN, HelperWrites, collective, cst_argument
from ..analysis.flow import MethodFlow
from ..analysis.names import dotted
from .base import CheckContext


@dataclass(frozen=True)
class GradientWrite:
    """A collective writing into the gradient parameter `origin`."""

    origin: str
    node: cst.Call  # the call in backward: the collective, or the helper that reaches one
    collective: str  # its short name (`all_reduce`)
    callee: str  # as resolved (`torch.distributed.all_reduce`)
    via: tuple[str, ...] = ()  # the project functions on the way, outermost first

    def why_unsafe(self) -> str:
        """The fix note's reason (the `no-collective-writes` precondition)."""
        return f"`{self.callee}` writes it"

    def describe(self) -> str:
        """The help line's opening sentence."""
        name = f"`{self.callee}`"
        if self.via:
            chain = " -> ".join(f"`{v}`" for v in self.via)
            return (
                f"{name} (reached through {chain}) writes its result into the tensor it is given. "
            )
        return f"{name} writes its result into the tensor it is given. "


class GradientCollectives:
    """One file's answers: the helpers read for one backward are reused by the next."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        self._helpers: HelperWrites | None = None

    @property
    def helpers(self) -> HelperWrites:
        if self._helpers is None:
            self._helpers = HelperWrites(self.ctx.summaries)
        return self._helpers

    def writes(self, flow: MethodFlow, grads: set[str]) -> Iterator[GradientWrite]:
        """Every collective call of the backward (not of a nested function) whose written
        argument shares storage with a gradient parameter in `grads`."""
        for site in flow.calls:
            if site.in_nested_def:
                continue
            call = site.node
            resolved = self.ctx.facts.imports.resolve(call.func)
            short = collective(resolved) if resolved is not None else None
            if resolved is not None and short is not None:
                position, keywords, as_list = WRITTEN[short]
                argument = cst_argument(call, position, keywords)
                if argument is not None:
                    origin = self._origin(argument.value, flow, site.order, grads, as_list)
                    if origin is not None:
                        yield GradientWrite(origin, call, short, resolved)
                continue
            found = self._through_helper(call, flow, site.order, grads)
            if found is not None:
                yield found

    def _through_helper(
        self, call: cst.Call, flow: MethodFlow, order: int, grads: set[str]
    ) -> GradientWrite | None:
        if any(arg.star for arg in call.args):
            return None
        passed: dict[int | str, str] = {}
        for position, arg in enumerate(call.args):
            origin = self._origin(arg.value, flow, order, grads, False)
            if origin is not None:
                key: int | str = arg.keyword.value if arg.keyword is not None else position
                passed[key] = origin
        written = dotted(call.func)
        if not passed or written is None:
            return None
        found = self.helpers.of_call(written)
        if found is None:
            return None
        params, writes = found
        for slot, write in sorted(writes.items()):
            name = params[slot] if slot < len(params) else None
            origin = passed.get(slot) or (passed.get(name) if name is not None else None)
            if origin is not None:
                return GradientWrite(origin, call, write.collective, write.callee, write.via)
        return None

    def _origin(
        self,
        expr: cst.BaseExpression,
        flow: MethodFlow,
        order: int,
        grads: set[str],
        as_list: bool,
        depth: int = 0,
    ) -> str | None:
        """The gradient parameter `expr` shares storage with (for a list: one of its
        elements does), if any."""
        contract = self.ctx.contract()
        if not as_list:
            return contract.alias_of(expr, flow, order, grads, {})
        if depth > 10:
            return None
        if isinstance(expr, (cst.List, cst.Tuple)):
            for element in expr.elements:
                found = self._origin(element.value, flow, order, grads, False)
                if found is not None:
                    return found
            return None
        if isinstance(expr, cst.Name):
            definition = flow.definition_before(expr.value, order)
            value = definition.expression if definition is not None else None
            if definition is None or definition.kind != "assign" or value is None:
                return None
            return self._origin(value, flow, definition.order, grads, True, depth + 1)
        if isinstance(expr, cst.Call):
            func = expr.func
            if dotted(func) in ("list", "tuple") and expr.args:
                return self._origin(expr.args[0].value, flow, order, grads, True, depth + 1)
            if isinstance(func, cst.Attribute) and func.attr.value in SPLITS:
                owner = self.ctx.facts.imports.resolve(func.value)
                base = expr.args[0].value if owner == "torch" and expr.args else func.value
                return contract.alias_of(base, flow, order, grads, {})
        return None
