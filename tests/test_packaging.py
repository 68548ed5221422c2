"""The wheel ships rules/ inside the package, and `autogradlint rule` works from it."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_contains_rules_and_rule_command_works(tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("autogradlint-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    rule_files = {Path(rules).name for rules in (ROOT / "rules").glob("AGL*.yaml")}
    assert {Path(n).name for n in names if n.startswith("autogradlint/_rules/")} == rule_files
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True,
        timeout=300,
    )
    # Run from an unrelated directory so the source checkout's rules/ cannot be found.
    proc = subprocess.run(
        [str(env_dir / "bin" / "autogradlint"), "rule", "AGL101"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "# autograd-grad-without-enable-grad (AGL101)" in proc.stdout
    # The rule's evidence comes from the packaged docs/semantics.md, not the checkout's.
    assert "autogradlint/_docs/semantics.md" in names
    assert "- A2.1: `torch.autograd.grad(h(x), x, g)`" in proc.stdout
    located = subprocess.run(
        [str(python), "-c", "import autogradlint.meta as m; print(m.rules_dir())"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "site-packages/autogradlint/_rules" in located.stdout
