"""Parsing without libcst's node validation gives the same tree, and leaves validation on."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from conftest import ROOT
from test_native import BACKWARD_VIA

from autogradlint.analysis.parsing import parse_module

SOURCES = sorted((ROOT / "tests" / "fixtures").glob("*.py")) + sorted(
    (ROOT / "examples").glob("*.py")
)


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_same_tree_as_libcst(path: Path) -> None:
    text = path.read_text()
    trusted = parse_module(text)
    checked = cst.parse_module(text)
    assert trusted.deep_equals(checked)
    assert trusted.code == text


def test_validation_is_back_on_afterwards() -> None:
    parse_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not an identifier")


def test_syntax_errors_still_raise() -> None:
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def f(:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("1x")  # and validation survived the failed parse


# --- implicit concatenation: a generated `load_inline` source ----------------------------------
def _generated(count: int, comment: str = "") -> str:
    """`cuda_sources=(...)` as code generators write it: one C++ line per literal."""
    literals = "".join(f'        "int x{i} = {i};\\n"{comment}\n' for i in range(count))
    return f"""import torch
from torch.utils.cpp_extension import load_inline

ext = load_inline(
    "ext",
    cpp_sources=(
{literals}    ),
    functions=["scale"],
)

""" + BACKWARD_VIA.format(call="ext.scale(grad, 2.0)")


@pytest.mark.parametrize(("count", "comment"), [(1_000, ""), (5_000, ""), (5_000, "  # line")])
def test_thousands_of_adjacent_literals_parse_to_the_same_code(count: int, comment: str) -> None:
    """libcst nests one level per literal: past ~4,000 its parser fails, past a few hundred
    its code generation recurses too deep. The run is one leaf, and the code is the source."""
    import ast

    from autogradlint.analysis.parsing import RunString

    text = _generated(count, comment)
    module = parse_module(text)
    assert module.code == text
    (statement,) = module.body[2].body  # type: ignore[attr-defined]
    run = statement.value.args[1].value
    assert type(run) is RunString and run.evaluated_value == "".join(
        f"int x{i} = {i};\n" for i in range(count)
    )
    compiled = ast.parse(text).body[2].value.keywords[0].value  # type: ignore[attr-defined]
    assert run.evaluated_value == compiled.value  # what CPython makes of it


@pytest.mark.parametrize("count", [1_000, 5_000])
def test_a_generated_inline_source_is_linted(tmp_path: Path, count: int) -> None:
    """Not "syntax error" (5,000) nor "too deeply nested" (1,000): the file is checked."""
    from autogradlint.engine.pipeline import lint_source

    result = lint_source(_generated(count), str(tmp_path / "ops.py"))
    assert result.error is None
    assert [(f.rule_id, f.line) for f in result.findings] == [("AGL201", count + 19)]


def test_the_rebuilt_tree_reads_a_run_as_the_parser_does() -> None:
    """The check path builds its tree from `ast` (speed/rebuild.py): the same one leaf."""
    import ast

    from test_rebuild import differences

    from autogradlint.speed.rebuild import rebuild_module

    text = _generated(5_000) + 'y = b"a" b"b"\nz = ("" "x" f"{y}" ' + '"a" ' * 70 + ")\n"
    rebuilt = rebuild_module(ast.parse(text), text, None)
    assert differences(rebuilt, parse_module(text)) is None
