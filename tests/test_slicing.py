"""The slicer reads less than the file but must find exactly what the whole file holds.

Each case is linted twice: sliced (what `check` does) and whole (what `fix` and the editor do);
the findings, with their positions, must be the same, and equal the `# AGLxxx` markers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from conftest import ROOT, expected_findings

from autogradlint.analysis.walk import children
from autogradlint.engine.pipeline import analyse, locate
from autogradlint.speed.positions import _whole_module, node_positions
from autogradlint.speed.preselect import kept_ranges
from autogradlint.speed.slicing import slice_source
from autogradlint.text.statements import chunk_starts, comments

FUNCTION = """\
class {name}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.weight = weight  # AGL403
        ctx.save_for_backward(x)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g @ ctx.weight, g.t() @ x
"""

CASES = {
    # A Function nested in a long function: the slice drops the lines around it, and
    # positions inside must still be those of the file (they were once 73 lines off).
    "nested_in_long_def": "import torch\n\n\ndef build():\n"
    + "".join(f"    value_{i} = {i}\n" for i in range(80))
    + "\n".join("    " + line if line else "" for line in FUNCTION.format(name="F").splitlines())
    + "\n    return F\n",
    # A form feed is whitespace to Python, a line break to str.splitlines.
    "form_feed": "import torch\n\x0c\n" + FUNCTION.format(name="F"),
    # Example code in a docstring, at column 0, is text, not a class.
    "docstring_example": 'import torch\n\nDOC = """\n'
    + FUNCTION.format(name="InDoc").replace("  # AGL403", "")
    + '"""\n\n'
    + FUNCTION.format(name="Real"),
    # A column-0 line inside brackets splits a statement where the scan cuts: ast rejects
    # the cut and the whole file is parsed instead.
    "column_0_in_brackets": "import torch\nx = dict(\na=1)\n" + FUNCTION.format(name="F"),
    # Only some clauses of an if/try matter; the others keep their smallest statement.
    "if_try_clauses": "import torch\ntry:\n    import triton\n    def big():\n"
    + "".join(f"        v{i} = {i}\n" for i in range(30))
    + "except ImportError:\n    triton = None\n\nif triton is None:\n"
    + "\n".join("    " + line if line else "" for line in FUNCTION.format(name="F").splitlines())
    + "\nelse:\n    HAS = True\n",
    # Imports local to an unrelated function bind nothing; those around a Function do.
    "scoped_imports": """\
import torch


def unrelated():
    from somewhere import grad


class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        from torch.autograd import grad
        (x,) = ctx.saved_tensors
        return grad(x * x, x, g)[0]  # AGL101
""",
    "crlf": (FUNCTION.format(name="F")).replace("\n", "\r\n").join(["import torch\r\n", ""]),
    "tabs_and_semicolons": "import torch\n\nclass F(torch.autograd.Function):\n"
    "\t@staticmethod\n\tdef forward(ctx, x, w):\n\t\ty = 1; ctx.w = w  # AGL403\n\t\treturn x @ w.t()\n\n"
    "\t@staticmethod\n\tdef backward(ctx, g):\n\t\treturn g @ ctx.w, None\n",
    "helper_class": """\
import torch


class Helpers:
    \"\"\"Only the static helper a Function calls is read.\"\"\"

    unrelated = 1

    @staticmethod
    def scale(t):
        t.mul_(2)  # AGL405
        return t

    def other(self):
        return 3


class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return Helpers.scale(x)

    @staticmethod
    def backward(ctx, g):
        return g
""",
    # An is_grad_enabled() test says grad mode is off after it only in the function that calls
    # Fn.forward directly (AGL407 reads it); a test elsewhere in the file is not kept (unsloth
    # fp8.py: the whole-file selection once kept every test of the file, the text scan one).
    "grad_mode_test_elsewhere": """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def unrelated(x):
    if torch.is_grad_enabled():
        x = x + 1
    return x


def fast_path(x):
    if torch.is_grad_enabled():
        return Fn.apply(x)
    return Fn.forward(None, x)
""",
    # `*EXTRA` counts only when EXTRA is bound once in the file: the slice keeps neither the
    # constant nor the `global` that rebinds it, so both are read from the whole text.
    "apply_unpacking_a_constant": """\
import torch

EXTRA = (1.0,)
WIDE = [1.0, 2.0]


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale=1.0):
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g, None


def model(x):
    return Fn.apply(x, *EXTRA) + Fn.apply(x, *WIDE)  # AGL410


def wide(x):
    return Fn.apply(*(x, 2.0, 3.0))  # AGL410


def rebinds():
    global EXTRA
    EXTRA = (1.0, 2.0)
""",
}


