"""What each rule predicts torch will show, and whether the linter and torch agree.

A rule's prediction is a pattern over the harms `torch_side.py` reports (see its docstring for
the harm strings). Some rules predict a risk torch shows only under one call: AGL105 and AGL104
only under double backward (`wrong:double:second`), AGL408 only on a second backward through a
retained graph (`retain`), AGL403 only when an input changes in place between forward and
backward (`mutate`), AGL402 only when forward is reached through an instance (`instance`):
the drivers make every program go through those calls.

Agreement, both ways, for a program from generator G:
- missed: a harm in G's scope (the union of G's rules' predictions) that no finding of G's rules
  predicts;
- false alarm: a finding of any rule the oracle covers whose prediction matches none of the
  program's harms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ELEMENT_0 = r"RuntimeError: element 0 of tensors does not require grad"
# The scenarios that run backward first-order (grad mode off); `instance` runs the methods
# through an instance under no_grad.
FIRST_ORDER = r"(train|sum|grad|partial|nonleaf|instance)"

PREDICTS: dict[str, str] = {
    # A: graph building inside backward
    "AGL101": rf"raise:{FIRST_ORDER}:{ELEMENT_0}",
    "AGL102": rf"raise:\w+:{ELEMENT_0}",
    "AGL103": (
        r"changed:grad:leaf-grad|wrong:\w+:(grad|second)$|"
        rf"raise:\w+:(RuntimeError: Trying to backward through the graph a second time|{ELEMENT_0})"
    ),
    "AGL104": r"changed:grad:leaf-grad|wrong:double:second",
    "AGL105": r"wrong:double:second",
    # B: the gradient's layout reaching compiled code; here a torch.distributed collective:
    # NCCL refuses a non-contiguous tensor (B2.11, the layout observed on gloo: torch_side's
    # `nccl:` harm); gloo itself refuses one in all_to_all_single and send/recv (B2.10), and
    # reduces the wrong memory in place on a narrow or stride-0 one (B2.9: past the one-element
    # storage of `out.sum()`'s gradient, where the rank may abort); not retain's wrong second
    # gradient, which reads the upstream gradient the first call's write changed (AGL406)
    "AGL201": (
        r"nccl:\w+:|raise:\w+:(ValueError: Tensors must be contiguous|"
        r"RuntimeError: input tensor has to be contiguous)|wrong:(?!retain)\w+:grad|crash:\w+:"
    ),
    # C: __torch_function__ / __torch_dispatch__ overrides and modes
    "AGL301": r"wrong:\w+:dtype|wrong:dtype:value|raise:\w+:RuntimeError: .*(dtype|scalar type)",
    "AGL302": r"wrong:\w+:device|wrong:device:value|raise:\w+:RuntimeError: .*device",
    "AGL303": r"warn:\w+:UserWarning: Defining your `__torch_function__` as a plain method",
    "AGL304": r"raise:\w+:RecursionError",
    "AGL305": r"raise:\w+:NotImplementedError",
    "AGL306": r"wrong:(zeros_like|new_zeros|to):(dtype|device|shape)",
    # D: the Function contract
    "AGL401": (
        r"raise:\w+:RuntimeError: function \w+ returned "
        r"(an incorrect number of gradients|a gradient different than None at position)"
    ),
    "AGL402": r"raise:instance:|wrong:instance:output",
    "AGL403": r"wrong:mutate:grad",
    "AGL404": (
        r"raise:\w+:TypeError: save_for_backward can only save|"
        r"raise:\w+:ValueError: (not enough|too many) values to unpack|wrong:train:grad"
    ),
    "AGL405": (
        r"wrong:nonleaf:grad|changed:\w+:input|"
        r"silent:\w+:RuntimeError: a (view of a )?leaf Variable that requires grad"
    ),
    "AGL406": (
        r"changed:\w+:upstream|wrong:train:sibling|"
        # a collective writing into the shared gradient can corrupt the heap (gloo writes numel
        # floats from the data pointer: past the allocation of a stride-0 gradient, B2.9), and
        # the rank aborts (`munmap_chunk(): invalid pointer`) in whichever scenario the
        # corruption first shows: train, sum, or a later one such as instance
        r"raise:sum:RuntimeError: unsupported operation: more than one element|crash:\w+:"
    ),
    "AGL407": r"raise:train:(TypeError|AttributeError|RuntimeError: (Legacy|element 0))|wrong:train:grad",
    "AGL408": r"raise:retain:|wrong:retain:grad",
    "AGL409": (
        r"changed:\w+:(input|output)|wrong:retain:grad|"
        r"raise:retain:RuntimeError: one of the variables needed for gradient computation"
    ),
    "AGL410": (
        r"raise:(?!instance)\w+:TypeError: .*(missing \d+ required positional|missing a required argument|"
        r"takes \d+ positional|takes from \d+ to \d+ positional|too many positional arguments|"
        r"unexpected keyword)"
    ),
    "AGL411": r"raise:\w+:TypeError: .*(unexpected keyword argument|missing \d+ required)",
    "AGL412": r"raise:\w+:UnboundLocalError|wrong:partial:grad",
    "AGL413": r"opcheck:test_(faketensor|aot_dispatch_dynamic|aot_dispatch_static)",
}


TIMEOUT = "raise:timeout:"  # torch_side's alarm: the program ran past TIMEOUT_S


@dataclass(frozen=True)
class Generator:
    codes: frozenset[str]  # the rules whose verdicts this generator's programs hold to torch

    def scope(self) -> re.Pattern[str]:
        parts = [PREDICTS[c] for c in sorted(self.codes)]
        return re.compile("|".join(f"(?:{p})" for p in parts))


GENERATORS: dict[str, Generator] = {
    "A": Generator(frozenset({"AGL101", "AGL102", "AGL103", "AGL104", "AGL105"})),
    "C": Generator(frozenset({"AGL301", "AGL302", "AGL303", "AGL304", "AGL305", "AGL306"})),
    # one generator per contract rule; AGL412's and AGL413's are named for their hazard below
    **{
        code: Generator(frozenset({code}))
        for code in PREDICTS
        if code.startswith("AGL4") and code not in ("AGL412", "AGL413")
    },
    "ctx-lists": Generator(frozenset({"AGL403"})),  # containers of tensors kept on ctx
    "collectives": Generator(frozenset({"AGL406"})),
    # a collective handed the gradient: its layout (AGL201) and, in place, the write (AGL406)
    "collective-layout": Generator(frozenset({"AGL201", "AGL406"})),
    "needs-input-grad": Generator(frozenset({"AGL412"})),
    "fake-impl": Generator(frozenset({"AGL413"})),
}


@dataclass(frozen=True)
class Disagreement:
    generator: str
    direction: str  # missed | false-alarm
    code: str  # the rule that flagged wrongly, or the generator's rule(s) that missed
    harms: tuple[str, ...]  # the harms missed, or every harm the program showed

    @property
    def key(self) -> str:
        return f"{self.generator}/{self.direction}/{self.code}"


def judge(generator: str, harms: list[str], codes: list[str]) -> list[Disagreement]:
    """The disagreements between torch's harms and the linter's findings (rule codes). A
    program that ran past its time (`raise:timeout:`, a loaded machine) has no verdict: the
    scenarios after the alarm never ran, so neither direction can be told."""
    if any(h.startswith(TIMEOUT) for h in harms):
        return []
    gen = GENERATORS[generator]
    scope = gen.scope()
    flagged = sorted({c for c in codes if c in PREDICTS})
    out: list[Disagreement] = []
    in_scope = [h for h in harms if scope.search(h)]
    missed = [h for h in in_scope if not any(re.search(PREDICTS[c], h) for c in flagged)]
    if missed:
        name = "+".join(sorted(gen.codes))
        out.append(Disagreement(generator, "missed", name, tuple(missed)))
    for code in flagged:
        if not any(re.search(PREDICTS[code], h) for h in harms):
            out.append(Disagreement(generator, "false-alarm", code, tuple(harms)))
    return out


def harmful(generator: str, harms: list[str]) -> bool:
    """Whether torch shows a harm in the generator's scope."""
    scope = GENERATORS[generator].scope()
    return any(scope.search(h) for h in harms)
