"""The pre-commit hooks, run by the real pre-commit from a `.pre-commit-config.yaml` that points
at a snapshot of this checkout (what a user's configuration does with a published rev).

One snapshot, committed once per test session, is shared: pre-commit builds the hook's
environment once for it, and every test reuses it. They run only when asked for:
`python -m pytest -m network` or AUTOGRADLINT_NETWORK=1."""

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

# pre-commit installs the hook into a virtualenv from PyPI (~150 MB under the user cache)
pytestmark = pytest.mark.network  # downloads; also takes minutes


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This checkout as it is now (tracked and untracked, not ignored), committed: (path, rev)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    snapshot = tmp_path_factory.mktemp("hooks") / "autogradlint"
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, snapshot / name)
    _git(snapshot, "init", "-q")
    _git(snapshot, "add", ".")
    _git(
        snapshot, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "snapshot"
    )
    rev = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=snapshot, check=True, capture_output=True, text=True
    ).stdout.strip()
    return snapshot, rev


@pytest.fixture
def repo(tmp_path: Path, hooks_repo: tuple[Path, str]) -> Path:
    snapshot, rev = hooks_repo
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {snapshot}\n    rev: {rev}\n    hooks:\n"
        "      - id: autogradlint-check\n      - id: autogradlint-fix\n"
    )
    return repo


def _run_hook(repo: Path, hook: str, *files: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        # One pre-commit home for the session: it holds the hook's virtualenv.
        "PRE_COMMIT_HOME": str(Path.home() / ".cache" / "autogradlint-pre-commit"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", hook, "--files", *files],
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
    failing = _run_hook(repo, "autogradlint-check", "bug.py")
    assert failing.returncode != 0, failing.stdout + failing.stderr
    assert "AGL101" in failing.stdout
    passing = _run_hook(repo, "autogradlint-check", "clean.py")
    assert passing.returncode == 0, passing.stdout + passing.stderr


def test_exclude_applies_to_files_pre_commit_passes(repo: Path) -> None:
    (repo / "bug.py").write_text(BUG)
    (repo / "pyproject.toml").write_text('[tool.autogradlint]\nextend-exclude = ["bug.py"]\n')
    _git(repo, "add", ".")
    result = _run_hook(repo, "autogradlint-check", "bug.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_fix_hook_rewrites_the_file(repo: Path) -> None:
    (repo / "bug.py").write_text(BUG)
    _git(repo, "add", ".")
    result = _run_hook(repo, "autogradlint-fix", "bug.py")
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
    result = _run_hook(repo, "autogradlint-check", "src/mypkg/ops.py", "src/mypkg/model.py")
    assert result.returncode != 0
    assert "src/mypkg/ops.py:9:37: AGL201" in result.stdout, result.stdout
    assert "src/mypkg/model.py:5:12: AGL407" in result.stdout, result.stdout


def _readme_snippet() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## pre-commit", 1)[1]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_readme_revision_is_a_commit_of_this_repository() -> None:
    """No release is tagged: the README pins a full SHA, which must exist in the history."""
    import re

    rev = re.search(r"rev: (\S+)", _readme_snippet())
    assert rev is not None and re.fullmatch(r"[0-9a-f]{40}", rev.group(1)), "pin a commit SHA"
    inside = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True
    )
    if inside.returncode != 0 or inside.stdout.strip() == "true":
        pytest.skip("not a full git clone: the history cannot be searched")
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{rev.group(1)}^{{commit}}"], cwd=ROOT, check=False
    )
    assert known.returncode == 0, f"{rev.group(1)} is not a commit of this repository"
    for other in re.findall(r"@([0-9a-f]{40})", (ROOT / "README.md").read_text(encoding="utf-8")):
        assert other == rev.group(1), "every snippet pins the same commit"


def test_readme_snippet_installs_the_hook_and_blocks_a_buggy_commit(
    tmp_path: Path, hooks_repo: tuple[Path, str]
) -> None:
    """Exactly the README's snippet, with this checkout's snapshot as the repository and its
    commit as the revision: `pre-commit install`, then `git commit` of a buggy file fails."""
    import re

    snapshot, rev = hooks_repo
    config = _readme_snippet().replace("<url of this repository>", str(snapshot))
    config = re.sub(r"rev: \S+", f"rev: {rev}", config)
    repo = tmp_path / "user"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".pre-commit-config.yaml").write_text(config)
    env = {**os.environ, "PRE_COMMIT_HOME": str(Path.home() / ".cache" / "autogradlint-pre-commit")}
    installed = subprocess.run(
        [sys.executable, "-m", "pre_commit", "install"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    (repo / "bug.py").write_text(BUG)
    _git(repo, "add", ".")
    commit = subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-m", "bug"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert commit.returncode != 0, commit.stdout + commit.stderr
    assert "AGL101" in commit.stdout + commit.stderr
    head = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=repo, capture_output=True
    )
    assert head.returncode != 0, "the buggy commit was made"
