"""Every example in rules/*.yaml is a test: invalid code is flagged where marked, valid is not."""

from __future__ import annotations

import pytest
from conftest import expected_findings

from autogradlint.engine.pipeline import lint_source
from autogradlint.meta import all_rules

RULES = all_rules()
INVALID = [
    pytest.param(meta.id, example.code, id=f"{meta.id}-invalid-{i}")
    for meta in RULES.values()
    for i, example in enumerate(meta.invalid)
]
VALID = [
    pytest.param(meta.id, code, id=f"{meta.id}-valid-{i}")
    for meta in RULES.values()
    for i, code in enumerate(meta.valid)
]
FIXED = [
    pytest.param(meta.id, example.fixed, id=f"{meta.id}-fixed-{i}")
    for meta in RULES.values()
    for i, example in enumerate(meta.invalid)
    if example.fixed
]


@pytest.mark.parametrize(("rule_id", "code"), INVALID)
def test_invalid_example_is_reported_at_its_marker(rule_id: str, code: str) -> None:
    expected = expected_findings(code)
    assert expected, "an invalid example must mark the flagged line with `# AGLxxx`"
    result = lint_source(code, "example.py")
    assert result.error is None
    assert sorted((f.rule_id, f.line) for f in result.findings) == expected


@pytest.mark.parametrize(("rule_id", "code"), VALID)
def test_valid_example_is_clean(rule_id: str, code: str) -> None:
    result = lint_source(code, "example.py")
    assert result.error is None
    assert result.findings == []


@pytest.mark.parametrize(("rule_id", "code"), FIXED)
def test_fixed_example_is_not_reported_by_its_rule(rule_id: str, code: str) -> None:
    result = lint_source(code, "example.py")
    assert result.error is None
    assert [f for f in result.findings if f.rule_id == rule_id] == []


@pytest.mark.parametrize(("rule_id", "code"), INVALID)
def test_invalid_example_is_quiet_when_its_rule_is_disabled(rule_id: str, code: str) -> None:
    enabled = frozenset(RULES) - {rule_id}
    result = lint_source(code, "example.py", enabled=enabled)
    assert all(f.rule_id != rule_id for f in result.findings)
