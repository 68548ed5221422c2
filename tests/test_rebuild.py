"""The tree rebuilt from `ast` is libcst's tree, formatting aside, and never hides a finding.

`check` runs the checks on a libcst tree built from the `ast` the slicer already has
(speed/rebuild.py); libcst parses only the statements holding what a check reports or quotes
(speed/twins.py), or the whole slice when that cannot be done exactly. Two properties keep that
honest, on tricky snippets, on every example and fixture, and on every slice of the corpus and
torch when they are present:
- the rebuilt tree equals libcst's parse of the same lines, field by field (whitespace,
  comments, parentheses and commas aside: no check reads them);
- a file reports the same findings, messages and positions both ways (tests/test_speed_contract.py,
  against libcst's parse of the whole file).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
from pathlib import Path

import libcst as cst
import pytest

from autogradlint.analysis.walk import _TRIVIA_PREFIXES
from autogradlint.checks.admission import can_hold_findings
from autogradlint.engine.door import lint
from autogradlint.engine.request import LintRequest
from autogradlint.meta import all_rules
from autogradlint.source_io import decode
from autogradlint.speed.rebuild import Unsupported, rebuild_module
from autogradlint.speed.slicing import slice_source
from autogradlint.speed.twins import first_indent, first_line_end
from benchmarks.corpus import corpus_dir

# Layout-only fields besides the trivia the walker skips.
_LAYOUT = {"indent", "default_indent", "default_newline", "has_trailing_newline", "encoding"}


def differences(rebuilt: object, parsed: object, path: str = "module") -> str | None:
    """Where two trees differ in a field a check can read, or None."""
    if isinstance(rebuilt, (list, tuple)) and isinstance(parsed, (list, tuple)):
        if len(rebuilt) != len(parsed):
            return f"{path}: {len(rebuilt)} items, libcst has {len(parsed)}"
        for index, (mine, theirs) in enumerate(zip(rebuilt, parsed, strict=True)):
            found = differences(mine, theirs, f"{path}[{index}]")
            if found:
                return found
        return None
    if type(rebuilt) is not type(parsed):
        return f"{path}: {type(rebuilt).__name__}, libcst has {type(parsed).__name__}"
    if isinstance(rebuilt, cst.CSTNode):
        for field in dataclasses.fields(rebuilt):
            if field.name.startswith(_TRIVIA_PREFIXES) or field.name in _LAYOUT:
                continue
            found = differences(
                getattr(rebuilt, field.name), getattr(parsed, field.name), f"{path}.{field.name}"
            )
            if found:
                return found
        return None
    return None if rebuilt == parsed else f"{path}: {rebuilt!r}, libcst has {parsed!r}"


def _same_tree(code: str) -> None:
    rebuilt = rebuild_module(ast.parse(code), code, None)
    assert differences(rebuilt, cst.parse_module(code)) is None


SNIPPETS = {
    "elif_and_nested_else_if": "if a:\n    x = 1\nelif b:\n    x = 2\nelse:\n    if c:\n"
    "        x = 3\n",
    "suites_and_semicolons": "if a: x = 1; y = 2\nfor i in r: pass\nx = 1; y = 2\n"
    "def f(): return 1\nclass C: pass\n",
    "every_parameter_kind": "def f(a, /, b, c=1, *args, d, e=2, **kw) -> int:\n    pass\n"
    "def g(a, *, b): pass\nlambda x, *y, z=1, **k: x\n",
    "annotations": "def f(x: Optional[int] = None, *a: int, **k: 'str') -> None:\n"
    "    y: int = 1\n    z: float\n",
    "decorated_and_async": "@a.b(c)\n@d\nclass C(B, metaclass=M, **extra):\n"
    "    @staticmethod\n    async def f(x):\n        async with a as (b, c), d:\n"
    "            await x\n        async for i in y:\n            yield i\n",
    "subscripts": "x[a, b]\nx[(a, b)]\nx[(a), b]\nx[()]\nx[:, 0]\nx[::2]\nx[a::]\n"
    "x[1:2:3]\nx[:]\nx[..., None]\nx[lambda: 1:2]\nx[{1: 2}[1]::]\n",
    "strings": "s = 'a'\nt = b'x' rb'y'\nu = ('a'\n     \"b\")\nv = f'{x!r:>{w}}' 'z'\n"
    "w = '''doc\nstring'''\nz = 'é' + f\"{é}\"\n",
    "numbers_and_constants": "a = (1, 0x10, 1_000, 1.5, 1e-3, 2j, None, True, False, ...)\n"
    "b = -1\nc = not a\nd = ~a\n",
    "calls": "f(a, *b, c=1, **d)\nf(x=1, *rest)\nf(x for x in y)\nf(*a, *b)\n",
    "operators": "a = b + c * d ** e // f % g @ h | i & j ^ k << l >> m\n"
    "x = a and b and c or d\ny = a < b <= c is not d not in e\nz = a if b else c\n",
    "augmented": "a += 1\na -= 1\na *= 1\na /= 1\na //= 1\na %= 1\na **= 1\na @= 1\n"
    "a &= 1\na |= 1\na ^= 1\na <<= 1\na >>= 1\n",
    "collections": "a = [1, *b]\nc = {1, *d}\ne = {1: 2, **f}\ng = (1,)\nh = ()\n"
    "i = [x for x in y if x if z for w in x]\nj = {k: v for k, v in d}\n"
    "k = {x for x in y}\nl = (x async for x in y)\n",
    "statements": "del a\ndel a, b\nglobal g, h\nassert x, 'm'\nraise E from e\nraise\n"
    "return\nx = y = z\na, *b = c\n(n := 1)\nyield from g\n",
    "imports": "import a.b.c as d, e\nfrom . import x\nfrom ..p.q import (r as s, t)\n"
    "from m import *\n",
    "loops_and_try": "while a:\n    break\nelse:\n    continue\nfor i in x:\n    pass\n"
    "else:\n    pass\ntry:\n    pass\nexcept (A, B) as e:\n    pass\nexcept C:\n    pass\n"
    "except:\n    pass\nelse:\n    pass\nfinally:\n    pass\n",
    "non_ascii_columns": "x = 'ünïcode'; y = f(z)\ndef g(α='β', γ=\"δ\"):\n    return α\n",
}


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_rebuilt_tree_is_libcsts_tree(name: str) -> None:
    _same_tree(SNIPPETS[name])


def test_a_slice_keeps_what_libcst_is_given() -> None:
    """The statements of the slice only, as libcst parses the slice's lines."""
    text = (
        "import torch\nimport os\n\n\nclass Helper:\n    def unused(self):\n        return 1\n\n"
        "    def used(self, x):\n        return x * 2\n\n\nVALUE = 1\n\n\n"
        "class F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        return Helper().used(x)\n\n    @staticmethod\n    def backward(ctx, g):\n"
        "        return g\n"
    )
    sliced = slice_source(text)
    assert sliced is not None
    rebuilt = rebuild_module(sliced.tree, text, sliced.kept)
    assert differences(rebuilt, cst.parse_module(sliced.source)) is None
    assert "F" in [s.name.value for s in rebuilt.body if isinstance(s, cst.ClassDef)]
    assert len(rebuilt.body) < len(sliced.tree.body)  # the imports and VALUE were left out


