"""Every rule rests on rows of docs/semantics.md, and every row there is verified by a test.

A rule cites rows in its `semantics:` list and in its text; a row exists only as a table row of
the document; a test in tests/semantics names the rows it verifies with `@rows(...)`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from autogradlint.evidence import document_path, parse_rows, semantics_rows
from autogradlint.meta import all_rules

ROOT = Path(__file__).resolve().parent.parent
CITATION = re.compile(r"\b(FIX-[A-D]\d+|[A-D]\d+\.\d+[a-z]?)\b")


def rows_with_tests() -> dict[str, list[str]]:
    """Row id -> the tests that verify it, read from the `@rows(...)` decorators."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests" / "semantics").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                if (
                    isinstance(decorator, ast.Call)
                    and isinstance(decorator.func, ast.Name)
                    and decorator.func.id == "rows"
                ):
                    for arg in decorator.args:
                        assert isinstance(arg, ast.Constant), f"{path.name}:{node.name}"
                        found.setdefault(arg.value, []).append(f"{path.name}::{node.name}")
    return found


def test_the_document_is_the_one_in_the_checkout() -> None:
    assert document_path() == ROOT / "docs" / "semantics.md"
    assert len(semantics_rows()) >= 60


def test_every_documented_row_is_verified_by_a_test() -> None:
    documented, tested = set(semantics_rows()), set(rows_with_tests())
    assert sorted(documented - tested) == [], "rows with no test in tests/semantics"
    assert sorted(tested - documented) == [], "tests naming rows the document does not have"


def test_every_rule_cites_rows_that_exist() -> None:
    rows = semantics_rows()
    for meta in all_rules().values():
        assert meta.semantics or meta.family == "S", meta.id  # S: autogradlint's own comments
        missing = [r for r in meta.semantics if r not in rows]
        assert missing == [], f"{meta.id} cites rows docs/semantics.md lacks: {missing}"
        in_text = set(CITATION.findall(meta.docs + "\n" + meta.message))
        undeclared = sorted(in_text - set(meta.semantics))
        assert undeclared == [], f"{meta.id}'s text cites rows missing from `semantics:`"


def test_every_row_backs_a_rule_or_the_documents_own_argument() -> None:
    """A row no rule cites is still evidence the document uses (its list of common mistakes
    and its prose cite it); a row nothing cites is dead weight."""
    text = document_path().read_text(encoding="utf-8")
    prose = "\n".join(line for line in text.splitlines() if not line.startswith("|"))
    cited = {r for meta in all_rules().values() for r in meta.semantics}
    cited |= set(CITATION.findall(prose))
    assert sorted(set(semantics_rows()) - cited) == []


def test_row_parsing_keeps_pipes_inside_code() -> None:
    rows = parse_rows("### Setting\n| A9.1 | `a | b` | seen |\n")
    assert rows["A9.1"].cells == ("`a | b`", "seen")
    assert rows["A9.1"].section == "Setting"
