"""The ruff flags of `check` and `fix`, and the errors a new user meets, each as ruff behaves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SQUARE_BUG

from autogradlint.cli import main

FIXED_LINE = "with torch.enable_grad():"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.autogradlint]\n")
    (tmp_path / "bug.py").write_text(SQUARE_BUG)
    return tmp_path


def run(*args: str, stdin: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args), input=stdin)


def test_output_file_gets_the_report_and_stdout_stays_empty(project: Path) -> None:
    target = project / "reports" / "out.json"
    result = run("check", "--no-cache", "--output-format", "json", "-o", str(target), str(project))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert [f["code"] for f in json.loads(target.read_text())] == ["AGL101"]
    text = project / "out.txt"
    run("check", "--no-cache", "-o", str(text), str(project))
    assert "AGL101" in text.read_text() and "\x1b[" not in text.read_text()  # no colour codes


def test_quiet_keeps_findings_and_drops_the_summary(project: Path) -> None:
    result = run("check", "--no-cache", "-q", str(project))
    assert "AGL101" in result.stdout
    assert "Found" not in result.stdout and "fixable" not in result.stdout
    clean = project / "clean"
    clean.mkdir()
    (clean / "ok.py").write_text("x = 1\n")
    assert run("check", "--no-cache", "-q", str(clean)).stdout == ""


def test_silent_prints_nothing_and_still_exits_one(project: Path) -> None:
    result = run("check", "--no-cache", "-s", str(project))
    assert result.exit_code == 1 and result.output == ""


def test_color_always_and_never(project: Path) -> None:
    coloured = run("check", "--no-cache", "--color", "always", str(project)).stdout
    plain = run("check", "--no-cache", "--color", "never", str(project)).stdout
    assert "\x1b[" in coloured and "\x1b[" not in plain


def test_diff_shows_the_fix_and_writes_nothing(project: Path) -> None:
    result = run("check", "--diff", str(project))
    assert result.exit_code == 1
    assert f"+        {FIXED_LINE}" in result.stdout
    assert (project / "bug.py").read_text() == SQUARE_BUG
    (project / "bug.py").write_text("x = 1\n")
    assert run("check", "--diff", str(project)).exit_code == 0


NOT_STATIC = """\
import torch

