"""Every safe fix, proven by running it: original and fixed code, executed with torch on the same
inputs, must give bitwise-equal results on every scenario where the original did not raise.

The programs come from programs.py (hypothesis); the scenarios and the comparison from run.py.
CI runs a fixed, derandomised sample (`AGL_DIFFERENTIAL_EXAMPLES`, default 120 per family);
set `AGL_DIFFERENTIAL_RANDOM=1` and a larger count to search further.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from programs import grad_writes, graphless_grads, kernel_calls, plain_hooks, plain_methods
from run import differences, function_scenarios, subclass_scenarios
from unset_programs import needs_grad_scenarios, unset_gradients

from autogradlint.fix.loop import fix_text
from autogradlint.fix.verify import compile_error

EXAMPLES = int(os.environ.get("AGL_DIFFERENTIAL_EXAMPLES", "120"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("AGL_DIFFERENTIAL_RANDOM") != "1",
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FAMILIES = [
    pytest.param(grad_writes(), {"AGL406"}, function_scenarios, id="AGL406"),
    pytest.param(graphless_grads(), {"AGL101", "AGL102"}, function_scenarios, id="AGL101-AGL102"),
    pytest.param(kernel_calls(), {"AGL201", "AGL202"}, function_scenarios, id="AGL201-AGL202"),
    pytest.param(plain_methods(), {"AGL402"}, function_scenarios, id="AGL402"),
    pytest.param(plain_hooks(), {"AGL303"}, subclass_scenarios, id="AGL303"),
    pytest.param(unset_gradients(), {"AGL412"}, needs_grad_scenarios, id="AGL412"),
]


@pytest.mark.parametrize(("programs", "rules", "scenarios"), FAMILIES)
def test_safe_fixes_keep_every_non_raising_result(programs, rules, scenarios) -> None:
    @SETTINGS
    @given(program=programs)
    def check(program: str) -> None:
        outcome = fix_text(program, "generated.py", enabled=frozenset(rules))
        assert outcome.error is None, outcome.error
        if not outcome.changed:
            event("no safe fix (unproven, or nothing flagged)")
            return
        event(f"fixed: {', '.join(sorted(set(outcome.applied)))}")
        assert compile_error(outcome.source) is None
        again = fix_text(outcome.source, "generated.py", enabled=frozenset(rules))
        assert not again.changed, "not idempotent:\n" + again.source
        found = differences(program, outcome.source, scenarios)
        assert not found, (
            "a safe fix changed behaviour:\n--- original\n"
            + program
            + "--- fixed\n"
            + outcome.source
            + "--- differences\n"
            + "\n".join(found[:10])
        )

    check()


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(program=st.one_of(graphless_grads(), grad_writes(), kernel_calls(), unset_gradients()))
def test_unsafe_tier_still_produces_code_that_compiles(program: str) -> None:
    outcome = fix_text(program, "generated.py", unsafe=True)
    assert outcome.error is None, outcome.error
    assert compile_error(outcome.source) is None
