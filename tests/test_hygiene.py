"""Suppression hygiene (AGL901-903): stale, unknown and malformed suppression comments are
reported, with a fix that only edits the comment; the suppressions themselves keep working."""

from __future__ import annotations

from pathlib import Path

import pytest

from autogradlint.engine.door import lint_file
from autogradlint.engine.fix_loop import fix_text
from autogradlint.engine.pipeline import lint_source
from autogradlint.meta import all_rules

ALL = frozenset(all_rules())
# AGL401 on line 10 (backward returns one gradient for two inputs); the rule has no fix, so a
# fixed file differs from its input only in the comments.
PAIR = """\
import torch

class Pair(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return (g,)
"""
LINE = 10


def with_comment(comment: str, source: str = PAIR) -> str:
    lines = source.splitlines(keepends=True)
    lines[LINE - 1] = lines[LINE - 1].rstrip("\n") + comment + "\n"
    return "".join(lines)


def found(source: str, enabled: frozenset[str] = ALL) -> list[tuple[str, int]]:
    return [(f.rule_id, f.line) for f in lint_source(source, "m.py", enabled=enabled).findings]


def test_a_used_suppression_is_quiet() -> None:
    assert found(with_comment("  # noqa: AGL401")) == []
    assert found(with_comment("  # noqa: backward-gradient-count")) == []
    assert found(with_comment("  # autogradlint: ignore[AGL4]")) == []


def test_an_unused_code_is_reported_and_removed() -> None:
    source = with_comment("  # noqa: AGL401, AGL201")
    result = lint_source(source, "m.py")
    (finding,) = result.findings
    assert (finding.rule_id, finding.line) == ("AGL901", LINE)
    assert source.splitlines()[LINE - 1][finding.col : finding.end_col] == "AGL201"
    fixed = fix_text(source)
    assert fixed.source == with_comment("  # noqa: AGL401")
    assert fixed.applied == ["AGL901"]


def test_other_tools_codes_are_left_alone() -> None:
    assert found(with_comment("  # noqa: AGL401, E501, F401")) == []
    assert fix_text(with_comment("  # noqa: E501")).source == with_comment("  # noqa: E501")
    # A bare noqa is every tool's: never judged.
    assert found(with_comment("  # noqa")) == []


def test_an_unused_suppression_in_a_file_no_check_reads() -> None:
    source = "x = 1  # noqa: AGL201\n"
    assert found(source) == [("AGL901", 1)]
    assert fix_text(source).source == "x = 1\n"


def test_a_rule_switched_off_is_not_judged() -> None:
    source = with_comment("  # noqa: AGL401, AGL201")
    assert found(source, ALL - {"AGL201"}) == []  # another configuration may need it
    assert found(source, ALL - {"AGL401"}) == [("AGL901", LINE)]


def test_unknown_codes() -> None:
    source = with_comment("  # noqa: AGL401, AGL999")
    assert found(source) == [("AGL902", LINE)]
    assert fix_text(source).source == with_comment("  # noqa: AGL401")
    assert found(with_comment("  # autogradlint: ignore[AGL401, not-a-rule]")) == [("AGL902", LINE)]


@pytest.mark.parametrize(
    ("comment", "repaired"),
    [
        ("  # noqa AGL401", "  # noqa: AGL401"),
        ("  # NOQA AGL401, AGL201", "  # noqa: AGL401"),  # repaired, then the unused code goes
        ("  # autogradlint: ignore AGL401", "  # autogradlint: ignore[AGL401]"),
    ],
)
def test_a_blanket_that_meant_codes_is_repaired(comment: str, repaired: str) -> None:
    source = with_comment(comment)
    assert ("AGL903", LINE) in found(source)
    assert ("AGL401", LINE) not in found(source)  # it still silences everything until fixed
    assert fix_text(source).source == with_comment(repaired)


@pytest.mark.parametrize(
    "comment",
    [
        "  # noqa:",
        "  # autogradlint: ignore[]",
        "  # autogradlint: ignore[AGL401",
        "  # autogradlint: ignor[AGL401]",
    ],
)
def test_malformed_without_a_clear_repair(comment: str) -> None:
    source = with_comment(comment)
    assert ("AGL903", LINE) in found(source)
    assert fix_text(source).source == source  # reported, never guessed


def test_a_misspelt_directive_silences_nothing() -> None:
    assert found(with_comment("  # autogradlint: ignor[AGL401]")) == [
        ("AGL401", LINE),
        ("AGL903", LINE),
    ]


