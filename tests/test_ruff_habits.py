"""The habits a ruff user brings, each as ruff has it: `--statistics`, the `concise` and `full`
formats, `--show-fixes`, where each format names files, rule links, and one message per
problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from click.testing import CliRunner
from conftest import ROOT, SQUARE_BUG

from autogradlint.cli import main

EXAMPLES = ROOT / "examples"


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.autogradlint]\n")
    (tmp_path / "bug.py").write_text(SQUARE_BUG)
    return tmp_path


# --- --statistics ------------------------------------------------------------------------------
def test_a_rule_is_fixable_in_statistics_when_any_of_its_findings_is() -> None:
    """examples/ has 3 AGL201: 2 fixable (`[*]` in the text report), 1 not (a Triton launch)."""
    text = run("check", "--no-cache", "--statistics", str(EXAMPLES)).stdout
    assert "3\tAGL201\t[*] raw-grad-to-compiled-code" in text.splitlines()
    rows = json.loads(
        run("check", "--no-cache", "--statistics", "--output-format", "json", str(EXAMPLES)).stdout
    )
    (agl201,) = [row for row in rows if row["code"] == "AGL201"]
    assert agl201 == {
        "code": "AGL201",
        "name": "raw-grad-to-compiled-code",
        "count": 3,
        "fixable": True,
        "fixable_count": 2,
    }


def test_unsafe_fixes_count_as_fixable_with_unsafe_fixes() -> None:
    """AGL103's fix is unsafe: `[ ]`, and `[*]` once unsafe fixes are asked for (as ruff)."""
    target = str(EXAMPLES / "reentrant_bug.py")
    plain = run("check", "--no-cache", "--statistics", target).stdout
    unsafe = run("check", "--no-cache", "--statistics", "--unsafe-fixes", target).stdout
    assert "1\tAGL103\t[ ] backward-into-outer-graph" in plain.splitlines()
    assert "1\tAGL103\t[*] backward-into-outer-graph" in unsafe.splitlines()
    assert "(1 more with `--unsafe-fixes`)" in plain
    assert "[*] 2 fixable with `autogradlint fix --apply --unsafe-fixes`." in unsafe


# --- concise -----------------------------------------------------------------------------------
def test_concise_ends_with_the_summary_and_a_clean_run_says_so(project: Path) -> None:
    found = run("check", "--no-cache", "--output-format", "concise", str(project)).stdout
    assert found.splitlines()[1:] == [
        "Found 1 problem (1 error, 0 warnings) in 1 file; 1 file checked.",
        "[*] 1 fixable with `autogradlint fix --apply`.",
    ]
    (project / "bug.py").write_text("import torch\n")
    clean = run("check", "--no-cache", "--output-format", "concise", str(project))
    assert clean.exit_code == 0
    assert clean.stdout.startswith("All checks passed!")
    quiet = run("check", "--no-cache", "--output-format", "concise", "-q", str(project))
    assert quiet.stdout == ""


