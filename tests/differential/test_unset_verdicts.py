"""AGL412's verdict held to torch: over generated backwards (unset_programs.py), the rule flags
a program exactly when some scenario (which inputs require grad, the module's switches) raises
UnboundLocalError, in both directions."""

from __future__ import annotations

from hypothesis import given
from run import load
from test_safe_fixes_are_equivalent import SETTINGS
from unset_programs import needs_grad_scenarios, unset_gradients

from autogradlint import lint_source


@SETTINGS
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
