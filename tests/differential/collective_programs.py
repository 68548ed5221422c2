"""Generated programs whose backward hands its gradient to a `torch.distributed` collective that
writes into it (AGL406): the spellings real code uses (`dist.`, `torch.distributed.`, names
imported from it, keywords, `async_op=True` with `.wait()`), views and aliases taken before the
call (`contiguous` and `reshape` among them), control flow around it, helpers that do the call,
and collectives whose copy-first fix is unsafe. Each program runs on every rank of a process
group; `GRAD_SCALE` (read by run.py) gives each rank its own gradient values.
"""

from __future__ import annotations

from textwrap import indent

from hypothesis import strategies as st
from programs import ALIASES, HEADERS, _block, _module

DIST = {
    "module": ("import torch.distributed as dist\n", "dist.{op}"),
    "from-torch": ("from torch import distributed as dist\n", "dist.{op}"),
    "names": ("from torch.distributed import {op}\n", "{op}"),
    "full": ("", "{T}.distributed.{op}"),
}
CALLS = [
    "{f}({v}{rest})",
    "{f}(tensor={v}{rest})",
    "{f}({v}{rest}, async_op=True).wait()",
    "work = {f}({v}{rest}, async_op=True)\nwork.wait()",
]
OPS = {
    "all_reduce": "",
    "broadcast": ", src=0",
    "reduce": ", dst=0",  # unsafe tier: the non-receiving rank's stride-0 buffer differs
}
RETURNS = ["g", "g * 1.0", "g.clone()", "h.reshape(3, 4)"]
PRELUDE = "import torch.distributed as _dist\n\nGRAD_SCALE = float(_dist.get_rank() + 1)\n\n\n"


@st.composite
def grad_collectives(draw: st.DrawFn) -> str:
    """A Function whose backward reduces or broadcasts its gradient (or a view of it) in place,
    itself or through a helper."""
    header = draw(st.sampled_from(sorted(HEADERS)))
    spelling = draw(st.sampled_from(sorted(DIST)))
    op = draw(st.sampled_from(sorted(OPS)))
    imports, callee = DIST[spelling]
    function = callee.format(op=op, T="{T}")
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from(["n = g.numel()", "if g is None:\n    return None"])))
    alias = draw(st.booleans())
    if alias:
        lines.append(draw(st.sampled_from(ALIASES)))
    target = "h" if alias and draw(st.booleans()) else "g"
    call = draw(st.sampled_from(CALLS)).format(f=function, v=target, rest=OPS[op])
    prelude = imports.format(op=op) + PRELUDE
    if draw(st.booleans()):  # the collective in a helper backward calls
        prelude += f"def _reduce(t):\n    {function}(t{OPS[op]})\n    return t\n\n\n"
        call = f"_reduce({target})"
    flow = draw(st.sampled_from(["plain", "if", "early-return"]))
    if flow == "plain":
        lines.append(call)
    elif flow == "if":
        lines.append("if FLAG:\n" + indent(call, "    "))
    else:
        lines.append("if MODE == 1:\n    return g * 2")
        lines.append(call)
    returns = [r for r in RETURNS if alias or "h" not in r]
    lines.append("return " + draw(st.sampled_from(returns)))
    body = (
        prelude + "class Fn({T}.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n" + _block(lines)
    )
    return _module(header, body)