class Double(torch.autograd.Function):
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2
"""


def test_exit_non_zero_on_fix(project: Path) -> None:
    (project / "bug.py").write_text(NOT_STATIC)
    assert run("check", "--no-cache", "--fix", str(project)).exit_code == 0  # nothing remains
    (project / "bug.py").write_text(NOT_STATIC)
    result = run("check", "--no-cache", "--fix", "--exit-non-zero-on-fix", str(project))
    assert result.exit_code == 1
    assert "@staticmethod\n    def forward" in (project / "bug.py").read_text()


def test_show_files_lists_what_would_be_checked(project: Path) -> None:
    (project / "build").mkdir()
    (project / "build" / "gen.py").write_text("x = 1\n")  # excluded by default
    result = run("check", "--show-files", str(project))
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [str((project / "bug.py").resolve())]


def test_show_settings_names_the_file_and_the_rules(project: Path) -> None:
    result = run("check", "--show-settings", "--ignore", "AGL4", str(project / "bug.py"))
    assert result.exit_code == 0
    assert f"Settings path: {(project / 'pyproject.toml').resolve()}" in result.stdout
    assert "AGL101" in result.stdout and "'AGL401'" not in result.stdout.split("enabled")[-1]


def test_add_noqa_silences_every_current_finding(project: Path) -> None:
    result = run("check", "--no-cache", "--add-noqa", str(project))
    assert result.exit_code == 0
    assert "Added 1 noqa directive." in result.stderr
    assert "[0]  # noqa: AGL101" in (project / "bug.py").read_text()
    assert run("check", "--no-cache", str(project)).exit_code == 0
    again = run("check", "--no-cache", "--add-noqa", str(project))
    assert "Added 0 noqa directives." in again.stderr


def test_exclude_and_per_file_ignores_on_the_command_line(project: Path) -> None:
    assert run("check", "--no-cache", "--exclude", "bug.py", str(project)).exit_code == 2
    assert run("check", "--no-cache", "--extend-exclude", "bug.py", str(project)).exit_code == 2
    result = run("check", "--no-cache", "--per-file-ignores", "bug.py:AGL1", str(project))
    assert result.exit_code == 0
    bad = run("check", "--per-file-ignores", "bug.py", str(project))
    assert bad.exit_code == 2 and "PATTERN:CODES" in bad.stderr


def test_a_directory_without_python_files_warns_and_nothing_at_all_is_an_error(
    project: Path,
) -> None:
    empty = project / "venv" / "pkg"
    empty.mkdir(parents=True)
    (empty / "README").write_text("not python\n")
    result = run("check", "--no-cache", str(empty))
    assert result.exit_code == 2
    # one message for one problem: the error, no warning about the same directory
    assert result.stderr == f"error: no Python files to check in {empty}\n"
    both = run("check", "--no-cache", str(empty), str(project / "bug.py"))
    assert both.exit_code == 1 and "warning: no Python files" in both.stderr


def test_a_missing_baseline_is_a_clear_error(project: Path) -> None:
    result = run("check", "--baseline", str(project / "nope.json"), str(project))
    assert result.exit_code == 2
    assert "no such baseline file" in result.stderr and "--write-baseline" in result.stderr
    assert "Errno" not in result.stderr


def test_two_configurations_in_one_directory_warn_which_is_used(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.autogradlint]\nignore = ["AGL1"]\n')
    (project / ".autogradlint.yaml").write_text("select: [ALL]\n")
    result = run("check", "--no-cache", str(project))
    assert "using .autogradlint.yaml, ignoring pyproject.toml" in result.stderr
    assert "AGL101" in result.stdout  # the YAML file's settings apply


def test_concise_marks_fixable_findings(project: Path) -> None:
    result = run("check", "--no-cache", "--output-format", "concise", str(project))
    assert (
        result.stdout.startswith(str(project / "bug.py"))
        or "bug.py:13:16: AGL101 [*] " in result.stdout
    )
    assert "AGL101 [*] " in result.stdout


def test_json_fix_is_ruffs_shape(project: Path) -> None:
    result = run("check", "--no-cache", "--output-format", "json", str(project))
    (finding,) = json.loads(result.stdout)
    fix = finding["fix"]
    assert fix["applicability"] == "safe" and fix["message"]
    assert fix["edits"] and {"content", "location", "end_location"} <= set(fix["edits"][0])


def test_install_hints_keep_their_extras() -> None:
    from rich.console import Console

    from autogradlint.cli.common import print_error

    console = Console(record=True, width=200)
    print_error(console, "install them with `pip install 'autogradlint[lsp]'`")  # type: ignore[arg-type]
    assert "autogradlint[lsp]" in console.export_text()


def test_a_finding_is_a_short_headline_then_its_help(project: Path) -> None:
    text = run("check", "--no-cache", "--color", "never", str(project)).stdout
    headline = next(line for line in text.splitlines() if "AGL101" in line and "bug.py" in line)
    message = headline.split("AGL101 [*] ", 1)[1]
    assert len(message) <= 100
    assert "   = help: `Square.backward` runs with grad mode off" in text
    concise = run("check", "--no-cache", "--output-format", "concise", str(project)).stdout
    (line, *summary) = concise.splitlines()
    assert "help" not in line and line.endswith(message)
    assert summary[0].startswith("Found 1 problem")
    (finding,) = json.loads(
        run("check", "--no-cache", "--output-format", "json", str(project)).stdout
    )
    assert finding["message"] == message and finding["help"].startswith("`Square.backward`")
