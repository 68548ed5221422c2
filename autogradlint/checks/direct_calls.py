"""AGL407: a Function's forward called directly, or the Function instantiated and called."""

from __future__ import annotations

import libcst as cst

from ..analysis.contract import params
from ..analysis.walk import FastVisitor
from ..fix.edits import Edits, Fix
from ..speed.preselect import direct_call_offsets
from .base import Check


class DirectCalls(Check):
    """AGL407 at call sites anywhere in the module, for Functions of this file and others."""

    def run(self) -> None:
        facts = self.ctx.facts
        self.ctx.enter(None)  # call sites can be anywhere in the module
        imported = facts.project.function_names  # Functions of other files, by their names here
        functions = {info.name for info in facts.function_classes} | imported
        if not functions:
            return
        # The whole-module visit is the expensive part: only do it when the text has a call.
        if not direct_call_offsets(facts.source, functions):
            return
        reporter = self

        class _Calls(FastVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                if (
                    isinstance(func, cst.Attribute)
                    and func.attr.value == "forward"
                    and isinstance(func.value, cst.Name)
                    and func.value.value in functions
                ):
                    if reporter._passes_a_ctx(func.value.value, node):
                        return  # forward called as a plain function with a ctx (or stand-in)
                    reporter._report_direct(node, func.value.value, "forward")
                elif (
                    isinstance(func, cst.Call)
                    and isinstance(func.func, cst.Name)
                    and func.func.value in functions
                    and not func.args
                ):
                    reporter._report_direct(node, func.func.value, "instance")

        _Calls().walk(facts.module)

    def _passes_a_ctx(self, cls: str, call: cst.Call) -> bool:
        """True when the call supplies forward's ctx slot itself (`Base.forward(ctx, x)`,
        `Fn.forward(None, x)`): a deliberate plain call. Only a call one argument short is the
        forgotten `.apply`."""
        contract = self.ctx.contract()
        info = contract.by_name.get(cls)
        given = len([a for a in call.args if a.keyword is None])
        if info is None:  # a Function of another file: its forward, as the index read it
            signature = dict(self.ctx.facts.project.signatures).get(cls)
            if signature is None or signature.setup_context or any(a.star for a in call.args):
                return True
            return given >= signature.required + 1
        forward = contract.method(info, "forward")
        if forward is None or any(arg.star for arg in call.args):
            return True
        if contract.method(info, "setup_context") is not None:
            return True  # forward has no ctx slot: a direct call is ambiguous
        required = sum(1 for p in params(forward) if p.default is None)
        return given >= required

    def _report_direct(self, call: cst.Call, cls: str, how: str) -> None:
        shown = f"{cls}.forward(...)" if how == "forward" else f"{cls}()(...)"

        def build(edits: Edits) -> None:
            edits.nodes[id(call)] = lambda updated: updated.with_changes(  # type: ignore[attr-defined]
                func=cst.Attribute(cst.Name(cls), cst.Name("apply"))
            )

        fix = Fix("unsafe", call, build, f"call `{cls}.apply(...)`")
        self.report("AGL407", call, anchor=call.func, fix=fix, cls=cls, shown=shown)
