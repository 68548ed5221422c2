"""Family A held to torch (tests/oracle, known.md K1-K2): graph building in backward whose harm
torch shows but the linter did not name, each as bad code, the finding, and the fixed code."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner

from autogradlint import lint_source as lint_file
from autogradlint.cli import main

FAMILY_A = frozenset({"AGL101", "AGL102", "AGL103", "AGL104", "AGL105"})

RECOMPUTE = """\
    import torch


    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
{body}
            return gx
    """


def _lint(body: str) -> list[tuple[str, int, str]]:
    indented = textwrap.indent(textwrap.dedent(body), " " * 12)
    source = textwrap.dedent(RECOMPUTE.format(body=indented))
    result = lint_file(source.encode(), "cube.py", enabled=FAMILY_A)
    return sorted((f.rule_id, f.line, f.help or "") for f in result.findings)


def _found(body: str) -> list[tuple[str, int]]:
    return [(rule, line) for rule, line, _help in _lint(body)]


def test_a_grad_built_with_grad_mode_off_also_drops_second_order() -> None:
    """K2: training raises (AGL101); under create_graph=True backward runs with grad mode on, the
    call works and silently drops the second-order term (A3.2). AGL101's finding says so, so
    applying its fix does not leave that bug unnamed."""
    body = """\
        y = x**3
        (gx,) = torch.autograd.grad(y, x, g)
    """
    [(rule, line, help_text)] = _lint(body)
    assert (rule, line) == ("AGL101", 14)
    assert "drops the second-order term (AGL105)" in help_text
    assert "create_graph=torch.is_grad_enabled()" in help_text


def test_a_grad_with_create_graph_names_no_second_order_drop() -> None:
    """Where the call passes create_graph, only training's raise is named."""
    body = """\
        y = x**3
        (gx,) = torch.autograd.grad(y, x, g, create_graph=torch.is_grad_enabled())
    """
    [(rule, _line, help_text)] = _lint(body)
    assert rule == "AGL101"
    assert "AGL105" not in help_text


def test_the_first_order_fix_alone_leaves_second_order_dropped() -> None:
    body = """\
        with torch.enable_grad():
            y = x**3
            (gx,) = torch.autograd.grad(y, x, g)
    """
    assert _found(body) == [("AGL105", 15)]


def test_the_fixed_backward_keeps_second_order() -> None:
    body = """\
        create_graph = torch.is_grad_enabled()
        with torch.enable_grad():
            y = x**3
            (gx,) = torch.autograd.grad(y, x, g, create_graph=create_graph)
    """
    assert _found(body) == []


MIXIN = """\
import torch


class GradMixin:
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
{body}
        return gx
"""

FUNCTION = """\
import torch
from .mixins import GradMixin


class Cube(GradMixin, torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3
"""


def _project(root: Path, body: str, function: str = FUNCTION) -> list[tuple[str, str, int]]:
    (root / "pyproject.toml").write_text("")
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    indented = textwrap.indent(textwrap.dedent(body), " " * 8)
    (package / "mixins.py").write_text(MIXIN.format(body=indented.rstrip("\n")))
    (package / "ops.py").write_text(function)
    result = CliRunner().invoke(
        main, ["check", "--no-cache", "--output-format", "json", "--exit-zero", str(root)]
    )
    assert result.exit_code == 0, result.output
    return sorted(
        (Path(f["filename"]).name, f["code"], f["location"]["row"])
        for f in json.loads(result.stdout)
    )


RECOMPUTE_BACKWARD = """\
    xd = x.detach().requires_grad_()
    with torch.enable_grad():
        y = xd**3
        y.backward(g)
    gx = xd.grad
"""


def test_a_backward_inherited_from_a_mixin_of_another_module_is_checked(tmp_path: Path) -> None:
    """K1: `class Cube(GradMixin, Function)` runs GradMixin's backward, whichever module holds
    it: its `y.backward(g)` writes `.grad` of every leaf it reaches (AGL104), reported where
    the code is."""
    assert _project(tmp_path, RECOMPUTE_BACKWARD) == [("mixins.py", "AGL104", 11)]


def test_a_plain_class_no_function_derives_from_is_not_a_backward(tmp_path: Path) -> None:
    """The same class, mixed into nothing that is a Function: torch never runs it as one."""
    plain = FUNCTION.replace("GradMixin, torch.autograd.Function", "GradMixin")
    assert _project(tmp_path, RECOMPUTE_BACKWARD, plain) == []


def test_the_fixed_mixin_backward_builds_no_graph(tmp_path: Path) -> None:
    """The fix: the analytic gradient."""
    assert _project(tmp_path, "gx = g * 3 * x**2\n") == []
