"""Output formats (SARIF validated against the official schema, GitHub, JUnit) and baselines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest
from click.testing import CliRunner
from conftest import SQUARE_BUG

from autogradlint.cli import main

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
BUG = SQUARE_BUG


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "bug.py").write_text(BUG)
    (tmp_path / "broken.py").write_text("class F(torch.autograd.Function):\n    def backward(:\n")
    return tmp_path


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args))


def test_sarif_is_valid_and_complete(tree: Path) -> None:
    result = invoke("check", "--no-cache", "--output-format", "sarif", str(tree))
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    (run,) = document["runs"]
    rule_ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert "AGL101" in rule_ids and all(r["helpUri"] for r in run["tool"]["driver"]["rules"])
    (finding,) = run["results"]
    assert finding["ruleId"] == "AGL101" and finding["level"] == "error"
    region = finding["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (13, 16)
    replacement = finding["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert "with torch.enable_grad():" in replacement["insertedContent"]["text"]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert notes and "syntax error" in notes[0]["message"]["text"]


def test_github_annotations(tree: Path) -> None:
    result = invoke("check", "--no-cache", "--output-format", "github", str(tree / "bug.py"))
    (line,) = result.stdout.splitlines()
    assert line.startswith(f"::error file={tree / 'bug.py'},line=13,col=16,endLine=13,")
    assert "title=AGL101 autograd-grad-without-enable-grad::AGL101 " in line


def test_junit(tree: Path) -> None:
    result = invoke("check", "--no-cache", "--output-format", "junit", str(tree))
    root = ET.fromstring(result.stdout.split("?>", 1)[1])
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("failures") == "1" and suite.get("errors") == "1"
    assert root.find(".//failure").get("type") == "AGL101"  # type: ignore[union-attr]


def test_statistics_print_the_table_and_the_summary_as_ruff(tree: Path) -> None:
    target = str(tree / "bug.py")
    for fmt in ("text", "concise"):
        result = invoke("check", "--no-cache", "--statistics", "--output-format", fmt, target)
        assert result.output.splitlines() == [
            "1\tAGL101\t[*] autograd-grad-without-enable-grad",
            "Found 1 problem (1 error, 0 warnings) in 1 file; 1 file checked.",
            "[*] 1 fixable with `autogradlint fix --apply`.",
        ]
    result = invoke("check", "--no-cache", "--statistics", "--output-format", "json", target)
    assert json.loads(result.output) == [
        {
            "code": "AGL101",
            "name": "autograd-grad-without-enable-grad",
            "count": 1,
            "fixable": True,
            "fixable_count": 1,
        }
    ]


def test_baseline_hides_recorded_findings_across_line_shifts(tree: Path) -> None:
    baseline = tree / "baseline.json"
    target = tree / "bug.py"
    assert invoke("check", "--write-baseline", str(baseline), str(target)).exit_code == 0
    assert invoke("check", "--baseline", str(baseline), str(target)).exit_code == 0
    target.write_text("# a new comment shifts every line\n\n" + BUG)
    assert invoke("check", "--baseline", str(baseline), str(target)).exit_code == 0
    # a second copy of the same bug is new
    target.write_text(BUG + "\n\n" + BUG.split("\n", 2)[2].replace("Square", "Cube"))
    result = invoke("check", "--baseline", str(baseline), "--output-format", "json", str(target))
    assert result.exit_code == 1
    assert len(json.loads(result.stdout)) == 1


def test_bad_baseline_is_a_clear_error(tree: Path) -> None:
    (tree / "b.json").write_text("[]")
    result = invoke("check", "--baseline", str(tree / "b.json"), str(tree / "bug.py"))
    assert result.exit_code == 2 and "not a baseline file" in result.output


@pytest.fixture
def odd_names(tmp_path: Path) -> Path:
    """Files whose names hold a byte that is not UTF-8 and a terminal escape sequence."""
    for raw in (b"caf\xe9.py", b"esc\x1b[31m.py"):
        (tmp_path / os.fsdecode(raw)).write_text(BUG)
    return tmp_path


def _check_bytes(output_format: str, path: str, cwd: Path | None = None):  # type: ignore[no-untyped-def]
    """`check` in a subprocess, its output as bytes (a name that is not UTF-8 stays exact)."""
    command = [sys.executable, "-m", "autogradlint", "check", "--no-cache"]
    return subprocess.run(
        [*command, "--output-format", output_format, path], capture_output=True, cwd=cwd
    )


def test_junit_with_odd_file_names_is_valid_xml(odd_names: Path) -> None:
    result = _check_bytes("junit", str(odd_names))
    root = ET.fromstring(result.stdout)  # used to be invalid XML
    names = sorted(case.get("name") for case in root.iter("testcase"))
    assert [Path(n).name for n in names] == ["caf\\xe9.py", "esc\\x1b[31m.py"]


def test_github_annotations_escape_odd_file_names(odd_names: Path) -> None:
    result = _check_bytes("github", str(odd_names))
    text = result.stdout.decode("utf-8")  # valid UTF-8, no raw escape character
    assert "\x1b" not in text
    assert "caf\\xe9.py" in text and "esc\\x1b[31m.py" in text


def test_sarif_uris_are_percent_encoded(odd_names: Path) -> None:
    result = _check_bytes("sarif", str(odd_names), cwd=odd_names)
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    uris = sorted(
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in document["runs"][0]["results"]
    )
    assert uris == ["caf%E9.py", "esc%1B%5B31m.py"]


def test_json_carries_each_fixable_findings_fix_in_ruffs_shape(tree: Path) -> None:
    result = invoke("check", "--no-cache", "--output-format", "json", str(tree / "bug.py"))
    (finding,) = json.loads(result.stdout)
    fix = finding["fix"]  # was always null
    assert fix["applicability"] == "safe"
    assert fix["message"].startswith("wrap the recomputation")
    (edit,) = fix["edits"]
    assert "with torch.enable_grad():" in edit["content"]
    assert edit["location"] == {"row": 12, "column": 1}  # `y = x * x` and the call: lines 12-13
    assert edit["end_location"] == {"row": 14, "column": 1}
    lines = BUG.splitlines(keepends=True)
    patched = "".join(lines[:11]) + edit["content"] + "".join(lines[13:])
    assert "with torch.enable_grad():" in patched and compile(patched, "bug.py", "exec")