# --- full --------------------------------------------------------------------------------------
def test_full_is_rufffs_layout_with_the_fix_as_a_diff(project: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(project)
    result = run("check", "--no-cache", "--output-format", "full", "bug.py")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[:9] == [
        "AGL101 [*] `autograd.grad` of `y` raises in training: built with grad mode off",
        "  --> bug.py:13:16",
        "   |",
        "11 |         (x,) = ctx.saved_tensors",
        "12 |         y = x * x",
        "13 |         return torch.autograd.grad(y, x, g)[0]",
        "   |                ^^^^^^^^^^^^^^^^^^^",  # no code after the carets, as ruff
        "   |",
        "help: `Square.backward` runs with grad mode off in ordinary training and on only "
        'under create_graph=True, so `y` has no grad_fn and training raises "element 0 of '
        'tensors does not require grad and does not have a grad_fn". Build it and call '
        "`torch.autograd.grad` under `torch.enable_grad()`.",
    ]
    assert lines[9].startswith("fix: wrap the recomputation in `with torch.enable_grad():`")
    assert lines[10:17] == [
        "   |",
        "11 |         (x,) = ctx.saved_tensors",
        "   -         y = x * x",
        "   -         return torch.autograd.grad(y, x, g)[0]",
        "12 +         with torch.enable_grad():",
        "13 +             y = x * x",
        "14 +             return torch.autograd.grad(y, x, g)[0]",
    ]
    assert lines[-2:] == [
        "Found 1 problem (1 error, 0 warnings) in 1 file; 1 file checked.",
        "[*] 1 fixable with `autogradlint fix --apply`.",
    ]


def test_full_notes_an_unsafe_fix() -> None:
    text = run(
        "check", "--no-cache", "--output-format", "full", str(EXAMPLES / "reentrant_bug.py")
    ).stdout
    assert "fix: return gradients from `torch.autograd.grad`" in text
    assert "note: an unsafe fix: it changes what the code computes (`--unsafe-fixes`)" in text


# --- --show-fixes ------------------------------------------------------------------------------
def test_show_fixes_puts_each_fix_under_its_finding(project: Path) -> None:
    plain = run("check", "--no-cache", str(project)).stdout
    shown = run("check", "--no-cache", "--show-fixes", str(project)).stdout
    assert "   -         y = x * x" not in plain
    assert "   = fix: wrap the recomputation in `with torch.enable_grad():`" in shown
    assert "12 +         with torch.enable_grad():" in shown


def test_show_fixes_with_fix_lists_what_was_fixed(project: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(project)
    result = run("check", "--no-cache", "--fix", "--show-fixes", "bug.py")
    assert result.exit_code == 1  # AGL105 remains: its fix is unsafe
    assert result.stdout.startswith(
        "Fixed 1 finding:\n- bug.py:\n    1 × AGL101 (autograd-grad-without-enable-grad)\n"
    )
    assert "No safe fixes (1 unsafe fix with `--unsafe-fixes`)." in result.stdout
    # the unsafe fix's two edits, with the line between them elided
    assert "12 |         (x,) = ctx.saved_tensors\n   :\n14 |             y = x * x" in (
        run("check", "--no-cache", "--show-fixes", "bug.py").stdout
    )


# --- where each format names files ---------------------------------------------------------------
@pytest.fixture
def extension(tmp_path: Path) -> Path:
    """A project whose finding's help cites another file (the C++ in scale_ext.py)."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.autogradlint]\n")
    for name in ("extension_grads_bug.py", "scale_ext.py"):
        shutil.copy(EXAMPLES / name, project / name)
    return project


def test_text_names_files_relative_to_the_current_directory_help_included(
    extension: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(extension.parent)  # above the project
    text = run("check", "--no-cache", str(extension / "extension_grads_bug.py")).stdout
    assert "proj/extension_grads_bug.py:21:36: AGL201" in text
    assert "(proj/scale_ext.py:24)" in text
    concise = run(
        "check", "--no-cache", "--output-format", "concise", str(extension.resolve())
    ).stdout
    assert concise.startswith("proj/extension_grads_bug.py:21:36: AGL201")


def test_json_names_files_absolute_help_included(
    extension: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(extension)
    items = json.loads(run("check", "--no-cache", "--output-format", "json", ".").stdout)
    first = items[0]
    assert first["filename"] == str(extension.resolve() / "extension_grads_bug.py")
    assert f"({extension.resolve() / 'scale_ext.py'}:24)" in first["help"]


def test_sarif_uris_are_relative_to_the_current_directory(
    extension: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(extension.parent)
    document = json.loads(
        run("check", "--no-cache", "--output-format", "sarif", str(extension)).stdout
    )
    (sarif_run,) = document["runs"]
    assert sarif_run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == (
        extension.parent.resolve().as_uri() + "/"
    )
    result = sarif_run["results"][0]
    location = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "proj/extension_grads_bug.py", "uriBaseId": "%SRCROOT%"}
    assert "(proj/scale_ext.py:24)" in result["message"]["text"]


# --- rule links --------------------------------------------------------------------------------
def test_rule_links_are_the_rules_yaml_files(project: Path) -> None:
    (item,) = json.loads(run("check", "--no-cache", "--output-format", "json", str(project)).stdout)
    url = urlparse(item["url"])
    assert url.scheme == "file"
    assert Path(unquote(url.path)).name == "AGL101.yaml"
    assert "name: autograd-grad-without-enable-grad" in Path(unquote(url.path)).read_text()
    document = json.loads(
        run("check", "--no-cache", "--output-format", "sarif", str(project)).stdout
    )
    rules = document["runs"][0]["tool"]["driver"]["rules"]
    assert {rule["helpUri"] for rule in rules if rule["id"] == "AGL101"} == {item["url"]}
    assert "informationUri" not in document["runs"][0]["tool"]["driver"]


# --- one message per problem ---------------------------------------------------------------------
def test_fix_names_a_broken_file_once(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    (project / "bug.py").write_text(
        "import torch\nclass F(torch.autograd.Function):\n    def forward(ctx, x:\n"
    )
    result = run("fix", "bug.py")
    assert result.exit_code == 2
    assert result.stderr == "error: bug.py:3:16: syntax error: '(' was never closed\n"
