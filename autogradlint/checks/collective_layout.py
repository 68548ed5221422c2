"""AGL201's collectives: a backward that hands its incoming gradient, not made contiguous, to a
`torch.distributed` collective, directly or through a project function that does (Megatron's
`_gather_along_first_dim(grad_output)` ending in `_all_gather_base`).

NCCL refuses a non-contiguous tensor in every such collective (`ValueError: Tensors must be
contiguous`, semantics B2.11), and a backward receives transposed and stride-0 gradients (B1.1,
B1.6), so training stops; gloo on CPU copies the input (B2.10), so CPU tests pass. Point-to-point
`send`/`recv` are the other way round: gloo raises, NCCL only warns (B2.10-B2.11). torch's own
API is known by its module path (`analysis/collectives.py`, shared with AGL406).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from ..analysis.collectives import (
    CONTIGUOUS,
    POINT_TO_POINT,
    HelperWrites,
    collective,
    cst_argument,
)
from ..analysis.names import dotted
from .base import CheckContext

# Collectives that reduce or copy into the tensor they are handed: gloo reads and writes the
# `numel` elements at its data pointer, whatever the strides (B2.9)
IN_PLACE = frozenset({"all_reduce", "broadcast", "reduce"})


@dataclass(frozen=True)
class CollectiveRead:
    """A gradient argument that reaches a collective's tensor without `.contiguous()`."""

    arg: cst.Arg  # the argument in backward
    collective: str  # its short name (`_all_gather_base`)
    callee: str  # as resolved (`torch.distributed._all_gather_base`)
    via: tuple[str, ...] = ()  # the project functions on the way, outermost first
    when: str = ""  # a parameter of the helper the call must pass for it to run
    params: tuple[str, ...] = ()  # the helper's parameters

    def evidence(self) -> str:
        """The help line's opening sentences."""
        chain = " -> ".join(f"`{v}`" for v in self.via)
        reached = f" (reached through {chain})" if chain else ""
        if self.collective in POINT_TO_POINT:
            return (
                f"`{self.callee}`{reached} refuses a non-contiguous tensor on gloo: it raises "
                "`RuntimeError: input tensor has to be contiguous` when the gradient arrives "
                "transposed or expanded, so training stops (NCCL only warns)."
            )
        if self.collective in IN_PLACE:
            cpu = "gloo on CPU raises nothing and reduces the memory at the data pointer instead"
        else:
            cpu = "gloo on CPU copies it, so a CPU test passes"
        return (
            f"`{self.callee}`{reached} refuses a non-contiguous tensor on NCCL: it raises "
            "`ValueError: Tensors must be contiguous` when the gradient arrives transposed or "
            f"expanded, and training stops ({cpu})."
        )


class CollectiveReads:
    """One file's answers: the helpers read for one backward are reused by the next."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        # made when a gradient first reaches a call (the project index is built on demand)
        self.helpers: HelperWrites | None = None

    def of_call(
        self, call: cst.Call, unguarded: Callable[[cst.BaseExpression], bool]
    ) -> tuple[bool, list[CollectiveRead]]:
        """(whether `call` is a collective itself, the gradient arguments it or the helper it
        calls hands a collective raw); `unguarded`: whether an argument is a gradient, or an
        alias of one, not made contiguous."""
        resolved = self.ctx.facts.imports.resolve(call.func)
        short = collective(resolved, CONTIGUOUS) if resolved is not None else None
        if resolved is not None and short is not None:
            return True, [
                CollectiveRead(arg, short, resolved)
                for position, keywords in CONTIGUOUS[short]
                if (arg := cst_argument(call, position, keywords)) is not None
                and unguarded(arg.value)
            ]
        written = dotted(call.func)
        if written is None or any(arg.star for arg in call.args):
            return False, []
        handed = [arg for arg in call.args if unguarded(arg.value)]
        if not handed:
            return False, []
        if self.helpers is None:
            self.helpers = HelperWrites(self.ctx.summaries, contiguous=True)
        found = self.helpers.of_call(written)
        if found is None:
            return False, []
        params, reads = found
        out = []
        for arg in handed:
            if arg.keyword is None:
                slot: int | None = call.args.index(arg)
            else:
                name = arg.keyword.value
                slot = params.index(name) if name in params else None
            read = reads.get(slot) if slot is not None else None
            if read is not None:
                out.append(
                    CollectiveRead(arg, read.collective, read.callee, read.via, read.when, params)
                )
        return False, out
