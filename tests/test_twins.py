"""A rebuilt tree's findings are quoted and placed on libcst twins, exactly as a whole parse does.

`check` runs the checks once, on the tree rebuilt from `ast`; the nodes a check reports or
quotes get their libcst twins from the top-level statement holding them, parsed alone
(speed/twins.py). What a user sees must not depend on which way a file went: every finding's
message, position and help equal those of libcst's whole parse (here on tricky layouts; on
every file of the corpus and torch in tests/test_rebuild.py).
"""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from autogradlint.analysis.source_text import NeedsParse, code_of, rebuilt_tree
from autogradlint.engine.pipeline import analyse, lint_source, locate
from autogradlint.speed.rebuild import rebuild_module
from autogradlint.speed.twins import Twins, first_indent, first_line_end


def whole_parse_findings(source: str) -> list[object]:
    """What libcst's whole parse reports: no rebuilt tree anywhere."""
    result = analyse(source, "t.py")
    assert result.module is not None and result.text is not None
    return [
        f for f, _ in locate(result.module, result.text, result.violations, "t.py", result.layout)
    ]


def assert_same_findings(source: str, *, on_twins: bool) -> None:
    """Same findings both ways; `on_twins`: whether the rebuilt tree's twins placed them."""
    quick = analyse(source, "t.py", rebuild=True)
    assert (quick.spans is not None) is on_twins
    fast = lint_source(source, "t.py", suppress=False).findings
    assert fast == whole_parse_findings(source)
    assert fast, "the example must report something"


BACKWARD_WITH_FINDINGS = (
    "import torch\n\n\n"
    "class F(torch.autograd.Function):\n"
    "    @staticmethod\n"
    "    def forward(ctx, x):\n"
    "        ctx.x = x  # stashed\n"
    "        return x * 2\n\n"
    "    @staticmethod\n"
    "    def backward(ctx, g):\n"
    "        with torch.enable_grad():\n"
    "            y = ctx.x.detach().requires_grad_()\n"
    "            (gx,) = torch.autograd.grad(\n"
    "                (y * 2).sum(),  # a comment inside the call\n"
    "                y,\n"
    "            )\n"
    "        g.mul_(2)\n"
    "        return gx\n"
)


@pytest.mark.parametrize(
    "layout",
    ["four_spaces", "two_spaces", "tabs", "crlf", "blank_lines_and_comments", "other_classes"],
)
def test_findings_do_not_depend_on_the_path(layout: str) -> None:
    source = BACKWARD_WITH_FINDINGS
    if layout == "two_spaces":
        source = source.replace("    ", "  ")
    elif layout == "tabs":
        source = source.replace("    ", "\t")
    elif layout == "crlf":
        source = source.replace("\n", "\r\n")
    elif layout == "blank_lines_and_comments":
        source = source.replace("class F", "# leading\n\n# comment\nclass F") + (
            "        # trailing, indented\n    # trailing\n# dedented\n"
        )
    elif layout == "other_classes":
        # An earlier class sets the file's indentation and F's differs: parsed alone, F's
        # blocks would record their indentation otherwise, so the whole file is parsed.
        source = (
            "import torch\n\nclass G(torch.autograd.Function):\n  @staticmethod\n"
            "  def forward(ctx, x):\n    return x\n\n  @staticmethod\n"
            "  def backward(ctx, g):\n    return g\n\n\n" + source.split("\n\n\n", 1)[1]
        )
    assert_same_findings(source, on_twins=layout != "other_classes")


def _twins(source: str) -> tuple[cst.Module, Twins]:
    tree = ast.parse(source)
    module = rebuild_module(tree, source, None)
    return module, Twins(module, tree, None, source, None)


