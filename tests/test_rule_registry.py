"""The rule YAML files and the check classes agree one to one, and the YAML is well-formed."""

from __future__ import annotations

import ast
import functools
import re
import string
from pathlib import Path

import pytest
import yaml

from autogradlint.checks.gates import Gate
from autogradlint.checks.reads import Reads
from autogradlint.checks.registry import REGISTRY
from autogradlint.engine.hygiene import HYGIENE
from autogradlint.meta import RuleFileError, all_rules, get_rule, parse_rule, rules_dir

RULES = all_rules()


def test_every_rule_has_exactly_one_check_and_back() -> None:
    reported = [rule_id for check in REGISTRY for rule_id in check.codes]
    reported += sorted(HYGIENE)  # suppression-comment rules: engine/hygiene.py's, no check's
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
    meta = RULES[rule_id]
    text = meta.message + meta.help
    fields = {name for _, name, _, _ in string.Formatter().parse(text) if name}
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
        "consequence",
        "detail",
        "via",
        "slots",
        "evidence",
        "error",
        "advice",
        "counting",
        "side",
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


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_headlines_fit_on_one_line(rule_id: str) -> None:
    """ruff's shape: a headline of at most 100 characters with typical names, the detail on
    `help:`; longer values are shortened in the headline (meta.HEADLINE_FIELD)."""
    meta = RULES[rule_id]
    names = {n for _, n, _, _ in string.Formatter().parse(meta.message + meta.help) if n}
    typical = meta.format(**{name: "x" * 16 for name in names})
    assert "\n" not in typical and len(typical) <= 100, typical
    worst = meta.format(**{name: "y" * 200 for name in names})
    assert len(worst) <= 100 + 32 * len(names), worst
    if meta.family != "S":
        assert meta.help, "the why and the what-to-do go on the help line"


PACKAGE = Path(__file__).resolve().parent.parent / "autogradlint"


def _check_classes() -> dict[str, str]:
    """Every Check subclass defined in checks/, by name, with its module's file name: derived
    from Check itself, or from another check whose machinery it reuses (AGL203's SavedInputs
    follows saved inputs with AGL201's CompiledGradients)."""
    defined: list[tuple[str, ast.ClassDef]] = []
    for path in sorted((PACKAGE / "checks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                defined.append((path.name, node))
    found: dict[str, str] = {}
    grew = True
    while grew:
        grew = False
        for file, node in defined:
            bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
            if node.name not in found and bases & ({"Check"} | set(found)):
                found[node.name] = file
                grew = True
    return found


@functools.cache
def _derived_from(file: str) -> frozenset[str]:
    """The checks that the check classes of `file` derive from (it names them, as a base)."""
    path = PACKAGE / "checks" / file
    if not path.is_file():
        return frozenset()
    return frozenset(
        base.id
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        for base in node.bases
        if isinstance(base, ast.Name)
    )


def test_the_registry_is_the_one_place_that_lists_checks() -> None:
    """A rule is its YAML, its check module and one registry line: no other module of the
    package names a check class (the gate table and the slicer's selection are derived from
    the checks' own declarations), and every check class is registered."""
    classes = _check_classes()
    assert set(classes) == {check.__name__ for check in REGISTRY}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "registry.py" and path.parent.name == "checks":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
            if isinstance(node, ast.alias):
                name = node.name
            derives = path.parent.name == "checks" and name in _derived_from(path.name)
            if name in classes and path.name != classes[name] and not derives:
                raise AssertionError(f"{path.relative_to(PACKAGE)} names the check {name}")


def test_every_check_declares_its_codes_gate_and_reads() -> None:
    for check in REGISTRY:
        assert check.codes and set(check.codes) <= set(RULES), check
        assert isinstance(check.gate, Gate), check
        assert isinstance(check.reads, Reads) and check.reads != Reads(), check


def test_the_tree_front_end_knows_no_rule() -> None:
    """What the slicer keeps comes from the enabled checks' declarations (`Check.reads`): no
    module of speed/ (code, comments or strings) names a rule."""
    for path in sorted((PACKAGE / "speed").rglob("*.py")):
        found = re.findall(r"AGL\d{3}", path.read_text(encoding="utf-8"))
        assert not found, (path.name, found)
