"""A workspace whose modules shadow the standard library (and the tool's own dependencies) is
linted, never imported: not by the language server an editor starts in it, nor by `check`,
`fix`, `fix --apply` or the pre-commit hook run from it.

Each shadowing module leaves a marker file when imported. Before the fix, the language server's
fork server started with `python -c`, whose `sys.path[0]` is the working directory: `types.py`
was executed twice and the worker died, so the document was never linted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import SQUARE_BUG
from lsp_wire import SCRIPT, Wire
from test_precommit import _git, hooks_repo, repo  # noqa: F401 - the hook's fixtures

# Standard modules imported by Python's start-up, multiprocessing, libcst, click, pygls...; and
# third-party names the tool imports (torch: it must not import it at all).
SHADOWS = (
    "types", "random", "copy", "json", "ast", "dataclasses", "re", "os", "enum", "typing",
    "functools", "contextlib", "warnings", "selectors", "socket", "signal", "struct", "pickle",
    "threading", "weakref", "inspect", "tempfile", "shutil", "logging", "asyncio", "uuid",
    "sitecustomize", "usercustomize", "libcst", "yaml", "click", "rich", "pygls", "lsprotocol",
    "attrs", "cattrs", "torch",
)  # fmt: skip
PACKAGES = ("collections", "importlib", "encodings", "multiprocessing", "concurrent")


def _marker_code(markers: Path, name: str) -> str:
    """Module code that leaves `markers/name` using builtins only (an import could recurse)."""
    return f"open({str(markers / name)!r}, 'a').close()\n"


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """(workspace, markers): the shadowing modules and packages, and a buggy Function."""
    workspace, markers = tmp_path / "ws", tmp_path / "markers"
    workspace.mkdir()
    markers.mkdir()
    for name in SHADOWS:
        (workspace / f"{name}.py").write_text(_marker_code(markers, name))
    for name in PACKAGES:
        (workspace / name).mkdir()
        (workspace / name / "__init__.py").write_text(_marker_code(markers, name))
    (workspace / "bug.py").write_text(SQUARE_BUG)
    return workspace, markers


def _executed(markers: Path) -> list[str]:
    return sorted(path.name for path in markers.iterdir())


def test_the_language_server_started_in_the_workspace_lints_and_runs_nothing(
    workspace: tuple[Path, Path],
) -> None:
    root, markers = workspace
    server = Wire(cwd=root)  # as an editor starts it: `autogradlint lsp`, in the workspace root
    try:
        server.initialize(root)
        uri = server.open(root / "bug.py", SQUARE_BUG)
        diagnostics = server.diagnostics(uri)
        context = {"diagnostics": diagnostics}  # the quick fixes and fix-all run in the worker
        span = diagnostics[0]["range"] if diagnostics else None
        actions = server.response(
            server.request(
                "textDocument/codeAction",
                {"textDocument": {"uri": uri}, "range": span, "context": context},
            )
        )
        server.response(server.request("shutdown"))
        server.notify("exit")
        assert server.exit_status() == 0
    finally:
        server.close()
    assert _executed(markers) == []
    assert [d["code"] for d in diagnostics] == ["AGL101"]
    titles = [action["title"] for action in actions["result"]]
    assert "autogradlint: fix all safe fixes" in titles, titles


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], cwd=root, capture_output=True, text=True, timeout=300
    )


def test_check_fix_and_apply_run_in_the_workspace_lint_and_run_nothing(
    workspace: tuple[Path, Path],
) -> None:
    root, markers = workspace
    check = _cli(root, "check", ".")
    fix = _cli(root, "fix", ".")
    apply = _cli(root, "fix", "--apply", ".")
    assert _executed(markers) == []
    assert check.returncode == 1 and "bug.py:13:16: AGL101" in check.stdout, check
    assert "+        with torch.enable_grad():" in fix.stdout, fix
    assert "Fixed 1 finding in 1 file (AGL101 x1)" in apply.stderr, apply
    assert "with torch.enable_grad():" in (root / "bug.py").read_text()


@pytest.mark.network  # pre-commit builds the hook's virtualenv from PyPI
def test_the_pre_commit_hook_lints_and_runs_nothing(
    workspace: tuple[Path, Path],
    repo: Path,  # noqa: F811 - the fixture imported above
) -> None:
    root, markers = workspace
    for path in root.iterdir():
        path.rename(repo / path.name)
    _git(repo, "add", ".")
    # pre-commit's own script: `python -m pre_commit` (as the other hook tests run it) would
    # import the workspace's `importlib` itself, before any hook starts.
    result = subprocess.run(
        [str(SCRIPT.with_name("pre-commit")), "run", "autogradlint-check", "--all-files"],
        cwd=repo,
        # test_precommit's home: the hook's virtualenv is built once a session.
        env={**os.environ, "PRE_COMMIT_HOME": str(Path.home() / ".cache/autogradlint-pre-commit")},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert _executed(markers) == []
    assert result.returncode != 0
    assert "bug.py:13:16: AGL101" in result.stdout, result.stdout + result.stderr
