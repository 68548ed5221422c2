"""The GitHub Action (action.yml), as a workflow runs it: each `run` step's command executed in
order with the inputs and outputs GitHub would give it, in a fresh virtualenv. Installing the
checkout downloads its build backend and dependencies, so this runs with `-m network`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import SQUARE_BUG

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

pytestmark = pytest.mark.network  # downloads; also takes minutes


def _value(expr: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    """The few expressions the action uses: inputs, github.*, steps.check.outputs, always()."""
    if expr.startswith("inputs."):
        return inputs[expr.removeprefix("inputs.")]
    if expr.startswith("steps.check.outputs."):
        return outputs.get(expr.removeprefix("steps.check.outputs."), "")
    return {
        "github.action_path": str(ROOT),
        "github.server_url": "https://github.com",
        "github.action_repository": "autogradlint/autogradlint",
    }[expr]


def _condition(text: str, inputs: dict[str, str], outputs: dict[str, str]) -> bool:
    expr = EXPRESSION.fullmatch(text.strip())
    assert expr is not None, text
    terms = [t.strip() for t in expr.group(1).split("&&")]
    for term in terms:
        if term == "always()":
            continue
        left, op, right = re.fullmatch(r"(\S+) (==|!=) '([^']*)'", term).groups()  # type: ignore[union-attr]
        if (_value(left, inputs, outputs) == right) != (op == "=="):
            return False
    return True


def _run_action(inputs: dict[str, str], workspace: Path, python_bin: Path) -> dict[str, object]:
    defaults = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()}
    inputs = {**defaults, **inputs}
    outputs: dict[str, str] = {}
    ran: list[str] = []
    status = 0
    for step in ACTION["runs"]["steps"]:
        if "if" in step and not _condition(step["if"], inputs, outputs):
            continue
        if "uses" in step:
            ran.append(step["uses"])
            continue
        out_file = workspace / ".github_output"
        out_file.write_text("")
        env = {
            **os.environ,
            "PATH": f"{python_bin}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_OUTPUT": str(out_file),
            **{
                k: EXPRESSION.sub(lambda m: _value(m.group(1), inputs, outputs), v)
                for k, v in step.get("env", {}).items()
            },
        }
        env.pop("VIRTUAL_ENV", None)
        proc = subprocess.run(
            ["bash", "-e", "-c", step["run"]],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        ran.append(step["name"])
        for line in out_file.read_text().splitlines():
            key, _, value = line.partition("=")
            outputs[key] = value
        if proc.returncode != 0:
            status = proc.returncode
            break
    return {"ran": ran, "outputs": outputs, "status": status}


@pytest.fixture(scope="module")
def action_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv as a runner's fresh Python has: nothing but pip."""
    where = tmp_path_factory.mktemp("action") / "venv"
    venv.create(where, with_pip=True)
    return where / "bin"


def test_action_reports_findings_as_sarif_uploads_and_fails(
    action_env: Path, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "square.py").write_text(SQUARE_BUG)
    result = _run_action({"paths": "src"}, tmp_path, action_env)
    assert result["outputs"]["exit-code"] == "1"
    assert result["status"] == 1  # the last step fails the job, after the upload
    assert result["ran"] == [
        "Install autogradlint",
        "Check",
        "github/codeql-action/upload-sarif@v3",
        "Fail on findings",
    ]
    sarif = json.loads((tmp_path / "autogradlint.sarif").read_text())
    schema = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.validate(sarif, schema)
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["AGL101"]


def test_action_passes_arguments_and_a_clean_tree(action_env: Path, tmp_path: Path) -> None:
    (tmp_path / "square.py").write_text(SQUARE_BUG)
    result = _run_action(
        {"args": "--ignore AGL101", "upload": "false", "sarif-file": "out.sarif"},
        tmp_path,
        action_env,
    )
    assert result["outputs"]["exit-code"] == "0"
    assert result["status"] == 0
    assert result["ran"] == ["Install autogradlint", "Check"]
    assert json.loads((tmp_path / "out.sarif").read_text())["runs"][0]["results"] == []


def test_every_input_is_used_and_documented() -> None:
    text = (ROOT / "action.yml").read_text()
    for name, spec in ACTION["inputs"].items():
        assert spec["description"], name
        assert f"inputs.{name}" in text, f"input {name} is never read"
    assert sys.version_info >= (3, 10)
