"""The language server's incremental lint finds exactly what linting the whole text finds,
edit after edit (the edits a person makes: in a body, a new line above, a signature, a rename,
a noqa, a class added or removed, half-typed code)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autogradlint.engine.incremental import IncrementalLinter, split
from autogradlint.engine.pipeline import lint_source

UNIT = """\
class Fn{i}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        (x, w) = ctx.saved_tensors
        y = x * x
        extra = torch.autograd.grad(y, x, g)[0]
        return g * w + extra, g * x


"""
CHILD = """\
class Child{i}(Fn{j}):
    @staticmethod
    def backward(ctx, g):
        return g


"""
CONTEXT = """\
def use{i}(x):
    return Fn{j}.forward(x)


"""


def _module(units: int) -> str:
    parts = ["import torch\n\n\n"]
    for i in range(units):
        parts.append(UNIT.format(i=i))
        if i % 3 == 1:
            parts.append(CHILD.format(i=i, j=i - 1))
        if i % 4 == 2:
            parts.append(CONTEXT.format(i=i, j=i))
    return "".join(parts)


def _in_unit(text: str, i: int, old: str, new: str) -> str:
    """Replace the first `old` after `class Fn{i}(`."""
    at = text.find(f"class Fn{i}(")
    if at == -1:
        return text
    found = text.find(old, at)
    return text if found == -1 else text[:found] + new + text[found + len(old) :]


RECOMPUTE = "        y = x * x\n        extra = torch.autograd.grad(y, x, g)[0]\n"
EDITS = [
    (
        "body",
        lambda t, i: _in_unit(t, i, RECOMPUTE, RECOMPUTE.replace("        ", "        # ", 1)),
    ),
    (
        "wrap",
        lambda t, i: _in_unit(
            t,
            i,
            RECOMPUTE,
            "        with torch.enable_grad():\n" + RECOMPUTE.replace("        ", "            "),
        ),
    ),
    ("line above", lambda t, i: t.replace(f"class Fn{i}(", f"# a comment\n\nclass Fn{i}(", 1)),
    ("signature", lambda t, i: _in_unit(t, i, "def forward(ctx, x, w):", "def forward(ctx, x):")),
    ("rename", lambda t, i: t.replace(f"class Fn{i}(", f"class Renamed{i}(", 1)),
    (
        "noqa",
        lambda t, i: _in_unit(t, i, "grad(y, x, g)[0]\n", "grad(y, x, g)[0]  # noqa: AGL101\n"),
    ),
    ("remove", lambda t, i: t.replace(UNIT.format(i=i), "", 1)),
    ("add", lambda t, i: t + UNIT.format(i=100 + i)),
    ("half-typed", lambda t, i: _in_unit(t, i, "Function):\n", "Function:\n")),
    (
        "not static",
        lambda t, i: t.replace(
            "    @staticmethod\n    def backward(ctx, g):\n        return g\n",
            "    def backward(ctx, g):\n        return g\n",
            1,
        ),
    ),
    ("file-ignore", lambda t, i: t + "# autogradlint: file-ignore[AGL101]\n"),
]


def _summary(result):  # type: ignore[no-untyped-def]
    if result.error is not None:
        return ("error", result.error.message)
    return sorted(
        (f.rule_id, f.line, f.col, f.end_line, f.end_col, f.message) for f in result.findings
    )


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(
    units=st.integers(min_value=4, max_value=9),
    edits=st.lists(
        st.tuples(st.sampled_from(range(len(EDITS))), st.integers(0, 8)), min_size=1, max_size=6
    ),
)
def test_incremental_lint_equals_a_whole_lint_after_every_edit(units: int, edits) -> None:  # type: ignore[no-untyped-def]
    linter = IncrementalLinter()
    text = _module(units)
    assert _summary(linter.lint(text, "m.py")) == _summary(lint_source(text, "m.py"))
    for which, target in edits:
        text = EDITS[which][1](text, target % units)
        assert _summary(linter.lint(text, "m.py")) == _summary(lint_source(text, "m.py")), (
            EDITS[which][0],
            text,
        )


def test_an_edit_in_one_unit_analyses_that_unit_only(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from autogradlint.engine import incremental

    calls: list[int] = []
    real = incremental.lint_source

    def counting(text, path, **options):  # type: ignore[no-untyped-def]
        calls.append(len(text))
        return real(text, path, **options)

    monkeypatch.setattr(incremental, "lint_source", counting)
    linter = IncrementalLinter()
    text = _module(12)
    linter.lint(text, "m.py")
    calls.clear()
    edited = EDITS[1][1](text, 5)
    assert edited != text
    linter.lint(edited, "m.py")
    assert len(calls) == 1  # the edited unit (and the units it names) only
    assert len(split(edited)) > 12