def test_match_statements_are_left_to_libcst() -> None:
    code = (
        "import torch\n\nclass F(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        match x:\n            case _:\n"
        "                ctx.x = x\n        return x.view(-1)\n\n    @staticmethod\n"
        "    def backward(ctx, g):\n        return g * ctx.x\n"
    )
    with pytest.raises(Unsupported):
        rebuild_module(ast.parse(code), code, None)
    # libcst's parse takes over, and finds what it always found
    assert [f.rule_id for f in lint(LintRequest(code)).findings] == ["AGL403"]


def _corpus_files() -> list[Path]:
    trees = []
    corpus = corpus_dir()
    if (corpus / "src").is_dir():
        trees.append(corpus / "src")
    spec = importlib.util.find_spec("torch")  # its source, without importing it
    if spec is not None and spec.origin is not None:
        trees.append(Path(spec.origin).parent)
    if not trees:
        pytest.skip("neither the corpus (tests/corpus/fetch.sh) nor torch is present")
    rules = frozenset(all_rules())
    return [
        path
        for tree in trees
        for path in sorted(tree.rglob("*.py"))
        if path.is_file() and can_hold_findings(path.read_bytes(), rules)
    ]


@pytest.mark.corpus
def test_every_slice_of_the_corpus_rebuilds_as_libcst_parses_it() -> None:
    checked = 0
    problems: list[str] = []
    for path in _corpus_files():
        text = decode(path.read_bytes())
        if not isinstance(text, str):
            continue
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        try:
            sliced = slice_source(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        if sliced is None:
            continue
        try:
            rebuilt = rebuild_module(sliced.tree, text, sliced.kept)
        except Unsupported:
            continue
        checked += 1
        parsed = cst.parse_module(sliced.source)
        found = differences(rebuilt, parsed)
        if found:
            problems.append(f"{path}: {found}")
        # what twins.py infers for the whole file, as libcst infers it
        if (first_indent(sliced.source), first_line_end(sliced.source)) != (
            parsed.default_indent,
            parsed.default_newline,
        ):
            problems.append(f"{path}: indentation or line ending inferred otherwise")
    assert checked > 100
    assert problems == []