# Large statements that merely hold something of interest are split further; what reaches
# libcst must still be what the whole-file selection picks.
_FILLER = "".join(f"    def method_{i}(self):\n        return {i}\n\n" for i in range(200))
CASES["big_hook_class"] = (
    "import torch\n\n\nclass Wrapper(torch.Tensor):\n    # a comment under the header\n"
    "    @property\n    def first(self):\n        return 1\n\n"
    + _FILLER
    + "    def __torch_function__(self, func, types, args=(), kwargs=None):  # AGL303\n"
    + "        return super().__torch_function__(func, types, args, kwargs or {})\n"
)
CASES["big_if_block"] = (
    "import torch\n\nif torch.cuda.is_available():\n"
    + "\n".join("    " + line if line else "" for line in FUNCTION.format(name="F").splitlines())
    + "\n\n    class Big:\n"
    + "\n".join("    " + line if line else "" for line in _FILLER.splitlines())
    + "\nelse:\n    # the slower path\n    F = None\n"
)
CASES["big_test_class"] = (
    "import torch\n\n\nclass TestThing:\n"
    + _FILLER
    + "    def test_nested(self):\n        from torch.autograd import grad\n\n"
    + "\n".join(
        "        " + line if line else "" for line in FUNCTION.format(name="F").splitlines()
    )
    + "\n        return F\n"
)

# A test class that holds a Function naming the class (`TestGrad.helper`), docstrings that
# show `import` and a Function in an example, and a long def whose only marks are in its
# docstring: what the text scan keeps is the nested Function and its headers, no more.
_LONG_BODY = "".join(f"    value_{i} = {i}\n" for i in range(400))
CASES["test_class_naming_itself"] = (
    'import torch\n\n\nclass TestGrad:\n    """Run as:\n\n        import torch\n    """\n\n'
    + _FILLER
    + "    @staticmethod\n    def helper(x):\n        return x\n\n"
    + "    def test_nested(self):\n"
    + "        class F(torch.autograd.Function):\n"
    + "            @staticmethod\n            def forward(ctx, x):\n"
    + "                return TestGrad.helper(x)\n\n"
    + "            @staticmethod\n            def backward(ctx, g):\n                return g\n\n"
    + "        return F\n\n\n"
    + 'def documented():\n    """For example:\n\n    from torch import autograd\n\n'
    + '    class Example(torch.autograd.Function):\n        pass\n    """\n'
    + _LONG_BODY
)

# `tl.load(` in a Triton kernel and `np.load(` resolve, through the module's imports, to no
# configured loader: the kernel is not parsed for them. `load(` from cpp_extension is one.
_KERNEL_BODY = "".join(
    f"    # load (lazily), as aten.to_copy would\n    v{i} = tl.load(ptr + {i})\n"
    for i in range(200)
)
CASES["triton_loads_are_not_loaders"] = (
    "import numpy as np\nimport torch\nimport triton\nimport triton.language as tl\n"
    "from torch.utils.cpp_extension import load\n\n"
    "ext = load(name='ext', sources=['ext.cpp'])\nweights = np.load('w.npy')\n\n\n"
    "@triton.jit\ndef kernel(ptr):\n" + _KERNEL_BODY + "\n\n" + FUNCTION.format(name="F")
)

# A backward calling its op through a factory of the file handed `f"{cls.base}_bwd"`: the slice
# leaves the factory out, and the op is still named from the class (its C++ is not here).
CASES["op_through_a_factory"] = (
    "import torch\n\n\ndef _make_lazy(name):\n    def call(*args, **kwargs):\n"
    "        return getattr(torch.ops.myops, name)(*args, **kwargs)\n\n    return call\n\n\n"
    "def _register(register):\n    torch.library.register_autograd(\n"
    '        f"myops::{register.base}", register.backward, setup_context=register.setup_context\n'
    "    )\n\n\ndef _ensure():\n    _register(Hooks)\n\n\nclass Hooks:\n"
    '    base = "scale"\n\n    @staticmethod\n    def setup_context(ctx, inputs, output):\n'
    "        ctx.save_for_backward(inputs[0])\n\n    @classmethod\n"
    "    def backward(cls, ctx, v_out):\n        (x,) = ctx.saved_tensors\n"
    '        return _make_lazy(f"{cls.base}_bwd")(\n            x,\n'
    "            v_out,  # AGL201\n        )\n"
)


