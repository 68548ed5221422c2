"""AGL412 reads the helpers backward calls for names they may return unset. A helper whose
`ast` shows every returned name bound before any return (analysis/unbound.returns_bound) is
neither parsed with libcst nor walked path by path: the shortcut must say so only where the
walk finds nothing, here and on every module-level function of the corpus and torch."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest
from conftest import corpus_and_torch_trees

from autogradlint.analysis.parsing import parse_module
from autogradlint.analysis.unbound import returns_bound, unbound_reads
from autogradlint.text.ast_walk import parse_quietly


def _both(source: str) -> tuple[bool, list[str]]:
    """The shortcut's answer, and the names the libcst walk finds returned unset."""
    source = textwrap.dedent(source)
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    tree = parse_module(source).body[0]
    reads = unbound_reads(tree, returns_only=True)  # type: ignore[arg-type]
    return returns_bound(function), [read.name for read in reads]


@pytest.mark.parametrize(
    "source",
    [
        "def h(ctx, g):\n    return g * 2, ctx.scale\n",  # parameters only
        "def h(g):\n    out = g * 2\n    return out\n",  # bound first, on every path
        "def h(g):\n    out: int = 0\n    for v in g:\n        out += v\n    return out\n",
        "def h(g):\n    a, *rest = g\n    if a:\n        return a\n    return rest\n",
        "def h(g):\n    return torch.ops.aten.mul(g, SCALE)\n",  # module names: no local
        "def h(g):\n    return lambda y: y * g\n",  # the lambda's own parameter
    ],
)
def test_a_helper_whose_returns_are_bound_first_is_skipped(source: str) -> None:
    assert _both(source) == (True, [])


@pytest.mark.parametrize(
    ("source", "unset"),
    [
        # assigned under a test the return does not repeat
        ("def h(ctx, g):\n    if ctx.flag:\n        out = g\n    return out\n", ["out"]),
        # deleted after it was bound
        ("def h(g):\n    out = g\n    del out\n    return out\n", ["out"]),
        # `except E as out` unbinds `out` at the end of the handler
        (
            "def h(g):\n    out = g\n    try:\n        f()\n    except E as out:\n"
            "        pass\n    return out\n",
            ["out"],
        ),
        # bound only inside a loop that may not run
        ("def h(g):\n    while g:\n        out = g\n        g = g - 1\n    return out\n", ["out"]),
    ],
)
def test_a_helper_that_may_return_an_unset_name_is_walked(source: str, unset: list[str]) -> None:
    assert _both(source) == (False, unset)


def test_a_return_before_the_binding_is_walked() -> None:
    # bound on every path that reaches `return out`, but after a statement holding a return:
    # the shortcut does not follow paths, so the walk decides
    source = "def h(g):\n    if g is None:\n        return g\n    out = g\n    return out\n"
    assert _both(source) == (False, [])


@pytest.mark.corpus
def test_the_shortcut_holds_on_every_function_of_the_corpus_and_torch() -> None:
    skipped = 0
    for tree_root in corpus_and_torch_trees():
        for path in sorted(tree_root.rglob("*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            if "autograd" not in text or "backward" not in text:
                continue
            tree = parse_quietly(text)
            if tree is None:
                continue
            lines = text.splitlines(keepends=True)
            for function in tree.body:
                if not isinstance(function, ast.FunctionDef) or not returns_bound(function):
                    continue
                # as the check reads a helper: its lines from `def`
                source = textwrap.dedent("".join(lines[function.lineno - 1 : function.end_lineno]))
                try:
                    parsed = parse_module(source).body[0]
                except Exception:  # noqa: BLE001 - libcst raises bare exceptions on odd input
                    continue
                assert isinstance(parsed, cst.FunctionDef)
                assert not unbound_reads(parsed, returns_only=True), (path, function.name)
                skipped += 1
    assert skipped > 1000
