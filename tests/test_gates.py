"""Byte gates and class statements read from bytes: what decides, without parsing, whether a
file can hold a finding and which classes the project index sees."""

from __future__ import annotations

from autogradlint.checks.gates import declarations
from autogradlint.checks.registry import can_hold_findings
from autogradlint.meta import all_rules
from autogradlint.text.outline import class_declarations

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


def test_a_name_that_only_starts_with_function_is_not_one() -> None:
    source = b"import torch.autograd\nclass Scale(FunctionBase):\n    pass\n"
    assert not can_hold_findings(source, ALL)


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
