"""AGL411: a custom op's setup_context must take `ctx`, `inputs` and `output` by those names."""

from __future__ import annotations

import libcst as cst

from ..analysis.names import dotted
from .base import Check
from .gates import CUSTOM_OP_AUTOGRAD, Gate, pattern
from .reads import Reads

# torch.library calls setup_context(ctx=..., inputs=..., output=...) by keyword (semantics D11.2)
KEYWORDS = ("ctx", "inputs", "output")


class CustomOpSetup(Check):
    """AGL411 on every `register_autograd(..., setup_context=...)` of the file."""

    codes = ("AGL411",)
    gate = Gate(
        (pattern(CUSTOM_OP_AUTOGRAD, rb"register_autograd[ \t]*\("),), (CUSTOM_OP_AUTOGRAD,)
    )
    reads = Reads(custom_ops=True)

    def run(self) -> None:
        for op in self.ctx.facts.custom_ops:
            target: cst.FunctionDef | cst.Lambda | None = op.setup_context
            if target is None:
                target = _lambda(op.call)
            names: list[str] | None
            anchor: cst.CSTNode
            if target is not None:
                node: cst.CSTNode = target
                anchor = target.name if isinstance(target, cst.FunctionDef) else target
                names = _names(target.params)
            else:
                # a function of another module (`from .setup import setup_context`): read there,
                # reported here, at the argument that hands it to torch
                given = _given(op.call)
                if given is None:
                    continue
                node = anchor = given
                names = self._imported(given)
            if names is None:
                continue  # **kwargs takes any name; or a function not found
            missing = [k for k in KEYWORDS if k not in names]
            if not missing:
                continue
            self.ctx.enter(op.subject)
            self.report(
                "AGL411",
                node,
                anchor=anchor,
                cls=op.op,
                actual=", ".join(names) or "nothing",
                name=missing[0],
            )

    def _imported(self, given: cst.BaseExpression) -> list[str] | None:
        """The parameter names of the project function `given` names (None: not found, or
        it takes **kwargs)."""
        written = dotted(given)
        found = self.ctx.summaries.function(written) if written else None
        if found is None:
            return None
        args = found[1].args
        if args.kwarg is not None:
            return None
        return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


def _names(params: cst.Parameters) -> list[str] | None:
    if params.star_kwarg is not None:
        return None  # **kwargs takes any name
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]


def _given(call: cst.Call) -> cst.BaseExpression | None:
    """The `setup_context=` argument when it names a function (`setup`, `mod.setup`)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "setup_context":
            return arg.value if isinstance(arg.value, (cst.Name, cst.Attribute)) else None
    return None


def _lambda(call: cst.Call) -> cst.Lambda | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "setup_context":
            return arg.value if isinstance(arg.value, cst.Lambda) else None
    return None
