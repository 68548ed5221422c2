"""The scanners that read file contents cannot be driven into super-linear time (issue 34, 12).

Three properties, none of them a timing:
- no regex of the package tries a run of characters two ways: no unbounded quantifier is
  followed (directly, or past optional items) by another over characters it also takes, and no
  repeated group can split a run between two of its iterations. That is what made the old
  `TORCH_CHECK\\s*\\(\\s*!?\\s*\\(?\\s*grad` cubic, and `->\\s*[\\w:<>,\\s]+` quadratic;
- the Python work of the native scanner grows linearly: on each adversarial shape, eight times
  the input costs at most ten times the executed lines (counted with sys.settrace, which is
  deterministic; a quadratic scan costs 64 times);
- as a generous safety net, each shape at 1 MB runs in a subprocess that must finish within
  30 s (the old code took hours on several of them).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import re._constants as C  # the parser's opcodes: what a pattern is made of
import re._parser as P
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import autogradlint

PACKAGE = Path(autogradlint.__file__).parent

# --- 1. the shape of every regex ----------------------------------------------------------------
# A quantifier `re` may backtrack into, whose body is one character class: its characters.
_SINGLE = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN)
_ALPHABET = [chr(i) for i in range(256)] + ["\u2028", "\u3000", "\u00e9", "\u0416", "\ufeff"]
_BOUNDED = 64  # `{0,8}` cannot make a run quadratic


def _characters(
    item: tuple[object, object], pattern: re.Pattern[str] | re.Pattern[bytes]
) -> set[str]:
    """The characters of the alphabet one single-character item matches."""
    op, arg = item
    if op is C.LITERAL:
        text = re.escape(chr(arg))  # type: ignore[call-overload]
    elif op is C.NOT_LITERAL:
        text = f"[^{re.escape(chr(arg))}]"  # type: ignore[call-overload]
    elif op is C.ANY:
        text = "."
    else:
        parts, negate = [], False
        for sub, value in arg:  # type: ignore[attr-defined]
            if sub is C.NEGATE:
                negate = True
            elif sub is C.LITERAL:
                parts.append(re.escape(chr(value)))
            elif sub is C.RANGE:
                parts.append(f"{re.escape(chr(value[0]))}-{re.escape(chr(value[1]))}")
            elif sub is C.CATEGORY:
                parts.append(_CATEGORIES[value])
        text = ("[^" if negate else "[") + "".join(parts) + "]"
    raw = isinstance(pattern.pattern, bytes)
    flags = pattern.flags & (re.I | re.S)
    single = re.compile(text.encode("latin1") if raw else text, flags)
    alphabet = _ALPHABET[:256] if raw else _ALPHABET
    return {c for c in alphabet if single.fullmatch(c.encode("latin1") if raw else c)}  # type: ignore[arg-type]


_CATEGORIES = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}


class _Shape:
    """Of a piece of pattern: whether it can match nothing, the characters it can start with,
    and those of the unbounded quantifiers that can start (`head`) or end (`tail`) it."""

    def __init__(self, empty: bool, head: set[str], tail: set[str], first: set[str]) -> None:
        self.empty, self.head, self.tail, self.first = empty, head, tail, first


def ambiguities(pattern: re.Pattern[str] | re.Pattern[bytes]) -> list[str]:
    """Where the pattern can take one run of characters in two ways."""
    found: list[str] = []
    source = pattern.pattern
    text = source.decode("latin1") if isinstance(source, bytes) else source
    flags = pattern.flags & ~re.U if isinstance(source, bytes) else pattern.flags

    def sequence(items: list[tuple[object, object]]) -> _Shape:
        shapes = [piece(item) for item in items]
        for i, first in enumerate(shapes):
            for later in shapes[i + 1 :]:
                if first.tail & later.head:
                    found.append(
                        f"two quantifiers side by side take {sorted(first.tail & later.head)[:4]}"
                    )
                if not later.empty:
                    break
        head: set[str] = set()
        for shape in shapes:
            head |= shape.head
            if not shape.empty:
                break
        tail: set[str] = set()
        for shape in reversed(shapes):
            tail |= shape.tail
            if not shape.empty:
                break
        first: set[str] = set()
        for shape in shapes:
            first |= shape.first
            if not shape.empty:
                break
        return _Shape(all(s.empty for s in shapes), head, tail, first)

    def piece(item: tuple[object, object]) -> _Shape:
        op, arg = item
        if op in _SINGLE:
            return _Shape(False, set(), set(), _characters(item, pattern))
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            low, high, body = arg  # type: ignore[misc]
            inner = sequence(list(body))
            empty = low == 0 or inner.empty
            if op is C.POSSESSIVE_REPEAT:  # never backtracked into
                return _Shape(empty, set(), set(), inner.first)
            if high is not C.MAXREPEAT and high <= _BOUNDED:
                return _Shape(empty, inner.head, inner.tail, inner.first)
            runs: set[str] = set()  # what the repetition alone can take a run of
            if len(body) == 1 and body[0][0] in _SINGLE:
                runs = _characters(body[0], pattern)
            elif len(body) == 1 and body[0][0] is C.BRANCH:
                for branch in body[0][1][1]:
                    if len(branch) == 1 and branch[0][0] in _SINGLE:
                        runs |= _characters(branch[0], pattern)
            if inner.tail & inner.first:
                # one iteration's last quantifier can stop anywhere in what the next begins
                # with: every split is tried (exponential, with a repetition around it)
                found.append(f"a repeated group splits {sorted(inner.tail & inner.first)[:4]}")
            if inner.empty and (inner.head or runs):
                found.append("a repeated group can match nothing")
            return _Shape(empty, inner.head | runs, inner.tail | runs, inner.first)
        if op is C.SUBPATTERN:
            return sequence(list(arg[-1]))  # type: ignore[index]
        if op is C.ATOMIC_GROUP:
            inner = sequence(list(arg))  # type: ignore[arg-type]
            return _Shape(inner.empty, set(), set(), inner.first)
        if op is C.BRANCH:
            shapes = [sequence(list(branch)) for branch in arg[1]]  # type: ignore[index]
            return _Shape(
                any(s.empty for s in shapes),
                set().union(*(s.head for s in shapes)),
                set().union(*(s.tail for s in shapes)),
                set().union(*(s.first for s in shapes)),
            )
        if op in (C.ASSERT, C.ASSERT_NOT):
            sequence(list(arg[1]))  # type: ignore[index]
        return _Shape(True, set(), set(), set())  # anchors, lookarounds: they take nothing

    sequence(list(P.parse(text, flags)))
    return found


# Reviewed by hand: what follows the quantifiers cannot fail, so `re` never goes back into them.
_LINEAR_ANYWAY = {
    # `\s*(?P<word>[\w\-]*)(?:...|[ \t]+...)?` ends in an optional group: a match either way
    "autogradlint.text.suppress._OURS",
}


def _package_patterns() -> dict[str, re.Pattern[str] | re.Pattern[bytes]]:
    """Every regex the package compiles at import, and every literal pattern it hands `re`."""
    found: dict[str, re.Pattern[str] | re.Pattern[bytes]] = {}
    for module in pkgutil.walk_packages(autogradlint.__path__, "autogradlint."):
        if module.name.startswith(("autogradlint.lsp", "autogradlint.confirm")):
            continue  # optional dependencies; their patterns are listed from the source below
        loaded = importlib.import_module(module.name)
        for name, value in vars(loaded).items():
            if isinstance(value, re.Pattern):
                found.setdefault(f"{module.name}.{name}", value)
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, (str, bytes))
                and node.func.attr in ("compile", "search", "match", "fullmatch", "finditer",
                                       "findall", "sub", "split")
            ):  # fmt: skip
                compiled = re.compile(node.args[0].value)
                if all(compiled.pattern != known.pattern for known in found.values()):
                    found[f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"] = compiled
    return found


PATTERNS = _package_patterns()


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_no_regex_takes_a_run_two_ways(name: str) -> None:
    if name in _LINEAR_ANYWAY:
        assert ambiguities(PATTERNS[name])  # still needs the exemption, or drop it
        return
    assert ambiguities(PATTERNS[name]) == [], PATTERNS[name].pattern


@pytest.mark.parametrize(
    "pattern",
    [
        r"TORCH_CHECK\s*\(\s*!?\s*\(?\s*grad\s*(?:\.|->)\s*is_contiguous\b",  # the old check
        r"\)\s*(?:const\s*)?(?:->\s*[\w:<>,\s]+)?\{",  # the old function header
        r"\bpy::module_?\s*&?\s*(\w+)",  # the old module variable
        r"(?:\s*,\s*)*x",
        r"(?:a*)*b",
        r"[ \t]*[rb]?\"[^\"]*\"(?:\s|\#[^\n]*)*",  # the old bare string: `"a" # # # ...\n x`
    ],
)
def test_the_shape_check_finds_what_backtracks(pattern: str) -> None:
    assert ambiguities(re.compile(pattern))


# --- 2 and 3. adversarial inputs ----------------------------------------------------------------
def _in_function(body: str) -> str:
    return (
        f"void f(torch::Tensor g, float* out) {{\n{body}\n}}\n"
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &f); }\n'
    )


def _repeat(piece: str, size: int) -> str:
    return piece * max(1, size // len(piece))


# Each shape makes an input of about `size` characters that some scan of the old code, or a
# plausible one, reads more than once.
SHAPES: dict[str, Callable[[int], str]] = {
    # issue 34: a blanked comment inside a check's condition
    "check_condition": lambda n: _in_function(f"TORCH_CHECK(/*{'x' * n}*/ ok);"),
    "trailing_return_type": lambda n: f"auto f(torch::Tensor g) ->{' ' * n};",
    "module_variable": lambda n: f"void bind(py::module{' ' * n}x",
    "escaped_quotes": lambda n: _in_function('"' + _repeat('\\"', n)),
    "unclosed_parameters": lambda n: _repeat("f( ", n),
    "nested_definitions": lambda n: _repeat("f(torch::Tensor g) {", n // 2) + "}" * (n // 40),
    "defines": lambda n: _repeat("#define X(\n", n),
    "bindings": lambda n: "PYBIND11_MODULE(x, m) {" + _repeat('m.def("', n),
    "nested_libraries": lambda n: _repeat("TORCH_LIBRARY(ns, m) {", n) + "}" * (n // 22),
    "pointer_uses": lambda n: _in_function(
        "auto p = g.data_ptr<float>();" + _repeat("p[i] = p[i] * g.stride(0) + 1;", n)
    ),
    "nested_indexing": lambda n: _in_function(
        "auto p = g.data_ptr<float>(); x = " + "p[" * (n // 2) + "0" + "]" * (n // 2) + ";"
    ),
    "offset_chain": lambda n: _in_function(
        "auto p = g.data_ptr<float>(); x = p" + _repeat(" + p", n) + ";"
    ),
    "alias_chain": lambda n: _in_function(
        "auto q0 = g.data_ptr<float>();" + "".join(f"auto q{i + 1} = q{i};" for i in range(n // 20))
    ),
    "stride_names": lambda n: _in_function(
        "auto s0 = g.stride(0);" + "".join(f"auto s{i + 1} = s{i} * 2;" for i in range(n // 20))
    ),
    "accessor_indices": lambda n: _in_function(
        "auto a = g.accessor<float, 2>(); a" + _repeat("[0]", n) + " = 1;"
    ),
    "casts": lambda n: _in_function(
        "x = " + "(float*)(" * (n // 9) + "g.data_ptr()" + ")" * (n // 9) + ";"
    ),
    "dereferences": lambda n: _in_function("auto p = g.data_ptr<float>(); x = " + "*" * n + "p;"),
    "launches": lambda n: _in_function(_repeat("k<<<", n)),
    "templates": lambda n: _in_function(_repeat("g.data_ptr<", n)),
    "blanks_before_a_method": lambda n: _in_function(f"g{' ' * n}.data_ptr<float>()[i] = 0;"),
    "kernel_parameters": lambda n: (
        "__global__ void f("
        + "".join(f"float* p{i}, " for i in range(n // 12))
        + "int n) {"
        + "".join(f"p{i}[0] = 1;" for i in range(n // 12))
        + "}"
    ),
    "unterminated_comment": lambda n: _in_function("/*" + _repeat("f(g) {", n)),
    "apostrophes": lambda n: _in_function(_repeat("don't ", n)),
    "contiguous_branches": lambda n: _in_function(
        _repeat("if (g.is_contiguous()) { memcpy(out, g.data_ptr(), 4); } ", n)
    ),
    "conditionals": lambda n: _in_function(
        "f(" + "c ? (" * (n // 6) + "(float*) g.data_ptr()" + ") : 0" * (n // 6) + ");"
    ),
    "struct_fields": lambda n: _in_function(
        "".join(f"params.p{i} = g.data_ptr(); params.s{i} = g.stride(0);" for i in range(n // 50))
    ),
}


# Python files are read from their text too, before anything parses them.
PYTHON_SHAPES: dict[str, Callable[[int], str]] = {
    "unclosed_classes": lambda n: _repeat("class X(\n", n),
    "relative_dots": lambda n: "from " + "." * n + " importx\n",
    "adjacent_literals": lambda n: "x = (" + _repeat('"a" ', n),
    "literal_lines": lambda n: "x = (\n" + _repeat('    "a"  # c\n', n),
    "triple_quotes": lambda n: _repeat('""" ', n),
    # beside a Function, a docstring, then a comment that marks an import, then a line the
    # docstring cannot hold
    "docstring_comment": lambda n: (
        "class F(torch.autograd.Function):\n    pass\n"
        + '"a" # import '
        + _repeat("# ", n)
        + "\n x\n"
    ),
}


