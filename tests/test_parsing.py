"""Parsing without libcst's node validation gives the same tree, and leaves validation on."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from conftest import ROOT

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
