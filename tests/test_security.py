"""check, fix and the LSP never import or execute the code they analyse; interrupts lose nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner
from conftest import SQUARE_BUG

from autogradlint.cli import main

BUG = SQUARE_BUG


def _trap(marker: Path) -> str:
    """A module whose import, or any execution, creates `marker`."""
    return (
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('executed')\n"
        + BUG
        + "\nif __name__ == '__main__':\n"
        f"    pathlib.Path({str(marker)!r}).write_text('run as main')\n"
    )


def test_check_fix_and_lsp_never_execute_analysed_code(tmp_path: Path) -> None:
    marker = tmp_path / "EXECUTED"
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(_trap(marker))
    (package / "mod.py").write_text(_trap(marker))
    (package / "conftest.py").write_text(_trap(marker))
    (tmp_path / "pyproject.toml").write_text("[tool.autogradlint]\n")
    runner = CliRunner()
    assert runner.invoke(main, ["check", str(tmp_path)]).exit_code == 1
    assert runner.invoke(main, ["fix", "--apply", "--unsafe-fixes", str(tmp_path)]).exit_code in (
        0,
        1,
    )
    assert runner.invoke(main, ["check", "--output-format", "sarif", str(tmp_path)]).exit_code in (
        0,
        1,
    )
    from autogradlint.engine.pipeline import analyse

    analyse((package / "mod.py").read_text(), str(package / "mod.py"), full=True)
    assert not marker.exists()


def test_interrupted_fix_leaves_every_file_old_or_new(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(300):
        (tree / f"m{i:03}.py").write_text(BUG)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autogradlint", "fix", "--apply", str(tree)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert not [p for p in tree.iterdir() if not p.name.endswith(".py")], "temporary files left"
    fixed = 0
    for path in tree.iterdir():
        text = path.read_text()
        cst.parse_module(text)
        assert text == BUG or "with torch.enable_grad():" in text
        fixed += text != BUG
    print(f"\n{fixed} of 300 files fixed before SIGTERM")


def test_interrupted_check_leaves_no_partial_cache(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(300):
        (tree / f"m{i:03}.py").write_text(BUG + f"\n# {i}\n")
    cache = tmp_path / "cache"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autogradlint",
            "check",
            "-j",
            "1",
            "--cache-dir",
            str(cache),
            str(tree),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    if cache.exists():
        assert not list(cache.glob(".tmp-*"))
        for path in cache.glob("v*.json"):
            json.loads(path.read_text())


@pytest.mark.parametrize("loader", ["safe"])
def test_config_yaml_is_parsed_safely(tmp_path: Path, loader: str) -> None:
    marker = tmp_path / "YAML_EXECUTED"
    (tmp_path / ".autogradlint.yaml").write_text(
        f"select: !!python/object/apply:os.system ['touch {marker}']\n"
    )
    (tmp_path / "m.py").write_text(BUG)
    result = CliRunner().invoke(main, ["check", str(tmp_path)])
    assert result.exit_code == 2 and "invalid YAML" in result.output
    assert not marker.exists()