def _scan_python(text: str) -> None:
    from autogradlint.analysis.parsing import literal_runs
    from autogradlint.speed.complexity import too_complex
    from autogradlint.speed.preselect import kept_ranges
    from autogradlint.text.outline import module_imports, outline
    from autogradlint.text.statements import chunk_starts

    data = text.encode()
    outline(data)
    module_imports(data)
    kept_ranges(text, chunk_starts(text), frozenset({"X"}))
    literal_runs(text)
    too_complex(text)


def _scan_native(text: str) -> None:
    from autogradlint.native.index import NativeIndex
    from autogradlint.native.scan import Source

    source = Source("x.cu", text)
    source.macros()
    index = NativeIndex([source])
    index.evidence(None, "f", 0)
    source.functions("f")


def _lines_executed(scan: Callable[[str], None], text: str) -> int:
    count = 0

    def trace(frame: object, event: str, arg: object) -> Callable[..., object]:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        scan(text)
    finally:
        sys.settrace(None)
    return count


CASES = [("native", shape) for shape in sorted(SHAPES)] + [
    ("python", shape) for shape in sorted(PYTHON_SHAPES)
]


def _case(kind: str, shape: str) -> tuple[Callable[[str], None], Callable[[int], str]]:
    if kind == "native":
        return _scan_native, SHAPES[shape]
    return _scan_python, PYTHON_SHAPES[shape]


@pytest.mark.parametrize(("kind", "shape"), CASES)
def test_the_scans_grow_linearly(kind: str, shape: str) -> None:
    scan, make = _case(kind, shape)
    scan(make(200))  # compile what `re` caches, once
    small = _lines_executed(scan, make(4_000))
    large = _lines_executed(scan, make(32_000))
    assert large <= 10 * small + 1_000, (small, large)


_SAFETY_NET = """
import sys
sys.path.insert(0, {tests!r})
from test_linear_scans import _case
scan, make = _case({kind!r}, {shape!r})
scan(make(330_000) * 3)  # a C++ body over 400 KB is no function: it would not be read
"""


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "shape"), CASES)
def test_a_megabyte_of_each_shape_is_read(kind: str, shape: str) -> None:
    """Not a measurement: the old code took hours here; anything linear is done in seconds."""
    script = _SAFETY_NET.format(tests=str(Path(__file__).parent), kind=kind, shape=shape)
    done = subprocess.run([sys.executable, "-c", script], timeout=30, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
