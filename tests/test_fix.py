"""Fixes: exact expected output, idempotence, encodings and line endings, safe writes."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from autogradlint.cli import main
from autogradlint.fix.loop import FixOutcome, fix_text
from autogradlint.fix.write import WriteRefused, read_for_fix, write_fixed
from autogradlint.meta import all_rules
from autogradlint.runner import project_index

RULES = all_rules()
MARKER = re.compile(r"  # AGL\d{3}\b")
FIXED = [
    pytest.param(meta, example, id=f"{meta.id}-fixed-{i}")
    for meta in RULES.values()
    for i, example in enumerate(meta.invalid)
    if example.fixed
]
PAIRS = sorted((Path(__file__).parent / "fixes").glob("*.in.py"))

BUG = """\
import torch

class Square(torch.autograd.Function):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x * x  # \u00e9tape
        return torch.autograd.grad(y, x, g)[0]
"""
BUG_FIXED = """\
import torch

class Square(torch.autograd.Function):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            y = x * x  # \u00e9tape
            return torch.autograd.grad(y, x, g)[0]
"""


def fix_in_project(code: str, root: Path, **options: Any) -> FixOutcome:
    """`fix` of `code` as the one file of a project (what the CLI does for a file in its
    project): preconditions about the rest of the project are then proven, or not."""
    (root / "pyproject.toml").write_text("")
    path = root / "example.py"
    path.write_text(code)
    view = project_index([(path, code.encode())], [], root).view(str(path))
    return fix_text(code, str(path), project=view, **options)


@pytest.mark.parametrize(("meta", "example"), FIXED)
def test_yaml_fixed_example_is_produced_exactly_and_is_idempotent(
    meta, example, tmp_path: Path
) -> None:
    code = MARKER.sub("", example.code)
    unsafe = meta.fix == "unsafe"
    # A suppression is judged only when the rules it names ran: hygiene rules need them all.
    enabled = frozenset(RULES) if meta.family == "S" else frozenset({meta.id})
    outcome = fix_in_project(code, tmp_path, unsafe=unsafe, enabled=enabled)
    assert outcome.error is None
    assert outcome.source == example.fixed
    again = fix_in_project(outcome.source, tmp_path, unsafe=unsafe, enabled=enabled)
    assert again.source == outcome.source and not again.changed


@pytest.mark.parametrize("meta", [m for m in RULES.values() if m.fix == "unsafe"], ids=str)
def test_unsafe_fixes_need_the_flag(meta) -> None:
    code = MARKER.sub("", meta.invalid[0].code)
    outcome = fix_text(code, enabled=frozenset({meta.id}))
    assert not outcome.changed
    assert [f.rule_id for f in outcome.remaining] == [meta.id]


@pytest.mark.parametrize("source", PAIRS, ids=[p.name.split(".")[0] for p in PAIRS])
def test_multi_fix_files(source: Path) -> None:
    expected = source.with_name(source.name.replace(".in.py", ".out.py")).read_text()
    outcome = fix_text(source.read_text())
    assert outcome.error is None
    assert outcome.source == expected
    assert fix_text(expected).source == expected


def test_fix_never_returns_unparsable_code_and_leaves_input_on_error() -> None:
    outcome = fix_text(
        "from torch.autograd import Function\nclass F(Function):\n    def backward(:\n"
    )
    assert outcome.error is not None and "syntax error" in outcome.error
    assert (
        outcome.source
        == "from torch.autograd import Function\nclass F(Function):\n    def backward(:\n"
    )


@pytest.mark.parametrize(
    ("name", "encode"),
    [
        ("crlf", lambda text: text.replace("\n", "\r\n").encode("utf-8")),
        ("bom", lambda text: b"\xef\xbb\xbf" + text.encode("utf-8")),
        ("latin1", lambda text: ("# -*- coding: latin-1 -*-\n" + text).encode("latin-1")),
    ],
)
def test_apply_keeps_encoding_bom_and_line_endings(tmp_path: Path, name: str, encode) -> None:
    path = tmp_path / f"{name}.py"
    path.write_bytes(encode(BUG))
    path.chmod(0o640)
    result = CliRunner().invoke(main, ["fix", "--apply", str(path)])
    assert result.exit_code == 1, result.output  # AGL105 remains: its fix is unsafe
    assert path.read_bytes() == encode(BUG_FIXED)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".agl-tmp")]


def test_write_is_refused_when_the_file_changed_since_it_was_read(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(BUG)
    read = read_for_fix(path)
    path.write_text(BUG + "# edited meanwhile\n")
    with pytest.raises(WriteRefused, match="changed since it was read"):
        write_fixed(read, BUG_FIXED)
    assert path.read_text() == BUG + "# edited meanwhile\n"


def test_fix_without_apply_shows_a_diff_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(BUG)
    result = CliRunner().invoke(main, ["fix", str(path)])
    assert "+        with torch.enable_grad():" in result.output
    assert "Would fix 1 finding in 1 file (AGL101 x1)." in result.output
    assert path.read_text() == BUG


def test_fix_stdin_prints_fixed_source() -> None:
    result = CliRunner().invoke(main, ["fix", "-", "--stdin-filename", "m.py"], input=BUG)
    assert result.stdout == BUG_FIXED


def test_check_fix_alias_and_unsafe_tier(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(BUG)
    result = CliRunner().invoke(main, ["check", "--fix", "--unsafe-fixes", str(path)])
    assert result.exit_code == 0, result.output
    assert "create_graph=create_graph" in path.read_text()


def test_check_marks_fixable_findings(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(BUG)
    result = CliRunner().invoke(main, ["check", str(path)])
    assert "AGL101 [*]" in result.output
    assert "[*] 1 fixable with `autogradlint fix --apply`." in result.output


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write read-only directories")
def test_a_writable_file_in_an_unwritable_directory_is_fixed_in_place(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(BUG)
    tmp_path.chmod(0o500)
    try:
        result = CliRunner().invoke(main, ["fix", "--apply", str(path)])
    finally:
        tmp_path.chmod(0o700)
    assert result.exit_code == 1, result.output  # AGL105 remains
    assert path.read_text() == BUG_FIXED


def test_fix_sees_function_subclasses_defined_in_other_files(tmp_path: Path) -> None:
    (tmp_path / "base.py").write_text(
        "import torch\n\n\nclass RecomputeBase(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n"
    )
    child = tmp_path / "child.py"
    child.write_text(
        "from .base import RecomputeBase\n\n\nclass Child(RecomputeBase):\n"
        "    def backward(ctx, g):\n        return g * 2\n"
    )
    result = CliRunner().invoke(main, ["fix", "--apply", str(tmp_path)])
    assert "Fixed 1 finding in 1 file (AGL402 x1)." in result.output, result.output
    assert "    @staticmethod\n    def backward(ctx, g):" in child.read_text()
