"""AGL412's verdict held to torch: over generated backwards (unset_programs.py), the rule flags
a program exactly when some scenario (which inputs require grad, the module's switches) raises
UnboundLocalError, in both directions."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from run import load
from unset_programs import needs_grad_scenarios, unset_gradients

from autogradlint.engine.pipeline import lint_source

EXAMPLES = int(os.environ.get("AGL_DIFFERENTIAL_EXAMPLES", "120"))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("AGL_DIFFERENTIAL_RANDOM") != "1",
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program=unset_gradients())
def test_flagged_exactly_when_torch_raises_unbound_local_error(program: str) -> None:
    result = lint_source(program, "generated.py", enabled=frozenset({"AGL412"}))
    assert result.error is None
    flagged = bool(result.findings)
    raised = sorted(
        key
        for key, outcome in needs_grad_scenarios(load(program, "generated"))
        if outcome == ("raised", "UnboundLocalError")
    )
    assert flagged == bool(raised), (
        ("flagged, but no scenario raises" if flagged else f"missed: {raised[:3]} raise")
        + "\n"
        + program
    )
