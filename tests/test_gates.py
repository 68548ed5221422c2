"""Byte gates and class statements read from bytes: what decides, without parsing, whether a
file can hold a finding and which classes the project index sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from autogradlint.checks.admission import can_hold_findings
from autogradlint.checks.gates import declarations
from autogradlint.engine.door import lint
from autogradlint.engine.request import LintRequest
from autogradlint.meta import all_rules
from autogradlint.speed.slicing import slice_source
from autogradlint.text.outline import class_declarations
from autogradlint.view import build_index

ALL = frozenset(all_rules())


def test_a_function_class_admits_the_file() -> None:
    source = b"import torch\n\nclass Scale(torch.autograd.Function):\n    pass\n"
    assert can_hold_findings(source, ALL)


def test_a_class_statement_in_a_docstring_example_does_not() -> None:
    # torch/autograd/anomaly_mode.py: the doctest's class is text, not a class statement.
    source = (
        b'"""Example:\n\n    >>> class MyFunc(autograd.Function):\n    ...     pass\n"""\n'
        b"import torch\n"
    )
    assert not can_hold_findings(source, ALL)


def test_bases_over_several_lines_and_keywords() -> None:
    source = b"import torch\nclass Scale(\n    Base,\n    torch.autograd.Function,\n    metaclass=M,\n):\n    pass\n"
    assert can_hold_findings(source, ALL)
    assert class_declarations(source) == [("Scale", ("Base", "torch.autograd.Function"), True)]


# torch's Function bases written as a file may write them: by a name, or imported under another.
SPELLINGS = {
    "torch.autograd.Function": "import torch\n",
    "FunctionBase": "from torch.autograd.function import FunctionBase\n",
    "InplaceFunction": "from torch.autograd.function import InplaceFunction\n",
    "FB": "from torch.autograd.function import FunctionBase as FB\n",
    "F": "from torch.autograd import Function as F\n",
}
# A backward that is not a staticmethod (AGL402): found wherever Scale is a Function.
SCALE = """
class Scale({base}):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    def backward(ctx, grad):  # AGL402
        return grad * 2
"""


@pytest.mark.parametrize("base", sorted(SPELLINGS))
def test_every_layer_agrees_on_what_is_a_function(base: str, tmp_path: Path) -> None:
    """`class Scale(FunctionBase)` was rejected by the gate, taken by the slicer's hierarchy
    and listed by the project index's bases: text/functions.py now holds the one rule the
    filters share (may_name_function, FUNCTION_ALIAS) and the bases the decision resolves to
    (FUNCTION_BASES), so the gate, the slicer, the project view and the checks agree."""
    source = SPELLINGS[base] + SCALE.format(base=base)
    path = tmp_path / "scale.py"
    path.write_text(source)
    assert can_hold_findings(source.encode(), ALL)
    sliced = slice_source(source)
    assert sliced is not None and "def backward" in sliced.source
    assert "scale.Scale" in build_index(tmp_path, [path]).functions
    result = lint(LintRequest(source, str(path)))
    assert [(f.rule_id, f.line) for f in result.findings] == [("AGL402", source.count("\n") - 1)]


def test_a_class_no_layer_takes_for_a_function() -> None:
    """A base named like one but bound to nothing of torch's is no Function: the filters may
    let it through (they over-approximate), the decision, by resolving imports, does not."""
    source = "import torch.autograd\n" + SCALE.format(base="FunctionBase")
    assert lint(LintRequest(source, "scale.py")).findings == []


def test_the_class_statements_are_read_once_and_shared() -> None:
    source = b"import torch\nclass Scale(torch.autograd.Function):\n    pass\n"
    memo: dict[object, object] = {}
    assert can_hold_findings(source, ALL, memo=memo)
    first = declarations(source, memo)
    assert declarations(source, memo) is first
    assert first == [("Scale", ("torch.autograd.Function",), True)]


def test_lone_carriage_returns_and_form_feeds_end_and_lead_lines() -> None:
    # Python ends a line at a lone \r (old Mac files), and a form feed may lead an indent.
    mac = b"import torch\rclass Scale(torch.autograd.Function):\r    pass\r"
    assert class_declarations(mac) == [("Scale", ("torch.autograd.Function",), True)]
    assert can_hold_findings(mac, ALL)
    feed = b"import torch\n\x0cclass Scale(torch.autograd.Function):\n    pass\n"
    assert class_declarations(feed) == [("Scale", ("torch.autograd.Function",), True)]


def test_a_class_named_in_a_comment_is_not_a_class_statement() -> None:
    source = b"# a subclass Scale(torch.autograd.Function) would go here\nx = 1\n"
    assert class_declarations(source) == []
