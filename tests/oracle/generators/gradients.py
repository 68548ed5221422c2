"""Generators about the incoming gradient and the returned ones: backward writing into its
gradient (AGL406), collectives writing into it (the AGL406 extension issue 32 asks for, run in
a 2-process gloo group), and gradients assigned only under `ctx.needs_input_grad[i]` (a rule
not written yet)."""

from __future__ import annotations

from ..forms import MATHS, Parts, Sig, block, place, render
from ..program import Chooser, Program

WRITES_406 = {
    "none": [],
    "mul_": ["{t}.mul_(2.0)"],
    "imul": ["{t} *= 2.0"],
    "setitem": ["{t}[0] = 0.0"],
    "zero_": ["{t}.zero_()"],
    "copy_": ["{t}.copy_({t} * 2.0)"],
    "clamp_": ["{t}.clamp_(min=0.6)"],
    "unsqueeze_": ["{t}.unsqueeze_(0)", "{t}.squeeze_(0)"],  # metadata only
    "rebind": ["{t} = {t} * 2.0"],  # not a write
}


def gen_406(c: Chooser) -> Program:
    """backward changing its gradient in place (B1.5, B2.1-B2.3), directly, through an
    alias or a view, in helpers, loops, branches; or on a private copy."""
    write = c.pick("write", list(WRITES_406))
    alias = c.pick("alias", ["g", "h=g", "h=g.view(-1)", "h=g[:]", "h=g.clone()", "h=g.detach()"])
    parts = Parts(sig=Sig("plain", ("x",)), forward=["out = x * 2.0"], ctx_lines=[], backward=[])
    target = "g" if alias == "g" else "h"
    body = [] if alias == "g" else [alias.replace("=", " = ", 1)]
    stmt = WRITES_406[write]
    if write == "rebind":
        body += [line.replace("{t}", target) for line in stmt]
    elif stmt:
        body += place(c, "write", stmt, target, parts)
    # The gradient is computed first: only the write into the shared buffer can do harm.
    body.insert(0, "grad_x = g * 2.0")
    body.append("return grad_x")
    parts.backward = body
    files = render(c, parts, ["single", "base-other-module", "mixin-other-module"])
    return Program(
        family="AGL406",
        files=files,
        reference="def reference(x):\n    return x * 2.0\n",
        inputs=[[2, 3]],
        function="Fn",
    )


VIEWS_204 = {
    "flat": "{t}.view(-1)",  # merges the two dims: raises on a transposed gradient (B1.7)
    "flat-as": "{t}.view_as({t}.sum(0).repeat({t}.shape[0]))",
    "same": "{t}.view({t}.shape)",  # merges nothing (B1.8)
    "unsqueeze": "{t}.view(1, *{t}.shape)[0]",
    "split": "{t}.view(*{t}.shape[:-1], {t}.shape[-1], 1)",
    "reshape": "{t}.reshape(-1)",  # the fix: a copy where the view would raise (B1.9)
}
GUARDS_204 = {
    "none": [],
    "contiguous": ["g = g.contiguous()"],  # dense: every view works
    "clone": ["g = g.clone()"],  # keeps a transposed gradient's strides (B1.4b)
    "scale": ["g = g * 1.0"],  # an elementwise result keeps the layout
}


def gen_204(c: Chooser) -> Program:
    """backward viewing its incoming gradient (or an alias of it) into another shape: a view
    that merges dims raises when the gradient arrives transposed (the `transposed` scenario),
    one that merges none never does."""
    view = c.pick("view", list(VIEWS_204))
    guard = c.pick("guard", list(GUARDS_204))
    alias = c.pick("alias", ["g", "h=g", "h=g.data"])
    target = "g" if alias == "g" else "h"
    body = list(GUARDS_204[guard])
    if alias != "g":
        body.append(alias.replace("=", " = ", 1))
    body.append("flat = " + VIEWS_204[view].replace("{t}", target))
    body.append("return (flat * 2.0).reshape(g.shape)")
    parts = Parts(sig=Sig("plain", ("x",)), forward=["out = x * 2.0"], ctx_lines=[], backward=body)
    files = render(c, parts, ["single", "base-other-module", "mixin-other-module"])
    return Program(
        family="AGL204",
        files=files,
        reference="def reference(x):\n    return x * 2.0\n",
        inputs=[[2, 3]],
        function="Fn",
    )


COLLECTIVES = {
    "all_reduce": ("dist.all_reduce({t})", "all_reduce"),
    "all_reduce-async": ("dist.all_reduce({t}, async_op=True).wait()", "all_reduce"),
    "all_reduce-op": ("dist.all_reduce({t}, op=dist.ReduceOp.SUM)", "all_reduce"),
    "broadcast": ("dist.broadcast({t}, src=0)", "broadcast"),
    "reduce": ("dist.reduce({t}, dst=0)", "reduce"),
    "all_gather-read": ("", "all_reduce"),
}


