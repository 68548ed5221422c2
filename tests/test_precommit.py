"""The pre-commit hooks, through the real `pre-commit try-repo` on a temporary git repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SQUARE_BUG

ROOT = Path(__file__).resolve().parent.parent
BUG = SQUARE_BUG

pytestmark = pytest.mark.slow


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    return repo


def _try_repo(repo: Path, hook: str, *files: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        # Reuse one pre-commit home between runs: it holds the hook's virtualenv.
        "PRE_COMMIT_HOME": str(Path.home() / ".cache" / "autogradlint-pre-commit"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), hook, "--files", *files],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_check_hook_blocks_a_buggy_file_and_passes_a_clean_one(repo: Path) -> None:
    (repo / "bug.py").write_text(BUG)
    (repo / "clean.py").write_text("import torch\n\nx = torch.ones(3)\n")
    _git(repo, "add", ".")
    failing = _try_repo(repo, "autogradlint-check", "bug.py")
    assert failing.returncode != 0, failing.stdout + failing.stderr
    assert "AGL101" in failing.stdout
    passing = _try_repo(repo, "autogradlint-check", "clean.py")
    assert passing.returncode == 0, passing.stdout + passing.stderr


def test_exclude_applies_to_files_pre_commit_passes(repo: Path) -> None:
    (repo / "bug.py").write_text(BUG)
    (repo / "pyproject.toml").write_text('[tool.autogradlint]\nextend-exclude = ["bug.py"]\n')
    _git(repo, "add", ".")
    result = _try_repo(repo, "autogradlint-check", "bug.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_fix_hook_rewrites_the_file(repo: Path) -> None:
    (repo / "bug.py").write_text(BUG)
    _git(repo, "add", ".")
    result = _try_repo(repo, "autogradlint-fix", "bug.py")
    assert result.returncode != 0  # pre-commit fails a hook that modified files
    assert "with torch.enable_grad():" in (repo / "bug.py").read_text()


def test_the_hook_on_one_changed_file_sees_the_rest_of_the_project(repo: Path) -> None:
    """pre-commit passes only the changed files; the project view still covers the others."""
    from test_project_view import BASE, MODEL, OPS

    src = repo / "src" / "mypkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "base.py").write_text(BASE)
    (src / "ops.py").write_text(OPS)
    (src / "model.py").write_text(MODEL)
    _git(repo, "add", ".")
    result = _try_repo(repo, "autogradlint-check", "src/mypkg/ops.py", "src/mypkg/model.py")
    assert result.returncode != 0
    assert "src/mypkg/ops.py:9:37: AGL201" in result.stdout, result.stdout
    assert "src/mypkg/model.py:5:12: AGL407" in result.stdout, result.stdout
