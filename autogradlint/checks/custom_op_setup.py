"""AGL411: a custom op's setup_context must take `ctx`, `inputs` and `output` by those names."""

from __future__ import annotations

import libcst as cst

from .base import Check

# torch.library calls setup_context(ctx=..., inputs=..., output=...) by keyword (semantics D11.2)
KEYWORDS = ("ctx", "inputs", "output")


class CustomOpSetup(Check):
    """AGL411 on every `register_autograd(..., setup_context=...)` of the file."""

    def run(self) -> None:
        for op in self.ctx.facts.custom_ops:
            target: cst.FunctionDef | cst.Lambda | None = op.setup_context
            if target is None:
                target = _lambda(op.call)
            if target is None:
                continue
            params = target.params
            if params.star_kwarg is not None:
                continue  # **kwargs takes any name
            names = [
                p.name.value
                for p in (*params.posonly_params, *params.params, *params.kwonly_params)
            ]
            missing = [k for k in KEYWORDS if k not in names]
            if not missing:
                continue
            self.ctx.enter(op.subject)
            anchor = target.name if isinstance(target, cst.FunctionDef) else target
            self.report(
                "AGL411",
                target,
                anchor=anchor,
                cls=op.op,
                actual=", ".join(names) or "nothing",
                name=missing[0],
            )


def _lambda(call: cst.Call) -> cst.Lambda | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "setup_context":
            return arg.value if isinstance(arg.value, cst.Lambda) else None
    return None
