"""A real editor: headless Neovim with `autogradlint lsp` attached through its own LSP client
shows the diagnostics, the rule on hover, and applies a quick fix (editors/neovim)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SQUARE_BUG

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "editors" / "neovim" / "lsp_session.lua"


def test_neovim_shows_diagnostics_hover_and_applies_a_quick_fix(tmp_path: Path) -> None:
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.skip("Neovim is not installed (.ci/run installs Debian's neovim)")
    pytest.importorskip("pygls")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    bug = tmp_path / "square.py"
    bug.write_text(SQUARE_BUG)
    out = tmp_path / "seen.json"
    env = {
        **os.environ,
        "AGL_FILE": str(bug),
        "AGL_OUT": str(out),
        "AGL_CMD": "\t".join([sys.executable, "-m", "autogradlint", "lsp"]),
    }
    subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {SESSION}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=240,
        check=False,
    )
    seen = json.loads(out.read_text())
    assert "error" not in seen, seen
    assert [(d["code"], d["line"]) for d in seen["diagnostics"]] == [("AGL101", 12)]
    assert "AGL101" in seen["hover"] and "enable_grad" in seen["hover"]
    assert "with torch.enable_grad():" in seen["text"]
    assert not [d for d in seen["after"] if d["code"] == "AGL101"]
