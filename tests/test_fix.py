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
from autogradlint.engine.fix_loop import FixOutcome, fix_text
from autogradlint.engine.request import LintRequest
from autogradlint.fix.write import WriteRefused, read_for_fix, write_fixed
from autogradlint.meta import all_rules
from autogradlint.view import build_index

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


def fix_in_project(code: str, root: Path, unsafe: bool = False, **options: Any) -> FixOutcome:
    """`fix` of `code` as the one file of a project (what the CLI does for a file in its
    project): preconditions about the rest of the project are then proven, or not."""
    (root / "pyproject.toml").write_text("")
    path = root / "example.py"
    path.write_text(code)
    view = build_index(root, [path]).view(str(path))
    return fix_text(
        LintRequest(code, str(path), view=view, plan="unsafe" if unsafe else "safe", **options)
    )


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
    outcome = fix_text(LintRequest(code, enabled=frozenset({meta.id})))
    assert not outcome.changed
    assert [f.rule_id for f in outcome.remaining] == [meta.id]


@pytest.mark.parametrize("source", PAIRS, ids=[p.name.split(".")[0] for p in PAIRS])
def test_multi_fix_files(source: Path) -> None:
    expected = source.with_name(source.name.replace(".in.py", ".out.py")).read_text()
    outcome = fix_text(LintRequest(source.read_text()))
    assert outcome.error is None
    assert outcome.source == expected
    assert fix_text(LintRequest(expected)).source == expected


