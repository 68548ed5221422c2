"""The new rules' example pairs, confirmed by running them: `autogradlint confirm` on CPU confirms
each buggy example (AGL412: UnboundLocalError once an input does not require grad, semantics
D12.1; AGL406: another consumer of the gradient sees the write, the collective's too on two gloo
ranks, B2.1, B2.4), and the same probe on the fixed twin reproduces nothing. (AGL413's pair is examples/custom_op_*.py,
confirmed in test_confirm.py: a custom op without a backward is no target of its own.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autogradlint.cli import main
from autogradlint.meta import all_rules

pytest.importorskip("torch", reason="the confirmer needs torch")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rule_id", "case", "subject", "probe", "evidence"),
    [
        ("AGL412", 0, "Scale", "needs", "backward raised UnboundLocalError"),
        ("AGL406", 0, "Mean", "shared", "another consumer of the same output"),
        ("AGL406", 1, "CopyToParallelRegion", "shared", "another consumer of the same output"),
    ],
)
def test_the_rules_example_pair_is_confirmed_and_its_twin_is_not(
    tmp_path: Path, rule_id: str, case: int, subject: str, probe: str, evidence: str
) -> None:
    meta = all_rules()[rule_id]
    bad = meta.invalid[case]
    fixed = bad.fixed or next(code for code in meta.valid if f"class {subject}(" in code)
    (tmp_path / "bug.py").write_text(bad.code)
    (tmp_path / "fixed.py").write_text(fixed)
    result = CliRunner().invoke(
        main, ["confirm", "--device", "cpu", "--output-format", "json", str(tmp_path)]
    )
    assert result.exit_code == 1, result.output  # a confirmed finding
    rows = {(r["target"], r["probe"]): r for r in json.loads(result.stdout)}
    confirmed = rows[(f"bug:{subject}", probe)]
    assert confirmed["verdict"] == "confirmed"
    assert any(evidence in line for line in confirmed["devices"]["cpu"]["evidence"])
    assert rows[(f"fixed:{subject}", probe)]["verdict"] == "not_reproduced"
