"""The VS Code extension, as a user installs it: built into a .vsix with vsce from the npm
registry, its manifest checked, and the packaged code activated against a stub of the vscode
API. npm downloads its dependencies, so these run with `-m network` (CI runs them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editors" / "vscode"

pytestmark = pytest.mark.network  # downloads; also takes minutes


def _npm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["npm", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "npm_config_audit": "false", "npm_config_fund": "false"},
    )


@pytest.fixture(scope="module")
def vsix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extension packaged from a copy of editors/vscode (the checkout stays clean)."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed to build the VS Code extension")
    work = tmp_path_factory.mktemp("vscode") / "vscode"
    shutil.copytree(VSCODE, work, ignore=shutil.ignore_patterns("node_modules", "*.vsix"))
    installed = _npm("ci", cwd=work)
    assert installed.returncode == 0, installed.stderr
    packaged = _npm("run", "package", cwd=work)
    assert packaged.returncode == 0, packaged.stdout + packaged.stderr
    return work / "autogradlint.vsix"


def test_vsix_manifest_runs_the_language_server_for_python(vsix: Path) -> None:
    with zipfile.ZipFile(vsix) as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read("extension/package.json"))
    assert f"extension/{manifest['main'].removeprefix('./')}" in names
    assert "extension.vsixmanifest" in names
    # the language client ships inside: VS Code installs no dependencies of an extension
    assert any(n.startswith("extension/node_modules/vscode-languageclient/") for n in names)
    assert not any(n.startswith("extension/test/") for n in names)
    assert manifest["activationEvents"] == ["onLanguage:python"]
    settings = manifest["contributes"]["configuration"]["properties"]
    assert {"autogradlint.path", "autogradlint.args"} <= set(settings)
    assert settings["autogradlint.args"]["type"] == "array"


def test_packaged_extension_activates_against_a_stub_of_vscode(vsix: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(vsix) as archive:
        archive.extractall(tmp_path)
    run = subprocess.run(
        ["node", "--test", str(VSCODE / "test")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "EXTENSION_DIR": str(tmp_path / "extension")},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "# pass 4" in run.stdout
