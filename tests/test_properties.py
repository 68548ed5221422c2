"""Property tests: check never raises, fix always parses and is idempotent (hypothesis)."""

from __future__ import annotations

import ast
import re

import hypothesmith
import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autogradlint.engine.fix_loop import fix_text
from autogradlint.engine.pipeline import lint_source
from autogradlint.meta import all_rules

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _backward_statements() -> list[str]:
    """Statements of every backward body in the rules' examples: realistic fragments."""
    fragments: list[str] = []
    for meta in all_rules().values():
        codes = [e.code for e in meta.invalid] + list(meta.valid)
        for code in codes:
            tree = ast.parse(re.sub(r"  # AGL\d{3}.*", "", code))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name == "backward":
                    for stmt in node.body:
                        text = ast.unparse(stmt)
                        if "return" not in text:
                            fragments.append(text)
    return sorted(set(fragments))


FRAGMENTS = _backward_statements()


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


@st.composite
def autograd_functions(draw: st.DrawFn) -> str:
    body = draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6))
    wrap = draw(st.sampled_from(["", "with torch.enable_grad():", "with torch.no_grad():"]))
    inner = "\n".join(body)
    block = _indent(inner, 8) if not wrap else "        " + wrap + "\n" + _indent(inner, 12)
    return (
        "import torch\nimport fused_cuda\nfrom torch.utils.checkpoint import detach_variable\n\n\n"
        "class Generated(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(x)\n"
        "        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n"
        "        (x,) = ctx.saved_tensors\n"
        f"{block}\n"
        "        return g\n"
    )


def _fix_is_safe(source: str) -> None:
    first = fix_text(source, unsafe=True)
    if first.error is not None:
        assert first.source == source  # never returns something else on error
        assert "bug in autogradlint" not in first.error, first.error
        return
    cst.parse_module(first.source)  # always parses
    second = fix_text(first.source, unsafe=True)
    assert second.error is None and not second.changed, "a second fix changed the code"


@SETTINGS
@given(hypothesmith.from_grammar())
def test_check_never_raises_on_generated_modules(source: str) -> None:
    lint_source(source, "generated.py")
    # and again as if it held Function classes, so the prefilter lets it through to the parser
    lint_source(source + "\n\nclass F(torch.autograd.Function):\n    pass\n", "generated.py")


@SETTINGS
@given(autograd_functions())
def test_generated_functions_lint_and_fix_safely(source: str) -> None:
    result = lint_source(source, "generated.py")
    assert result.error is None, result.error
    _fix_is_safe(source)


@SETTINGS
@given(hypothesmith.from_grammar())
def test_fix_never_breaks_generated_modules(source: str) -> None:
    _fix_is_safe(source + "\n\nclass F(torch.autograd.Function):\n    pass\n")
