"""`check --watch`: the report, then a new report after each change, through the incremental
linter the language server uses. Each test starts a real watch, edits a file once the first
report is out, and lets the watch stop after one more check (a hidden option for tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SQUARE_BUG

from autogradlint.cli import main

CLEAN = SQUARE_BUG.replace(
    "        y = x * x\n", "        with torch.enable_grad():\n            y = x * x\n"
).replace(
    "        return torch.autograd.grad(y, x, g)[0]",
    "            return torch.autograd.grad(y, x, g, create_graph=True)[0]",
)
WATCHING = "Watching for file changes."


def watch_then_edit(
    root: Path, named: str, edit: tuple[str, str], *options: str
) -> tuple[str, str, int]:
    """Start `check --watch` on `named`, wait for its first report, write `edit` (a path and
    its new text), and return what it printed before and after, and its exit status."""
    command = [
        sys.executable,
        "-m",
        "autogradlint",
        "check",
        "--no-cache",
        "--watch",
        "--watch-rounds",
        "1",
        "--watch-interval",
        "0.05",
        *options,
        named,
    ]
    with subprocess.Popen(
        command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        before = []
        for line in proc.stdout:
            before.append(line)
            if WATCHING in line:
                break
        (root / edit[0]).write_text(edit[1])
        try:
            after, errors = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:  # a watch that never saw the change
            proc.kill()
            raise
        assert "Traceback" not in errors, errors
    return "".join(before), after, proc.returncode


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.autogradlint]\n")
    return tmp_path


def test_an_edit_that_adds_a_bug_is_reported(project: Path) -> None:
    (project / "square.py").write_text(CLEAN)
    before, after, status = watch_then_edit(project, ".", ("square.py", SQUARE_BUG))
    assert "All checks passed!" in before
    assert "File change detected: checking again." in after
    assert "square.py:13:16: AGL101" in after
    assert after.rstrip().endswith(WATCHING)
    assert status == 1


def test_the_full_format_shows_the_fix_of_a_finding_an_edit_added(project: Path) -> None:
    (project / "square.py").write_text(CLEAN)
    _, after, _ = watch_then_edit(
        project, ".", ("square.py", SQUARE_BUG), "--output-format", "full"
    )
    assert "fix: wrap the recomputation in `with torch.enable_grad():`" in after
    assert "12 +         with torch.enable_grad():" in after


def test_a_change_in_another_file_of_the_project_checks_again_what_it_concerns(
    project: Path,
) -> None:
    """`sub.py` alone is named; whether its class is a Function is decided in `base.py`."""
    (project / "base.py").write_text("class Base:\n    pass\n")
    (project / "sub.py").write_text(
        SQUARE_BUG.replace("import torch\n", "import torch\nfrom base import Base\n").replace(
            "class Square(torch.autograd.Function):", "class Square(Base):"
        )
    )
    function = "import torch\n\nclass Base(torch.autograd.Function):\n    pass\n"
    before, after, status = watch_then_edit(project, "sub.py", ("base.py", function))
    assert "All checks passed!" in before
    assert "sub.py:14:16: AGL101" in after
    assert status == 1


def test_watch_refuses_what_writes_files(project: Path) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(main, ["check", "--watch", "--fix", str(project)])
    assert result.exit_code == 2
    assert "--watch cannot be combined with --fix" in result.stderr
