"""The rule YAML files and the check classes agree one to one, and the YAML is well-formed."""

from __future__ import annotations

import string

import pytest
import yaml

from autogradlint.checks import REGISTRY
from autogradlint.hygiene import HYGIENE
from autogradlint.meta import RuleFileError, all_rules, get_rule, parse_rule, rules_dir

RULES = all_rules()


def test_every_rule_has_exactly_one_check_and_back() -> None:
    reported = [rule_id for _check, gate in REGISTRY for rule_id in gate.ids]
    reported += sorted(HYGIENE)  # the suppression-comment rules are hygiene.py's, not a check's
    assert len(reported) == len(set(reported))
    assert sorted(reported) == sorted(RULES)


def test_names_are_unique_and_codes_match_families() -> None:
    names = [meta.name for meta in RULES.values()]
    assert len(names) == len(set(names))
    digit = {"A": "1", "B": "2", "C": "3", "D": "4", "S": "9"}
    for meta in RULES.values():
        assert meta.id[3] == digit[meta.family], meta.id


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_message_fields_are_ones_the_checks_provide(rule_id: str) -> None:
    fields = {name for _, name, _, _ in string.Formatter().parse(RULES[rule_id].message) if name}
    assert fields <= {
        "cls",
        "outputs",
        "root",
        "grad",
        "callee",
        "hook",
        "code",
        "method",
        "expected",
        "actual",
        "shown",
        "attr",
        "name",
        "problem",
        "detail",
    }


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_fix_safety_matches_examples(rule_id: str) -> None:
    meta = RULES[rule_id]
    if meta.fix == "none":
        assert all(example.fixed is None for example in meta.invalid)


def test_lookup_by_code_and_name() -> None:
    assert get_rule("agl101") is RULES["AGL101"]
    assert get_rule("autograd-grad-without-enable-grad") is RULES["AGL101"]
    assert get_rule("AGL999") is None


def test_malformed_rule_files_are_rejected_with_their_origin() -> None:
    good = yaml.safe_load((rules_dir() / "AGL101.yaml").read_text())
    for broken in (
        {**good, "name": "Not Kebab"},
        {**good, "severity": "fatal"},
        {**good, "fix": "maybe"},
        {k: v for k, v in good.items() if k != "docs"},
    ):
        with pytest.raises(RuleFileError, match="AGL101.yaml"):
            parse_rule(broken, "rules/AGL101.yaml")