def test_fix_never_returns_unparsable_code_and_leaves_input_on_error() -> None:
    outcome = fix_text(
        LintRequest("from torch.autograd import Function\nclass F(Function):\n    def backward(:\n")
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


# --- preconditions of safe fixes (issue 34) ------------------------------------------------------
SAFE_FIXES = [m for m in RULES.values() if m.fix == "safe"]


@pytest.mark.parametrize("meta", SAFE_FIXES, ids=[m.id for m in SAFE_FIXES])
def test_each_safe_fix_states_the_preconditions_its_check_proves(meta) -> None:
    from autogradlint.preconditions import CHECKED, declared

    stated = declared(meta.id)
    assert stated, f"{meta.id}: a safe fix states its preconditions (`fix-preconditions`)"
    assert set(stated) == set(CHECKED[meta.id])
    for sentence in stated.values():
        claim, _, detail = sentence.partition(": ")
        assert claim and detail, "a short claim, then the details: the note quotes the claim"


SUPPRESSED = "import torch\n\nx = 1  {comment}\n"


@pytest.mark.parametrize(
    ("comment", "fixed"),
    [
        # was the codes `kept, on, purpose`: flake8 reads that as a bare noqa, a blanket
        ("# noqa: AGL201 kept on purpose", "# kept on purpose"),
        ("# noqa: AGL201, E501 kept on purpose", "# noqa: E501 kept on purpose"),
        ("# noqa: E501, AGL201 see issue 12", "# noqa: E501 see issue 12"),
    ],
)
def test_agl901_keeps_the_reason_after_the_codes_as_a_reason(comment: str, fixed: str) -> None:
    outcome = fix_text(LintRequest(SUPPRESSED.format(comment=comment), "m.py"))
    assert outcome.applied == ["AGL901"]
    assert outcome.source == SUPPRESSED.format(comment=fixed)


LAZY = """\
def build():
    import torch

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            y = x * x
            return torch.autograd.grad(y, x, g)[0]

    return Square
"""


def test_agl101_uses_the_torch_a_factory_imports_and_adds_no_module_import(
    tmp_path: Path,
) -> None:
    # was `import torch as _torch` at the top: the module no longer imported without torch
    outcome = fix_in_project(LAZY, tmp_path)
    assert outcome.applied == ["AGL101"]
    assert outcome.source == LAZY.replace(
        "            y = x * x\n            return torch.autograd.grad(y, x, g)[0]\n",
        "            with torch.enable_grad():\n                y = x * x\n"
        "                return torch.autograd.grad(y, x, g)[0]\n",
    )


@pytest.mark.parametrize(
    "lazy",
    [
        LAZY.replace("    import torch\n", "    if True:\n        import torch\n"),
        LAZY.replace(
            "            (x,) = ctx", "            import torch\n\n            (x,) = ctx"
        ),
    ],
    ids=["import under an if", "import inside backward"],
)
def test_agl101_is_unsafe_where_torch_would_need_a_new_module_import(
    lazy: str, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "lazy.py"
    path.write_text(lazy)
    assert not fix_in_project(lazy, tmp_path).changed
    from autogradlint.engine.door import lint
    from autogradlint.engine.request import LintRequest

    notes = [
        f.note
        for f in lint(LintRequest(lazy, str(path), fixes=True)).fixes
        if f.rule_id == "AGL101"
    ]
    assert notes and "a module-level `import torch` could make it fail to import" in notes[0]


def test_a_needed_torch_import_goes_after_the_first_unconditional_import_of_torch(
    tmp_path: Path,
) -> None:
    source = """\
import os

os.environ["OMP_NUM_THREADS"] = "1"
from torch.autograd import Function, grad


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x * x
        return grad(y, x, g)[0]
"""
    outcome = fix_in_project(source, tmp_path)
    assert outcome.applied == ["AGL101"]
    # was at the top, above the environment torch reads when it loads; below the import,
    # torch is loaded already, so the new line changes nothing about importing the module
    assert outcome.source.startswith(
        'import os\n\nos.environ["OMP_NUM_THREADS"] = "1"\n'
        "from torch.autograd import Function, grad\nimport torch\n"
    )


def test_an_unsafe_fix_says_in_the_help_which_precondition_failed(tmp_path: Path) -> None:
    source = """\
import torch


def fallback(fn):
    def wrapper(ctx, *args):
        try:
            return fn(ctx, *args)
        except RuntimeError:
            return args[0]

    return wrapper


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @fallback
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x * x
        return torch.autograd.grad(y, x, g)[0]
"""
    outcome = fix_in_project(source, tmp_path)
    assert not outcome.changed
    (finding,) = [f for f in outcome.remaining if f.rule_id == "AGL101"]
    assert finding.fixable == "unsafe"
    assert "The fix is offered only as unsafe: not proven that nothing catches" in finding.help
    assert "`@fallback`" in finding.help


def test_agl402_without_the_project_is_not_proven_free_of_instances() -> None:
    # a file fixed on its own says nothing of the files that may instantiate the class
    source = "import torch\n\n\nclass Scale(torch.autograd.Function):\n    def forward(ctx, x):\n        return x * 2\n"
    outcome = fix_text(LintRequest(source, "m.py", enabled=frozenset({"AGL402"})))
    assert not outcome.changed
    assert [f.fixable for f in outcome.remaining] == ["unsafe"]


def test_fix_leaves_a_plain_forward_alone_when_another_file_makes_an_instance(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "ops.py").write_text(
        "import torch\n\n\nclass Scale(torch.autograd.Function):\n"
        "    def forward(ctx, x, s):\n        return x * s\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        return g, None\n"
    )
    # made static, `helper.forward(t, 3.0)` would get `t` as ctx and return the float 3.0 * ...
    (tmp_path / "use.py").write_text(
        "from ops import Scale\n\n\ndef scaled(t):\n    helper = Scale()\n"
        "    return helper.forward(t, 3.0)\n"
    )
    result = CliRunner().invoke(main, ["fix", "--apply", str(tmp_path)])
    assert "1 finding remains" in result.output, result.output
    assert "@staticmethod\n    def forward" not in (tmp_path / "ops.py").read_text()


TRITON = """\
import torch
import triton
import triton.language as tl


@triton.jit
def double_kernel(g_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    g = tl.load(g_ptr + offsets, mask=offsets < n)
    tl.store(out_ptr + offsets, g * 2, mask=offsets < n)


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        out = torch.empty_like(g)
        double_kernel[(triton.cdiv(g.numel(), 1024),)](g, out, g.numel(), BLOCK=1024)
        return out
"""


def test_agl201_contiguous_is_safe_for_a_triton_kernel_only_while_it_does_not_store_into_g(
    tmp_path: Path,
) -> None:
    reads = fix_in_project(TRITON, tmp_path, enabled=frozenset({"AGL201"}))
    assert "double_kernel[(triton.cdiv(g.numel(), 1024),)](g.contiguous(), out" in reads.source
    # `.contiguous()` copies only a non-contiguous gradient: a store would reach it sometimes
    source = TRITON.replace(
        "    tl.store(out_ptr + offsets, g * 2, mask=offsets < n)\n",
        "    tl.store(out_ptr + offsets, g * 2, mask=offsets < n)\n"
        "    tl.store(g_ptr + offsets, g * 0, mask=offsets < n)\n",
    )
    stores = fix_in_project(source, tmp_path, enabled=frozenset({"AGL201", "AGL202"}))
    # a store into g is AGL202's: its fix is a private dense copy, never `.contiguous()`
    assert "(g.contiguous(), out" not in stores.source
    assert "g = g.clone(memory_format=torch.contiguous_format)" in stores.source
    assert not stores.remaining