def _findings(source: str, *, full: bool) -> list[tuple[str, int, int]]:
    result = analyse(source, "case.py", full=full)
    assert result.error is None, result.error
    assert result.module is not None and result.text is not None
    located = locate(result.module, result.text, result.violations, "case.py", result.layout)
    return sorted((f.rule_id, f.line, f.col) for f, _ in located)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_reports_its_markers(name: str) -> None:
    """Sliced and whole file agree on every case (tests/test_speed_contract.py); here each case
    reports what its `# AGLxxx` markers say."""
    sliced = _findings(CASES[name], full=False)
    assert [(rule, line) for rule, line, _ in sliced] == _markers(CASES[name])


def _markers(source: str) -> list[tuple[str, int]]:
    """`# AGLxxx` markers, numbering lines as Python does (not str.splitlines: form feeds)."""
    return sorted(
        (rule, number)
        for number, line in enumerate(source.replace("\r\n", "\n").split("\n"), start=1)
        for rule, _ in expected_findings(line)
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_slice_is_what_the_whole_file_selects(name: str) -> None:
    """Pre-slicing from the text (for speed) hands libcst exactly the lines that selecting
    from the whole file's `ast` would."""
    sliced = slice_source(CASES[name])
    whole = slice_source(CASES[name], whole=True)
    assert sliced is not None and whole is not None
    assert (sliced.source, sliced.line_map) == (whole.source, whole.line_map)
    assert sliced.imports == whole.imports


def test_the_slice_is_small() -> None:
    """The nested case keeps the Function and its def's header, not the 80 other lines."""
    sliced = slice_source(CASES["nested_in_long_def"])
    assert sliced is not None
    assert "value_" not in sliced.source
    assert "class F(torch.autograd.Function)" in sliced.source
    for name in ("big_hook_class", "big_if_block", "big_test_class"):
        big = slice_source(CASES[name])
        assert big is not None and "method_7" not in big.source, name
    text = CASES["test_class_naming_itself"]
    ranges = kept_ranges(text, chunk_starts(text), frozenset())
    assert ranges is not None
    visible = "".join(text[start:end] for start, end in ranges)
    assert "class F(torch.autograd.Function)" in visible
    for dropped in ("method_7", "Run as", "def documented", "value_1"):
        assert dropped not in visible, dropped
    text = CASES["triton_loads_are_not_loaders"]
    ranges = kept_ranges(text, chunk_starts(text), frozenset())
    assert ranges is not None
    visible = "".join(text[start:end] for start, end in ranges)
    assert "ext = load(" in visible
    assert "tl.load" not in visible and "np.load" not in visible and "lazily" not in visible
    helper = slice_source(CASES["helper_class"])
    assert helper is not None
    assert "def scale" in helper.source
    assert "def other" not in helper.source and "unrelated = 1" not in helper.source


def test_loaders_must_resolve_to_a_configured_loader() -> None:
    source = (
        "import torch\nimport triton.language as tl\n"
        "from torch.utils.cpp_extension import load\n\n"
        "def kernel(p):\n    x = tl.load(p)\n    y = torch.load(p)\n\n"
        "ext = load(name='e', sources=['e.cpp'])\n\n" + FUNCTION.format(name="F")
    )
    sliced = slice_source(source)
    assert sliced is not None
    assert "ext = load(" in sliced.source
    assert "tl.load" not in sliced.source and "torch.load" not in sliced.source
    custom = slice_source(
        source.replace("ext = load(", "ext = build_ext("), loaders=("mypkg.build_ext",)
    )
    assert custom is not None and "ext = build_ext(" in custom.source


def test_chunks_never_start_inside_strings() -> None:
    text = CASES["docstring_example"]
    starts = chunk_starts(text)
    lines = {text.count("\n", 0, offset) + 1 for offset in starts}
    tree = ast.parse(text)
    assert lines == {1} | {node.lineno for node in tree.body}
    text = "x = 1\n"
    assert kept_ranges(text, chunk_starts(text), frozenset()) is None  # nothing to parse


def test_chunks_keep_decorators_and_clauses_with_their_statement() -> None:
    text = (
        "@a\n@b(\n  1)\ndef f():\n    pass\nif x:\n    pass\nelif y:\n    pass\nelse:\n    pass\n"
    )
    text += "try:\n    pass\nexcept E:\n    pass\nfinally:\n    pass\ny = 1 + \\\n2\n"
    starts = chunk_starts(text)
    assert [text.count("\n", 0, offset) + 1 for offset in starts] == [1, 6, 12, 18]


def test_comments_skip_strings_and_count_lines_like_python() -> None:
    text = 's = "# not a comment"\r\nt = """\n# nor this\n"""  # but this\n\x0c# and this\n'
    found = [(c.line, c.column, c.text, c.alone) for c in comments(text)]
    assert found == [(4, 5, "# but this", False), (5, 1, "# and this", True)]


POSITION_SOURCES = [
    ROOT / "tests" / "fixtures" / name
    for name in (
        "family_a_realistic.py",
        "family_b_realistic.py",
        "family_c_realistic.py",
        "family_d_realistic.py",
    )
] + sorted(p for p in (ROOT / "examples").glob("*.py") if p.name != "scale_ext.py")

TRICKY = """\
import torch

class F(torch.autograd.Function):
\t@staticmethod
\tdef forward(ctx, x): y = 1; z = torch.relu(
\t\t\tx); return z

\t@staticmethod
\tdef backward(ctx, g):
\t\tif g is None: return None
\t\telif g.dim() == 0:
\t\t\treturn g
\t\telse:
\t\t\ts = '''a
b'''; return g.mul(
  2)

\t@staticmethod
\tdef jvp(ctx, t): s = "é ü"; return torch.relu(t)
"""


@pytest.mark.parametrize("full", [False, True], ids=["sliced", "whole"])
@pytest.mark.parametrize(
    "source",
    [*POSITION_SOURCES, "tricky"],
    ids=[p.name for p in POSITION_SOURCES] + ["tricky"],
)
def test_positions_of_every_node_match_a_whole_module_pass(source: Path | str, full: bool) -> None:
    """Placing a node by generating only its innermost statement (in a block indented like the
    original) gives exactly what libcst's PositionProvider gives on the whole module."""
    text = TRICKY if source == "tricky" else Path(source).read_text()
    result = analyse(text, "case.py", full=full)
    assert result.module is not None and result.text is not None
    nodes: list[cst.CSTNode] = []

    def visit(node: cst.CSTNode) -> None:
        nodes.append(node)
        for child in children(node):
            visit(child)

    for statement in result.module.body:
        visit(statement)
    fast = node_positions(result.module, nodes, result.layout, result.text)
    whole = _whole_module(result.module, {id(n): n for n in nodes}, result.layout.line_map)
    assert len(nodes) > 20
    assert {k: fast[k] for k in whole} == whole


def test_a_custom_op_registration_keeps_its_functions_and_nothing_else() -> None:
    """`register_autograd(...)` at module level keeps the functions it names and the op's own
    def (by receiver or `"ns::op"` string); unrelated code is left out, and the text scan keeps
    what `ast` keeps."""

    text = (
        "import torch\n\n"
        "def unrelated(x):\n    return x + 1\n\n"
        '@torch.library.custom_op("mylib::mul", mutates_args=())\n'
        "def mul(x: torch.Tensor, s: float) -> torch.Tensor:\n    return x * s\n\n"
        "def _backward(ctx, grad):\n    return grad * ctx.s\n\n"
        "def _setup(ctx, inputs, output):\n    ctx.s = inputs[1]\n\n"
        'torch.library.register_autograd("mylib::mul", _backward, setup_context=_setup)\n'
    )
    _slices_alike(
        text, ("def mul", "def _backward", "def _setup", "register_autograd("), ("def unrelated",)
    )


def _slices_alike(text: str, kept: tuple[str, ...], dropped: tuple[str, ...]) -> None:
    """The `ast` slice keeps each of `kept` and none of `dropped`, and the text scan agrees."""
    sliced = slice_source(text)
    whole = slice_source(text, whole=True)
    assert sliced is not None and whole is not None and sliced.source == whole.source
    assert not [piece for piece in dropped if piece in sliced.source]
    assert [piece for piece in kept if piece in sliced.source] == list(kept)


def test_only_dispatch_handlers_registered_for_an_op_are_parsed() -> None:
    """AGL306 reads a def registered for `aten.empty_like` only when it takes `args` and
    `kwargs`, as a dispatch handler does; a lowering or decomposition registered for the same
    op takes the op's own parameters, and the file is never handed to libcst."""
    lowering = (
        "from torch._ops import ops\naten = ops.aten\n\n"
        "@register_lowering(aten.empty_like)\n"
        "def empty_like(x, *, dtype=None, device=None):\n    return x.new_empty(x.shape)\n"
    )
    assert slice_source(lowering) is None
    handler = (
        "import torch\naten = torch.ops.aten\n\n"
        "@implements(aten.empty_like.default)\n"
        "def _empty_like(func, types, args, kwargs):  # AGL306\n"
        "    return Wrapper(torch.empty_like(args[0]._data))\n"
    )
    sliced = slice_source(handler)
    assert sliced is not None and "def _empty_like" in sliced.source
    assert _findings(handler, full=False) == _findings(handler, full=True)
    assert [(rule, line) for rule, line, _ in _findings(handler, full=False)] == _markers(handler)


@pytest.mark.parametrize(
    ("line", "callee"),
    [
        ("x = tl.load(p)", "tl.load"),
        ("x = load(p)", "load"),
        ("x = make().load(p)", None),  # a call's result: nothing to resolve
        ("x = tl . load(p)", None),
        ("x = (tl.\n    load(p))", None),
        ("bos, eos = (\n    tl.load(p),\n", "tl.load"),
        ("x = (a  # b.\n    load(p))", None),  # a comment may hide a `.`
        ("x = ms[0].load(p)", None),
    ],
)
def test_a_loader_callee_is_resolved_only_when_it_starts_plainly(
    line: str, callee: str | None
) -> None:
    from autogradlint.speed.preselect import _callee_before

    at = line.rindex("load(")
    assert _callee_before(line, at, line.index("(", at)) == callee


def test_a_large_helper_class_keeps_only_the_methods_the_functions_call() -> None:
    """`Helpers.prepare(x)` in a Function: `ast` reads the class header and its static
    `prepare`; the text scan hands it that much (a few more names that prose after
    `Helpers.` suggests), not the whole class, and both selections stay equal."""
    filler = "".join(
        f"    @staticmethod\n    def other_{i}(x):\n        return x + {i}  # padding\n\n"
        for i in range(80)
    )
    text = (
        "import torch\n\n"
        "class Helpers:\n"
        '    """Called as Helpers. (prose), and as Helpers.\n    prepare."""\n\n'
        f"{filler}"
        "    @staticmethod\n    def prepare(x):\n        return x.contiguous()\n\n"
        "    def hidden(self, x):  # not static: slicing keeps it out, the text keeps it\n"
        "        return x\n\n"
        "class Fn(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n"
        '        return Helpers.prepare(x) * 2  # prose: see Helpers. "hidden"\n\n'
        "    @staticmethod\n    def backward(ctx, g):\n"
        "        return (Helpers.\n                hidden(None, g))\n"
    )
    spans = kept_ranges(text, chunk_starts(text), frozenset())
    assert spans is not None
    kept = "".join(text[start:end] for start, end in spans)
    assert "def prepare" in kept and "def hidden" in kept and "class Helpers" in kept
    assert "other_" not in kept
    sliced = slice_source(text)
    whole = slice_source(text, whole=True)
    assert sliced is not None and whole is not None
    assert (sliced.source, sliced.line_map) == (whole.source, whole.line_map)
    assert "def prepare" in sliced.source


def test_hook_classes_handed_to_a_registering_helper_are_kept() -> None:
    """A def whose `register_autograd(...)` takes `register.backward` from its parameter keeps
    itself, the def calling it, and the classes handed to it (with their bases in the file):
    their methods are the backward; unrelated code is left out, and the text scan keeps what
    `ast` keeps."""
    text = (
        "import torch\n\n"
        "def unrelated(x):\n    return x + 1\n\n"
        "def _register(register):\n"
        '    torch.library.register_autograd(f"ns::{register.base}", register.backward)\n\n'
        "def _ensure():\n    _register(Child)\n\n"
        "class Base:\n    @classmethod\n    def backward(cls, ctx, g):\n        return g\n\n"
        'class Child(Base):\n    base = "op"\n\n'
        "class Other:\n    pass\n"
    )
    _slices_alike(
        text,
        ("def _register", "def _ensure", "class Base", "class Child"),
        ("def unrelated", "class Other"),
    )
