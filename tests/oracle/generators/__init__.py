"""One generator per rule family: each builds a program, with the hazard or without it, from a
Chooser (random, or replaying recorded choices)."""

from __future__ import annotations

from collections.abc import Callable

from ..program import Chooser, Program
from .contract import gen_402, gen_403, gen_404, gen_405, gen_407, gen_408, gen_409
from .counts import gen_401, gen_410, gen_411
from .customops import gen_fake_impl
from .gradients import gen_406, gen_collectives, gen_needs_input_grad
from .layouts import gen_collective_layout
from .lists import gen_ctx_lists
from .overrides import gen_c
from .reentrant import gen_a

GENERATE: dict[str, Callable[[Chooser], Program]] = {
    "A": gen_a,
    "C": gen_c,
    "AGL401": gen_401,
    "AGL402": gen_402,
    "AGL403": gen_403,
    "ctx-lists": gen_ctx_lists,
    "AGL404": gen_404,
    "AGL405": gen_405,
    "AGL406": gen_406,
    "AGL407": gen_407,
    "AGL408": gen_408,
    "AGL409": gen_409,
    "AGL410": gen_410,
    "AGL411": gen_411,
    "collectives": gen_collectives,
    "collective-layout": gen_collective_layout,
    "needs-input-grad": gen_needs_input_grad,
    "fake-impl": gen_fake_impl,
}


def build(
    family: str, seed: int, forced: dict[str, int] | None = None, simplest: bool = False
) -> Program:
    """The program `family`'s generator makes from `seed` (and any forced choices; with
    `simplest`, every other choice takes its first option)."""
    c = Chooser(seed, forced, simplest)
    prog = GENERATE[family](c)
    prog.family = family
    prog.tags = dict(c.tags)
    prog.choices = dict(c.made)
    prog.seed = seed
    return prog
