"""The tree walker's generated child listers give what reading every field gives: the nodes
that carry code, in field order, formatting left out."""

from __future__ import annotations

import dataclasses

import libcst as cst
import pytest
from conftest import ROOT

from autogradlint.analysis.walk import _TRIVIA_PREFIXES, FastVisitor, children

# Every kind of statement and expression libcst has a node for, including the fields that hold
# a sequence or a single node (`from m import *` against `from m import a, b`).
SAMPLE = """
from m import *
from . import a as b, c
import x.y as z
@decorator(1)
class C(Base, metaclass=M):
    x: int = 1
    async def f(self, a, /, b=2, *args, c, d=3, **kw) -> None:
        global g
        async with a as (b, c), d:
            async for i in aiter():
                yield i
        try:
            pass
        except* ValueError as e:
            raise RuntimeError() from e
        lambda q=1, *r: q
        return [i async for i in x if i], {k: v for k, v in y}, {*s}, (a := 2)
def g():
    nonlocal_ = 1
    match command:
        case [1, *rest] | {"k": v, **kw} if v:
            del a[1:2, ::3], b.c
        case Point(x=0) as p:
            assert p, f"{p!r:>{width}} {'q'}"
    while not a and b or c:
        x @= y ** -z
    else:
        print(*a, **b)
    if a is not b: pass
    elif a not in b: ...
    for i in range(3): continue
    with open(f) as h: break
    return t"x" if False else (yield from g())
"""


def _reference(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    for field in dataclasses.fields(node):
        if field.name.startswith(_TRIVIA_PREFIXES):
            continue
        value = getattr(node, field.name)
        if isinstance(value, (list, tuple)):
            out.extend(item for item in value if isinstance(item, cst.CSTNode))
        elif isinstance(value, cst.CSTNode):
            out.append(value)
    return out


def _modules() -> list[cst.Module]:
    sources = [SAMPLE.replace('t"x"', '"x"')]  # template strings are newer than libcst's grammar
    sources += [p.read_text() for p in sorted((ROOT / "examples").glob("*.py"))]
    sources += [p.read_text() for p in sorted((ROOT / "autogradlint" / "analysis").glob("*.py"))]
    return [cst.parse_module(s) for s in sources]


@pytest.mark.parametrize("module", _modules(), ids=lambda m: str(len(m.code)))
def test_children_are_every_code_field_in_order(module: cst.Module) -> None:
    kinds: set[type] = set()
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        listed = children(node)
        assert listed == _reference(node) and all(
            a is b for a, b in zip(listed, _reference(node), strict=True)
        ), type(node).__name__
        kinds.add(type(node))
        stack.extend(listed)
    assert cst.Name in kinds or "def " not in module.code
    assert not kinds & {cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline}


def test_a_visitor_sees_nodes_in_field_order_and_can_skip_children() -> None:
    seen: list[str] = []

    class Names(FastVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            seen.append(node.value)

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False  # its parameters and body stay unseen

    Names().walk(cst.parse_module("a = b(c, d=e) + (lambda f: g)(h)\n"))
    assert seen == ["a", "b", "c", "e", "d", "h"]  # an argument's value, then its keyword


def test_the_ast_walk_gives_what_ast_walk_gives_in_its_order() -> None:
    """text/ast_walk.walk stands in for `ast.walk` in the slicer and the summaries."""
    import ast

    from autogradlint.text.ast_walk import walk

    sources = [path.read_text() for path in (ROOT / "examples").rglob("*.py")]
    sources.append(
        "async def f(a, /, b=1, *c, d, **e) -> int:\n"
        "    match a:\n        case [1, *rest] | {'k': _}:\n            pass\n"
        "    x = [y async for y in z if (w := y)]\n    return f'{x!r:>{b}}' + (lambda: 0)()\n"
    )
    for source in sources:
        tree = ast.parse(source)
        assert [id(node) for node in walk(tree)] == [id(node) for node in ast.walk(tree)]
