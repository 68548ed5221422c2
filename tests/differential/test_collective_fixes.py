"""AGL406's copy-first fix for a collective that writes into the gradient, run on two `gloo`
ranks: original and fixed, run.py's scenarios on both ranks.

The fix is in the unsafe tier: gloo reduces the `numel` floats at the data pointer whatever the
strides, so on a non-dense gradient (the stride-0 one of `out.sum()`, the narrow view
`torch.cat` hands each input) the original reduces the wrong memory, or past the allocation,
and the dense copy changes that (semantics B2.9). What this proves is the rest: on the layouts
gloo reads right (dense, transposed, offset) the fixed code gives the same bytes wherever the
original did not raise, on every rank. The programs are drawn first (derandomised,
`AGL_DIFFERENTIAL_EXAMPLES` as for the other families); the ranks are spawned once.
"""

from __future__ import annotations

import functools

import pytest
from collective_programs import grad_collectives
from gloo_ranks import on_ranks
from hypothesis import given, settings
from run import GRAD_LAYOUTS, differences, function_scenarios
from test_safe_fixes_are_equivalent import EXAMPLES, SETTINGS

from autogradlint.engine.fix_loop import fix_text
from autogradlint.engine.request import LintRequest
from autogradlint.engine.verify import compile_error

RULES = frozenset({"AGL406"})


def _drawn() -> list[str]:
    found: list[str] = []

    @settings(SETTINGS, max_examples=EXAMPLES)
    @given(program=grad_collectives())
    def collect(program: str) -> None:
        found.append(program)

    collect()
    return found


# The layouts gloo reduces right; `out.sum()`'s one-element stride-0 gradient is left out: the
# original writes past its allocation there (undefined behaviour, B2.9).
READ_RIGHT = tuple(layout for layout in GRAD_LAYOUTS if layout.name != "expanded")
SCENARIOS = functools.partial(function_scenarios, layouts=READ_RIGHT, sum_backward=False)


def _differences_on_rank(pairs: list[tuple[str, str]], rank: int) -> list[str]:
    out = []
    for index, (original, fixed) in enumerate(pairs):
        for line in differences(original, fixed, SCENARIOS)[:3]:
            out.append(f"rank {rank}, program {index}: {line}")
    return out


@pytest.mark.slow  # seconds of torch subprocesses; CI runs it with -m slow
def test_copy_first_is_unsafe_and_keeps_what_gloo_reduces_right() -> None:
    pairs: list[tuple[str, str]] = []
    for program in _drawn():
        safe = fix_text(LintRequest(program, "generated.py", enabled=RULES))
        assert safe.error is None and not safe.changed, "a collective fix in the safe tier"
        outcome = fix_text(LintRequest(program, "generated.py", enabled=RULES, plan="unsafe"))
        assert outcome.changed, "the collective was not flagged:\n" + program
        assert compile_error(outcome.source) is None
        again = fix_text(LintRequest(outcome.source, "generated.py", enabled=RULES, plan="unsafe"))
        assert not again.changed, "not idempotent:\n" + again.source
        pairs.append((program, outcome.source))
    found = on_ranks(functools.partial(_differences_on_rank, pairs))
    problems = [line for rank in found for line in rank]
    first = int(problems[0].split("program ")[1].split(":")[0]) if problems else 0
    assert not problems, (
        "the fix changed a result gloo got right:\n"
        + "\n".join(problems[:10])
        + "\n--- the program\n"
        + pairs[first][0]
    )
