"""The generators of the rules issue 32 added (AGL406 on collectives, AGL412, AGL413) and of issue
31's behaviours (AGL201 on collectives, AGL403 on containers of tensors) each make
at least 30 different programs, some with the hazard and some without: the forms the oracle
holds each rule to (test_oracle.py runs a sample of them under torch)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .generators import build
from .oracle import seed_of

Tags = dict[str, str]

# Whether a program's choices put the hazard in it (torch decides in test_oracle.py; this only
# says the generator makes both kinds).
HAZARD: dict[str, Callable[[Tags], bool]] = {
    "collectives": lambda t: t["collective"] != "all_gather-read" and t["alias"] != "h=g.clone()",
    "needs-input-grad": lambda t: (
        t["form"] in ("unbound", "one-unbound", "stale-none", "any-branch")
    ),
    "fake-impl": lambda t: t["fake"] == "none",
    # issue 31's: a collective handed a layout NCCL refuses, a container of tensors kept on ctx
    "collective-layout": lambda t: (
        t["guard"] == "raw" or (t["guard"] == "clone" and t["consumer"] == "transpose")
    ),
    "ctx-lists": lambda t: t["keep"] in ("kept", "kept-tuple", "kept-item"),
}


@pytest.mark.parametrize("family", sorted(HAZARD))
def test_each_new_rules_generator_makes_30_programs_with_and_without_the_hazard(
    family: str,
) -> None:
    programs = [build(family, seed_of(family, i, "count")) for i in range(300)]
    texts = {p.text(): HAZARD[family](p.tags) for p in programs}
    assert len(texts) >= 30, f"{family}: {len(texts)} different programs"
    assert set(texts.values()) == {True, False}
