"""The command line, through click's runner and through a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SQUARE_BUG

from autogradlint.cli import main

BUG = SQUARE_BUG
CLEAN = "import torch\n\nx = torch.ones(3)\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bug.py").write_text(BUG)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    return tmp_path


def run(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args), input=input)


def test_text_output_has_location_code_frame_and_summary(tree: Path) -> None:
    result = run("check", str(tree / "pkg"))
    assert result.exit_code == 1
    assert f"{tree / 'pkg' / 'bug.py'}:13:16: AGL101" in result.output
    assert "^^^^^^^^^^^^^^^^^^^ AGL101" in result.output
    assert (
        "Found 1 problem (1 error, 0 warnings) in 1 file; 2 files checked: "
        "1 analysed, 1 without autograd code." in result.output
    )


def test_clean_tree_exits_zero(tree: Path) -> None:
    result = run("check", str(tree / "pkg" / "clean.py"))
    assert result.exit_code == 0
    assert "All checks passed!" in result.output


def test_json_uses_ruffs_keys(tree: Path) -> None:
    result = run("check", "--output-format", "json", str(tree / "pkg"))
    assert result.exit_code == 1
    (item,) = json.loads(result.output)
    assert {"code", "message", "filename", "location", "end_location", "fix", "url"} <= set(item)
    assert item["code"] == "AGL101" and item["severity"] == "error"
    assert item["location"] == {"row": 13, "column": 16}
    assert item["end_location"] == {"row": 13, "column": 35}


@pytest.mark.parametrize("selector", ["AGL101", "AGL1", "autograd-grad-without-enable-grad"])
def test_ignore_by_code_prefix_or_name(tree: Path, selector: str) -> None:
    assert run("check", "--ignore", selector, str(tree / "pkg")).exit_code == 0


def test_select_other_family_silences(tree: Path) -> None:
    assert run("check", "--select", "AGL2,AGL3", str(tree / "pkg")).exit_code == 0


def test_unknown_selector_is_a_usage_error(tree: Path) -> None:
    result = run("check", "--select", "AGL999", str(tree / "pkg"))
    assert result.exit_code == 2
    assert "unknown rule selector 'AGL999'" in result.output


def test_unparsable_file_is_reported_and_others_still_checked(tree: Path) -> None:
    (tree / "pkg" / "broken.py").write_text(
        "class F(torch.autograd.Function):\n    def backward(:\n"
    )
    result = run("check", str(tree / "pkg"))
    assert result.exit_code == 2
    assert "broken.py:2:" in result.output and "syntax error" in result.output
    assert "AGL101" in result.output


def test_missing_path_is_an_error(tree: Path) -> None:
    result = run("check", str(tree / "nope.py"), str(tree / "pkg"))
    assert result.exit_code == 2
    assert "nope.py: no such file or directory" in result.output
    assert "AGL101" in result.output


def test_config_select_ignore_per_file_and_exclude(tree: Path) -> None:
    (tree / "pyproject.toml").write_text(
        '[tool.autogradlint]\nper-file-ignores = { "pkg/bug.py" = ["AGL101"] }\n'
    )
    assert run("check", str(tree / "pkg")).exit_code == 0
    (tree / "pyproject.toml").write_text('[tool.autogradlint]\nexclude = ["bug.py"]\n')
    assert run("check", str(tree / "pkg")).exit_code == 0
    (tree / "pyproject.toml").write_text('[tool.autogradlint]\nignore = ["AGL1"]\n')
    assert run("check", str(tree / "pkg")).exit_code == 0


def test_unknown_config_key_is_a_clear_error(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.autogradlint]\nselct = ["AGL1"]\n')
    result = run("check", str(tree / "pkg"))
    assert result.exit_code == 2
    assert "pyproject.toml: unknown key(s) selct" in result.output


def test_yaml_config(tree: Path) -> None:
    (tree / ".autogradlint.yaml").write_text("ignore: [AGL101]\n")
    assert run("check", str(tree / "pkg")).exit_code == 0


def test_gitignored_files_are_skipped(tree: Path) -> None:
    (tree / ".git").mkdir()
    (tree / ".gitignore").write_text("bug.py\n")
    assert run("check", str(tree / "pkg")).exit_code == 0
    assert run("check", "--no-respect-gitignore", str(tree / "pkg")).exit_code == 1


def test_stdin_with_filename() -> None:
    result = run("check", "-", "--stdin-filename", "mod.py", input=BUG)
    assert result.exit_code == 1
    assert "mod.py:13:16: AGL101" in result.output


def test_rule_docs_and_listing() -> None:
    result = run("rule", "AGL201")
    assert result.exit_code == 0
    assert "# raw-grad-to-compiled-code (AGL201)" in result.output
    assert "output_grad.contiguous()" in result.output
    listing = run("rule", "--all")
    assert all(code in listing.output for code in ("AGL101", "AGL202", "AGL302"))
    assert run("rule", "AGL999").exit_code == 2


def test_real_subprocess_and_statistics(tree: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "autogradlint", "check", "--statistics", str(tree / "pkg")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    # ruff's --statistics: the table (count, code, fixable mark, name), no findings, then
    # the summary
    assert proc.stdout.splitlines() == [
        "1\tAGL101\t[*] autograd-grad-without-enable-grad",
        "Found 1 problem (1 error, 0 warnings) in 1 file; 2 files checked: "
        "1 analysed, 1 without autograd code.",
        "[*] 1 fixable with `autogradlint fix --apply`.",
    ]


def test_the_process_exits_at_once_with_everything_written(tree: Path) -> None:
    """The entry point skips the interpreter's teardown: the report is complete, the exit
    status is click's, an error message still reaches stderr, and a reader that stops early
    (`| head -1`) gets no traceback."""
    command = [sys.executable, "-m", "autogradlint", "check", "--output-format", "json"]
    proc = subprocess.run([*command, str(tree / "pkg")], capture_output=True, timeout=120)
    assert proc.returncode == 1 and len(json.loads(proc.stdout)) == 1
    bad = subprocess.run(
        [*command, "--select", "NOPE", str(tree)], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "unknown rule selector 'NOPE'" in bad.stderr
    for i in range(40):
        (tree / "pkg" / f"bug{i}.py").write_text(BUG)
    with subprocess.Popen(
        [*command[:-2], "--output-format", "text", str(tree / "pkg")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as head:
        assert head.stdout is not None and head.stderr is not None
        head.stdout.readline()
        head.stdout.close()
        assert head.wait(timeout=120) in (0, 1)
        assert b"Traceback" not in head.stderr.read()


def test_many_files_go_through_the_process_pool(tree: Path) -> None:
    for i in range(20):
        (tree / "pkg" / f"bug{i}.py").write_text(BUG)
    result = run("check", "-j", "2", "--output-format", "json", str(tree / "pkg"))
    assert len(json.loads(result.output)) == 21


def test_function_subclass_defined_across_files_is_recognised(tmp_path: Path) -> None:
    (tmp_path / "base.py").write_text(
        "import torch\n\n\nclass RecomputeBase(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(x)\n"
        "        return x * x\n"
    )
    (tmp_path / "child.py").write_text(
        "from .base import RecomputeBase\n\n\nclass Child(RecomputeBase):\n"
        "    def backward(ctx, g):\n        return g * 2\n"
    )
    result = run("check", "--output-format", "json", str(tmp_path))
    codes = {(Path(i["filename"]).name, i["code"]) for i in json.loads(result.output)}
    assert ("child.py", "AGL402") in codes


def test_a_command_collects_garbage_rarely() -> None:
    """A command's objects live until it exits: the console entry point tells the collector
    not to traverse them every 700 allocations (runtime/collector.py)."""
    script = (
        "import gc, os, sys\n"
        "from autogradlint.cli.app import run\n"
        "exit = os._exit\n"
        "os._exit = lambda code: (print(gc.get_threshold()), sys.stdout.flush(), exit(code))\n"
        "sys.argv = ['autogradlint', '--version']\n"
        "run()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "(100000, 50, 100)"
