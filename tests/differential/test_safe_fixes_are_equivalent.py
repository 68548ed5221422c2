"""Every safe fix, proven by running it: original and fixed code, executed with torch on the same
inputs, must give bitwise-equal results on every scenario where the original did not raise.

The programs come from programs.py and hazards.py (hypothesis); the scenarios and the
comparison from run.py; each program is fixed as a project (project.py), so preconditions about
its other files are proven the way `fix` proves them. The fast suite runs a fixed, derandomised
sample of 30 programs per family; `-m slow` (CI's second step) runs 120 (`AGL_DIFFERENTIAL_EXAMPLES`
sets that count); set `AGL_DIFFERENTIAL_RANDOM=1` and a larger count to search further (`AGL_DIFFERENTIAL_EXAMPLES=100 AGL_DIFFERENTIAL_RANDOM=1` runs
1,000 programs over the ten families).
"""

from __future__ import annotations

import os

import pytest
from hazards import (
    decorated_backwards,
    instantiated_functions,
    introspecting_backwards,
    lazy_torch,
    nullable_gradients,
    program_text,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from programs import (
    grad_writes,
    gradient_views,
    graphless_grads,
    kernel_calls,
    plain_hooks,
    plain_methods,
)
from project import fix_project
from run import differences, function_scenarios, subclass_scenarios
from unset_programs import needs_grad_scenarios, unset_gradients

from autogradlint.engine.verify import compile_error

EXAMPLES = int(os.environ.get("AGL_DIFFERENTIAL_EXAMPLES", "120"))
SETTINGS = settings(  # what every differential search shares, but its size
    deadline=None,
    derandomize=os.environ.get("AGL_DIFFERENTIAL_RANDOM") != "1",
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Each program runs with torch over every scenario: the whole sample takes minutes, so the fast
# suite runs its first part and `-m slow` all of it.
SIZES = [
    pytest.param(min(30, EXAMPLES), id="sample"),
    pytest.param(EXAMPLES, id="full", marks=pytest.mark.slow),
]
FAMILIES = [
    pytest.param(grad_writes(), {"AGL406"}, function_scenarios, id="AGL406"),
    pytest.param(graphless_grads(), {"AGL101", "AGL102"}, function_scenarios, id="AGL101-AGL102"),
    pytest.param(kernel_calls(), {"AGL201", "AGL202"}, function_scenarios, id="AGL201-AGL202"),
    pytest.param(gradient_views(), {"AGL204"}, function_scenarios, id="AGL204"),
    pytest.param(plain_methods(), {"AGL402"}, function_scenarios, id="AGL402"),
    pytest.param(plain_hooks(), {"AGL303"}, subclass_scenarios, id="AGL303"),
    # issue 34: the shapes each precondition is about
    pytest.param(
        decorated_backwards(), {"AGL101", "AGL102"}, function_scenarios, id="decorated-backward"
    ),
    pytest.param(
        nullable_gradients(), {"AGL201", "AGL202"}, function_scenarios, id="nullable-gradients"
    ),
    pytest.param(instantiated_functions(), {"AGL402"}, function_scenarios, id="instances"),
    pytest.param(lazy_torch(), {"AGL101", "AGL202"}, function_scenarios, id="lazy-torch"),
    pytest.param(
        introspecting_backwards(), {"AGL406", "AGL202"}, function_scenarios, id="introspection"
    ),
    pytest.param(unset_gradients(), {"AGL412"}, needs_grad_scenarios, id="AGL412"),
]


@pytest.mark.parametrize(("programs", "rules", "scenarios"), FAMILIES)
@pytest.mark.parametrize("examples", SIZES)
def test_safe_fixes_keep_every_non_raising_result(programs, rules, scenarios, examples) -> None:
    @settings(SETTINGS, max_examples=examples)
    @given(program=programs)
    def check(program: str | dict[str, str]) -> None:
        outcome = fix_project(program, rules)
        assert not outcome.errors, outcome.errors
        if not outcome.changed:
            event("no safe fix (unproven, or nothing flagged)")
            return
        event(f"fixed: {', '.join(sorted(set(outcome.applied)))}")
        assert all(compile_error(text) is None for text in outcome.files.values())
        again = fix_project(outcome.files, rules)
        assert not again.changed, "not idempotent:\n" + program_text(again.files)
        found = differences(program, outcome.files, scenarios)
        assert not found, (
            "a safe fix changed behaviour:\n--- original\n"
            + program_text(program)
            + "--- fixed\n"
            + program_text(outcome.files)
            + "--- differences\n"
            + "\n".join(found[:10])
        )

    check()


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(
    program=st.one_of(
        graphless_grads(),
        grad_writes(),
        kernel_calls(),
        gradient_views(),
        decorated_backwards(),
        nullable_gradients(),
        lazy_torch(),
        unset_gradients(),
    )
)
def test_unsafe_tier_still_produces_code_that_compiles(program: str | dict[str, str]) -> None:
    outcome = fix_project(program, unsafe=True)
    assert not outcome.errors, outcome.errors
    assert all(compile_error(text) is None for text in outcome.files.values())