def gen_collectives(c: Chooser) -> Program:
    """backward handing its gradient (or an alias of it) to a collective that writes into it:
    others sharing the gradient see it summed (issue 32, reproduced with 2 gloo processes)."""
    kind = c.pick("collective", list(COLLECTIVES))
    alias = c.pick("alias", ["g", "h=g", "h=g.view(-1)", "h=g.clone()", "h=g.contiguous()"])
    statement, math = COLLECTIVES[kind]
    target = "g" if alias == "g" else "h"
    parts = Parts(
        sig=Sig("plain", ("x",)),
        forward=["out = x * 2.0"],
        ctx_lines=[],
        backward=[],
        imports=["import torch.distributed as dist"],
    )
    body = [] if alias == "g" else [alias.replace("=", " = ", 1)]
    if kind == "all_gather-read":  # reads the gradient only: nothing is written into it
        body += [
            f"gathered = [torch.empty_like({target}) for _ in range(dist.get_world_size())]",
            f"dist.all_gather(gathered, {target})",
            "return sum(gathered).view_as(g) * 2.0",
        ]
    else:
        body += place(c, "collective", [statement], target, parts)
        ret = "h.view_as(g)" if alias == "h=g.view(-1)" else alias[0]
        body.append(f"return {ret} * 2.0")
    parts.backward = body
    files = render(c, parts, ["single", "base-other-module", "mixin-other-module"])
    return Program(
        family="collectives",
        files=files,
        reference=f"def reference(x):\n    return oracle.collective_grad(x, {math!r}) * 2.0\n",
        inputs=[[2, 3]],
        function="Fn",
        world=2,
    )


NEEDS = [
    "init-none",  # every gradient None at the top, then assigned under its condition
    "unbound",  # assigned only under the condition, returned always
    "one-unbound",  # one of two initialised
    "stale-none",  # both assigned under the first input's condition
    "else-none",  # if/else: assigned on both paths
    "loop",  # assigned in a loop over needs_input_grad
    "early-return",  # returns None, None early when nothing is needed
    "any-branch",  # assigned only under an unrelated branch taken at run time
]


def gen_needs_input_grad(c: Chooser) -> Program:
    """Gradients assigned only on some paths (`if ctx.needs_input_grad[i]:`) and returned on
    all: UnboundLocalError, or None for a gradient that is needed (issue 32)."""
    form = c.pick("form", NEEDS)
    math = MATHS[c.pick("math", ["mul", "sinmul"])]
    gx, gw = math.grads
    body = ["x, w = ctx.saved_tensors"]
    if form == "init-none":
        body += [
            "grad_x = grad_w = None",
            "if ctx.needs_input_grad[0]:",
            f"    grad_x = {gx}",
            "if ctx.needs_input_grad[1]:",
            f"    grad_w = {gw}",
        ]
    elif form == "unbound":
        body += [
            "if ctx.needs_input_grad[0]:",
            f"    grad_x = {gx}",
            "if ctx.needs_input_grad[1]:",
            f"    grad_w = {gw}",
        ]
    elif form == "one-unbound":
        body += [
            "grad_x = None",
            "if ctx.needs_input_grad[0]:",
            f"    grad_x = {gx}",
            "if ctx.needs_input_grad[1]:",
            f"    grad_w = {gw}",
        ]
    elif form == "stale-none":
        body += [
            "grad_x = grad_w = None",
            "if ctx.needs_input_grad[0]:",
            f"    grad_x = {gx}",
            f"    grad_w = {gw}",
        ]
    elif form == "else-none":
        body += [
            "if ctx.needs_input_grad[0]:",
            f"    grad_x = {gx}",
            "else:",
            "    grad_x = None",
            f"grad_w = {gw}",
        ]
    elif form == "loop":
        body += [
            "grads = [None, None]",
            "for i, need in enumerate(ctx.needs_input_grad):",
            "    if need:",
            f"        grads[i] = ({gx}, {gw})[i]",
            "grad_x, grad_w = grads",
        ]
    elif form == "early-return":
        body += [
            "if not any(ctx.needs_input_grad):",
            "    return None, None",
            f"grad_x = {gx}",
            f"grad_w = {gw}",
        ]
    else:  # any-branch: assigned only when the gradient is 2-D
        body += [f"grad_w = {gw}", "if g.dim() == 1:", f"    grad_x = {gx}"]
    helper = c.flag("in-helper")
    parts = Parts(
        sig=Sig("plain", math.inputs),
        forward=[f"out = {math.out}"],
        ctx_lines=["ctx.save_for_backward(x, w)"],
        backward=[],
    )
    if helper:
        parts.backward_helpers.append(
            "def _grads(ctx, g):\n" + block(body + ["return grad_x, grad_w"], 1)
        )
        parts.backward = ["return _grads(ctx, g)"]
    else:
        parts.backward = body + ["return grad_x, grad_w"]
    files = render(c, parts, ["single", "base-other-module", "mixin-other-module"])
    shapes = [list(s) for s in math.shapes]
    return Program(
        family="needs-input-grad",
        files=files,
        reference=f"def reference(x, w):\n    return {math.out}\n",
        inputs=shapes,
        function="Fn",
    )