def test_a_quote_comes_from_the_statement_parsed_alone() -> None:
    module, twins = _twins(BACKWARD_WITH_FINDINGS)
    cls = module.body[1]
    assert isinstance(cls, cst.ClassDef)
    backward = cls.body.body[1]
    assert isinstance(backward, cst.FunctionDef)
    with_statement = backward.body.body[0]
    with rebuilt_tree(twins):
        quoted = code_of(with_statement, module)
    assert quoted.startswith("with torch.enable_grad():\n")
    assert "# a comment inside the call" in quoted
    assert twins.twin(with_statement) is not with_statement


def test_a_top_level_statement_is_not_quoted_from_its_own_parse() -> None:
    """Parsed alone, it would lose the comments above it: the whole parse is asked instead."""
    module, twins = _twins(BACKWARD_WITH_FINDINGS)
    with rebuilt_tree(twins), pytest.raises(NeedsParse):
        code_of(module.body[1])


def test_a_node_a_check_built_has_no_twin() -> None:
    _, twins = _twins(BACKWARD_WITH_FINDINGS)
    with rebuilt_tree(twins), pytest.raises(NeedsParse):
        code_of(cst.Name("made_up"))


def test_without_twins_a_rebuilt_tree_has_no_text() -> None:
    node = cst.parse_expression("f( x )")
    with rebuilt_tree(), pytest.raises(NeedsParse):
        code_of(node)
    assert code_of(node) == "f( x )"


@pytest.mark.parametrize(
    ("source", "indent"),
    [
        ("x = 1\n", "    "),
        ("def f():\n  return 1\n", "  "),
        ("def f():\n\treturn 1\n", "\t"),
        ("x = (\n        1)\nif a:\n   b\n", "   "),  # continuation lines are not blocks
        ("if a: b\nif c:\n      d\n", "      "),
        ('s = """\n    text\n"""\nclass C:\n     pass\n', "     "),
    ],
)
def test_the_file_indentation_is_libcsts(source: str, indent: str) -> None:
    assert first_indent(source) == indent == cst.parse_module(source).default_indent


@pytest.mark.parametrize("source", ["x = 1\n", "x = 1\r\ny = 2\n", "x = 1\ny = 2\r\n", "x = 1"])
def test_the_file_line_ending_is_libcsts(source: str) -> None:
    assert first_line_end(source) == cst.parse_module(source).default_newline


def test_a_finding_in_a_method_parses_that_method_only() -> None:
    module, twins = _twins(BACKWARD_WITH_FINDINGS)
    cls = module.body[1]
    assert isinstance(cls, cst.ClassDef)
    backward = cls.body.body[1]
    assert isinstance(backward, cst.FunctionDef)
    call = backward.body.body[1]
    with rebuilt_tree(twins):
        assert code_of(call) == "g.mul_(2)\n"
    assert list(twins._members) == [(1, 1)] and not twins._parsed
    # a method's own text comes from its class parsed whole: it holds the lines above it
    whole = cst.parse_module(BACKWARD_WITH_FINDINGS).body[1]
    assert isinstance(whole, cst.ClassDef)
    with rebuilt_tree(twins):
        quoted = code_of(backward)
    assert quoted == code_of(whole.body.body[1])
    assert quoted.startswith("\n@staticmethod\n")  # the blank line above it
    assert list(twins._parsed) == [1]


def test_placed_in_the_file_as_it_is() -> None:
    """The module positions.py reads holds the method twins inside the rebuilt class."""
    module, twins = _twins(BACKWARD_WITH_FINDINGS)
    cls = module.body[1]
    assert isinstance(cls, cst.ClassDef)
    forward = cls.body.body[0]
    twin = twins.twin(forward.body.body[0])
    placed = twins.module()
    placed_cls = placed.body[1]
    assert isinstance(placed_cls, cst.ClassDef)
    assert placed_cls.body.body[0] is twins.twin(forward)
    assert placed_cls.body.body[1] is cls.body.body[1]  # untouched: never asked for
    assert twin in placed_cls.body.body[0].body.body  # type: ignore[attr-defined]