def test_file_wide_and_own_line_directives() -> None:
    assert found("# autogradlint: file-ignore[AGL4]\n" + PAIR) == []
    unused = "# autogradlint: file-ignore[AGL2]\n" + PAIR
    assert ("AGL901", 1) in found(unused)
    assert fix_text(unused).applied == ["AGL901"]
    assert fix_text(unused).source == PAIR  # an own-line comment goes with its line
    lines = PAIR.splitlines(keepends=True)
    lines.insert(LINE - 1, "        # autogradlint: ignore[AGL401]\n")  # covers the next line
    assert found("".join(lines)) == []


def test_hygiene_findings_can_be_kept_deliberately() -> None:
    assert found(with_comment("  # noqa: AGL401, AGL201, AGL901")) == []
    # A blanket never hides them: that is what they are about.
    assert found("x = 1  # noqa: AGL201  # autogradlint: ignore\n") != []


def test_comments_inside_strings_and_other_comments_survive() -> None:
    assert found('s = "# noqa: AGL201"\n') == []
    source = "x = 1  # keep me  # noqa: AGL201\n"
    assert fix_text(source).source == "x = 1  # keep me\n"
    source = "x = 1  # noqa: AGL201  # why it was there\n"
    assert fix_text(source).source == "x = 1  # why it was there\n"


def test_line_endings_and_columns_are_kept() -> None:
    source = "x = 'é'  # noqa: AGL201\r\ny = 2\r\n"
    (finding,) = lint_source(source, "m.py").findings
    assert (finding.col, finding.end_col) == (17, 23)  # code points, like every finding
    assert fix_text(source).source == "x = 'é'\r\ny = 2\r\n"


def test_fixes_are_offered_one_by_one_to_editors_and_json() -> None:
    source = with_comment("  # noqa: AGL401, AGL201, AGL999")
    result = lint_file(source, "m.py", fixes=True)
    assert sorted(f.rule_id for f in result.findings) == ["AGL901", "AGL902"]
    assert sorted(s.rule_id for s in result.fixes) == ["AGL901", "AGL902"]
    assert all(s.safety == "safe" for s in result.fixes)


def test_a_check_run_audits_files_no_check_reads(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from autogradlint.cli import main

    (tmp_path / "plain.py").write_text("x = 1  # noqa: AGL201\n")
    (tmp_path / "other.py").write_text("y = 2  # noqa: E501\n")
    result = CliRunner().invoke(
        main, ["check", "--no-cache", "--output-format", "concise", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert "plain.py:1:16: AGL901" in result.output
    assert "other.py" not in result.output


QUIET_CASES = [
    "import os  # noqa: F401\n",
    "import os  # noqa\n",
    "import os  # noqa F401\n",  # loose codes: AGL903 even with no finding
    "import os  # noqa:\n",
    "x = 1  # noqa: AGL101\n",
    "x = 1  # noqa: graph-in-backward, E501\n",
    'DOC = "# noqa: AGL101"\n',  # in a string: not a comment
    "x = '#'  # NOQA:E501 # noqa AGL1\n",
    "# autogradlint: file-ignore[AGL4]\nx = 1\n",
    "x = 1  # something # noqa: E731, F811\r\ny = 2  # noqa: AGL2\r\n",
    "x = 1  # noqa: E731\ry = '#'  # noqa: AGL2\r",  # lone \r line ends (old Mac files)
]


@pytest.mark.parametrize("source", QUIET_CASES)
def test_the_no_findings_shortcut_reports_what_the_full_audit_does(source: str) -> None:
    """With no findings, most files' `noqa` comments belong to other tools, and the audit
    skips the comment scan; it must report exactly what the full audit reports."""
    from autogradlint.engine import hygiene

    fast = hygiene.audit(source, "m.py", [], ALL)
    full = hygiene._hygiene(source, "m.py", hygiene.parse_suppressions(source), set(), ALL)
    assert sorted((f.rule_id, f.line, f.col) for f in fast.findings) == sorted(
        (f.rule_id, f.line, f.col) for f, _ in full
    )


def test_an_unused_code_is_found_after_text_that_lowercases_longer() -> None:
    """`"İ".lower()` is two characters: counted in a lowered copy, the comment after them was
    looked for in the wrong place, and the file was passed as having nothing to report."""
    clean = PAIR.replace("return (g,)", "return g * b, g * a")
    source = '"""' + "İ" * 40 + '"""\n' + with_comment("  # noqa: AGL201", clean)
    assert found(source) == [("AGL901", LINE + 1)]
