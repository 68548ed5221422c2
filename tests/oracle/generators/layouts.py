"""Generators about the gradient's layout reaching a `torch.distributed` collective (AGL201's
collective rule, semantics B2.9-B2.11): which collective, which layout the caller's consumer
hands backward (`out.sum()` always, in the driver's `sum` scenario; a transpose, `torch.cat`'s
narrow view or a reduction's expand in the model), guarded with `.contiguous()`, with a plain
`.clone()` (a transposed copy stays transposed, B1.4b) or not, inline or through helpers. Run
in a 2-rank gloo group; what NCCL would refuse is told from the layout the collective receives
(torch_side's `nccl:` harm, B2.11)."""

from __future__ import annotations

from ..forms import Parts, Sig, block, render
from ..program import Chooser, Program

# Each collective as lines acting on `{t}` and binding the result `{r}`: in-place ones write
# into `{t}` (AGL406's hazard when `{t}` is the gradient); the others only read it.
COLLECTIVE_LINES: dict[str, list[str]] = {
    "all_reduce": ["dist.all_reduce({t})", "{r} = {t}"],
    "all_reduce-async": ["dist.all_reduce({t}, async_op=True).wait()", "{r} = {t}"],
    "broadcast": ["dist.broadcast({t}, src=0)", "{r} = {t}"],
    "all_gather": [
        "parts = [{t}.new_empty({t}.shape) for _ in range(dist.get_world_size())]",
        "dist.all_gather(parts, {t})",
        "{r} = sum(parts)",
    ],
    "all_gather_into_tensor": [
        "out = {t}.new_empty((dist.get_world_size() * {t}.shape[0], {t}.shape[1]))",
        "dist.all_gather_into_tensor(out, {t})",
        "{r} = out.view(dist.get_world_size(), *{t}.shape).sum(0)",
    ],
    "reduce_scatter_tensor": [
        "out = {t}.new_empty(({t}.shape[0] // dist.get_world_size(), {t}.shape[1]))",
        "dist.reduce_scatter_tensor(out, {t})",
        "{r} = out.repeat(dist.get_world_size(), 1)",
    ],
    "all_to_all_single": [
        "out = {t}.new_empty({t}.shape)",
        "dist.all_to_all_single(out, {t})",
        "{r} = out",
    ],
    # both ranks post their send first (isend), so a refusal raises on both before either waits
    "isend-recv": [
        "peer = 1 - dist.get_rank()",
        "out = {t}.new_empty({t}.shape)",
        "req = dist.isend({t}, peer)",
        "dist.recv(out, peer)",
        "req.wait()",
        "{r} = out",
    ],
}
GUARDS = {"raw": "{g}", "contiguous": "{g}.contiguous()", "clone": "{g}.clone()"}
# How the caller consumes the Function's output: the layout of the gradient backward receives
# in the train/grad scenarios (the sum scenario hands the stride-0 one whatever the consumer).
CONSUMERS = {
    "none": "{y}",
    "transpose": "{y}.t()",
    "cat": "torch.cat([{y}, x], 1)",
    "reduce": "{y}.sum(1)",
}
SITES = ["inline", "helper", "helper-2-deep", "static-method"]


def _fill(lines: list[str], t: str, r: str) -> list[str]:
    return [line.replace("{t}", t).replace("{r}", r) for line in lines]


def gen_collective_layout(c: Chooser) -> Program:
    """backward handing its gradient (raw, made contiguous, or cloned) to a collective, under a
    consumer that gives it a transposed, narrow or stride-0 layout (B2.9-B2.11)."""
    kind = c.pick("collective", list(COLLECTIVE_LINES))
    guard = c.pick("guard", list(GUARDS))
    consumer = c.pick("consumer", list(CONSUMERS))
    site = c.pick("site", SITES)
    lines = COLLECTIVE_LINES[kind]
    helpers: list[str] = []
    target = "g" if guard == "raw" else "h"
    body = [] if guard == "raw" else [f"h = {GUARDS[guard].format(g='g')}"]
    if site == "inline":
        body += _fill(lines, target, "grad")
    else:
        helper_body = _fill(lines, "t", "r") + ["return r"]
        if site == "helper":
            helpers.append("def _collective(t):\n" + block(helper_body, 1))
            body.append(f"grad = _collective({target})")
        elif site == "helper-2-deep":
            helpers.append("def _collective_inner(t):\n" + block(helper_body, 1))
            helpers.append("def _collective(t):\n    return _collective_inner(t)")
            body.append(f"grad = _collective({target})")
        else:  # static-method
            helpers.append(
                "class _Comm:\n    @staticmethod\n    def run(t):\n" + block(helper_body, 2)
            )
            body.append(f"grad = _Comm.run({target})")
    body.append("return grad * 2.0")
    parts = Parts(
        sig=Sig("plain", ("x",)),
        forward=["out = x * 2.0"],
        ctx_lines=[],
        backward=body,
        imports=["import torch.distributed as dist"],
        backward_helpers=helpers,
        model=[f"return {CONSUMERS[consumer].format(y='Fn.apply(x)')}"],
    )
    files = render(c, parts, ["single", "base-other-module", "mixin-other-module"])
    # The trusted twin: the same collective on a dense private copy of the gradient (what gloo
    # computes for a read-only collective on any layout, B2.10; what NCCL needs, B2.11).
    twin = (
        "import torch.distributed as dist\n\n\n"
        "class _Twin(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 2.0\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n"
        "        h = g.clone(memory_format=torch.contiguous_format)\n"
        + block(_fill(lines, "h", "grad") + ["return grad * 2.0"], 2)
        + "\n\ndef reference(x):\n"
        f"    return {CONSUMERS[consumer].format(y='_Twin.apply(x)')}\n"
    )
    return Program(
        family="collective-layout",
        files=files,
        reference=twin,
        inputs=[[2, 4]],
        function="Fn",
        world=2,
    )
