"""Generated programs whose backward assigns a gradient only on some paths (AGL412), and the
scenarios that vary which input requires grad (what decides those paths).

The guards real code uses: `ctx.needs_input_grad[i]`, names unpacked from it, a test of both
inputs, and branches on anything else (`FLAG`, `MODE`: the fix is unsafe there); assignments
of one or both gradients, gradients set to None first, elif chains, early returns, and reads
in the return under the same guard.
"""

from __future__ import annotations

import types
from collections.abc import Iterator

import torch
from hypothesis import strategies as st
from programs import HEADERS, _block, _module
from run import Outcome, outcome

GUARDS = {
    "gx": [
        "ctx.needs_input_grad[0]",
        "needs_x",
        "ctx.needs_input_grad[0] and FLAG",
        "FLAG",
        "MODE == 1",
    ],
    "gw": [
        "ctx.needs_input_grad[1]",
        "needs_w",
        "ctx.needs_input_grad[1] or MODE == 1",
        "not FLAG",
    ],
}
VALUES = {
    "gx": ["g * w", "(g * w).double().float()", "g.mul(w)"],
    "gw": ["g * x", "(g * x).sum() * {T}.ones_like(w)", "x * g"],
}
RETURNS = [
    "return gx, gw",
    "return (gx, gw)",
    "return gx if ctx.needs_input_grad[0] else None, gw",
    "out = (gx, gw)\nreturn out",
]


def _assign(draw: st.DrawFn, name: str) -> list[str]:
    value = draw(st.sampled_from(VALUES[name]))
    form = draw(st.sampled_from(["if", "if-elif", "unguarded", "initialised"]))
    guard = draw(st.sampled_from(GUARDS[name]))
    if form == "unguarded":
        return [f"{name} = {value}"]
    if form == "initialised":
        return [f"{name} = None", f"if {guard}:\n    {name} = {value}"]
    if form == "if-elif":
        return [f"if {guard}:\n    {name} = {value}\nelif MODE == 2:\n    {name} = {value} * 2"]
    return [f"if {guard}:\n    {name} = {value}"]


@st.composite
def unset_gradients(draw: st.DrawFn) -> str:
    """A Function of two inputs whose backward may return a gradient it did not assign."""
    header = draw(st.sampled_from(sorted(HEADERS)))
    lines = ["x, w = ctx.saved_tensors"]
    if draw(st.booleans()):
        lines.append("needs_x, needs_w = ctx.needs_input_grad")
    if draw(st.booleans()):
        lines.append("if MODE == 3:\n    return None, None")
    lines += _assign(draw, "gx")
    lines += _assign(draw, "gw")
    lines.append(draw(st.sampled_from(RETURNS)))
    source = "\n".join(lines)
    if ("needs_x" in source or "needs_w" in source) and "needs_x, needs_w" not in source:
        lines.insert(1, "needs_x, needs_w = ctx.needs_input_grad")
    body = (
        "class Fn({T}.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x, w):\n"
        "        ctx.save_for_backward(x, w)\n        return x * w\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n" + _block(lines)
    )
    return _module(header, body)


def needs_grad_scenarios(module: types.ModuleType) -> Iterator[tuple[str, Outcome]]:
    """Which inputs require grad, the module switches, `.backward()` and `autograd.grad`."""
    for x_grad, w_grad in ((True, True), (True, False), (False, True)):
        for flag in (False, True):
            for mode in (0, 1, 2):
                module.FLAG, module.MODE = flag, mode
                key = f"x={x_grad} w={w_grad} flag={flag} mode={mode}"
                yield key + " backward", outcome(_via_backward, module.Fn, x_grad, w_grad)
                yield key + " grad", outcome(_via_grad, module.Fn, x_grad, w_grad)


def _inputs(x_grad: bool, w_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.linspace(0.5, 2.0, 6).reshape(2, 3).requires_grad_(x_grad)
    w = torch.linspace(-1.0, 1.0, 6).reshape(2, 3).requires_grad_(w_grad)
    return x, w


def _via_backward(fn: type, x_grad: bool, w_grad: bool) -> object:
    x, w = _inputs(x_grad, w_grad)
    fn.apply(x, w).sum().backward()  # type: ignore[attr-defined]
    return x.grad, w.grad


def _via_grad(fn: type, x_grad: bool, w_grad: bool) -> object:
    x, w = _inputs(x_grad, w_grad)
    wanted = [t for t in (x, w) if t.requires_grad]
    out = fn.apply(x, w)  # type: ignore[attr-defined]
    return torch.autograd.grad(out, wanted, torch.ones_like(out), allow_unused=True)
