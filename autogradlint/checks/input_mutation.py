"""AGL405: forward changes an input in place without `ctx.mark_dirty`."""

from __future__ import annotations

import libcst as cst

from ..analysis.contract import StaticHelper, mutation
from ..analysis.facts import ClassInfo
from ..analysis.flow import MethodFlow
from ..analysis.names import dotted
from .base import Check


class InputMutation(Check):
    """AGL405 in forward and in the static helpers forward hands its inputs to."""

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
        reported: set[str] = set()
        for node, order in flow.statements:
            found = mutation(node)
            if found is not None:
                origin = contract.alias_of(found[0], flow, order, inputs, helpers, info.name)
                # `x += 1` on an int and `d[k] = v` on a dict are not tensor mutations: those
                # forms need evidence that the input is a tensor; `x.add_()` is evidence itself.
                if origin and not isinstance(node, cst.Call) and origin not in tensors:
                    continue
                if origin and origin not in dirty and origin not in reported:
                    reported.add(origin)
                    self.report("AGL405", found[1], cls=info.name, name=origin)
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
                    self.report("AGL405", statement, cls=info.name, name=origin)
