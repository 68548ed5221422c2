"""`parse_holding` hands `ast` only the statements (and class members) that mention a word: the
questions asked of what it keeps get the answers the whole file gives (the `apply` calls a
Function receives, the `impl(...)` calls that register kernels)."""

from __future__ import annotations

import ast

import pytest
from conftest import corpus_and_torch_trees

from autogradlint.analysis.apply_sites import _APPLY, ApplySites, _calls
from autogradlint.text.ast_walk import parse_quietly
from autogradlint.text.statements import parse_holding

CALLS = '''\
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        return x * k


class Suite:
    """Tests, one class inside another (as torch's distributed tests are written)."""

    class _Base:
        def setUp(self):
            self.k = 2

        def test_scale(self):
            return Scale.apply(torch.ones(2), self.k)

        def test_other(self):
            return torch.ones(2)


def run(x):
    total = 0
    for _ in range(3):
        total = total + Scale.apply(x, 3)
    return total


@decorated(Scale.apply)
class Held:
    weight = None
'''


def _sites(tree: ast.Module, lines: list[int] | None) -> list[tuple[int, int, str, str]]:
    return [
        (call.lineno, call.col_offset, getattr(owner, "name", ""), getattr(function, "name", ""))
        for call, owner, function in _calls(tree, lines)
    ]


def test_only_the_members_that_mention_the_word_are_parsed() -> None:
    tree, lines = parse_holding(CALLS, _APPLY, members=True)
    assert tree is not None and lines is not None
    kept = ast.unparse(tree)
    assert "test_scale" in kept and "def run" in kept and "class Held" in kept
    assert "test_other" not in kept and "setUp" not in kept  # members that call no apply
    assert "def forward" not in kept  # a class that never says the word
    # the calls, their places and what holds them: as the whole file has them
    assert _sites(tree, lines) == _sites(ast.parse(CALLS), None)


def test_whole_classes_keep_what_the_class_holds() -> None:
    tree, lines = parse_holding(CALLS, _APPLY)
    assert tree is not None
    assert "setUp" in ast.unparse(tree)  # `self.k`, read to say what a call passes
    assert "def forward" not in ast.unparse(tree)
    assert _sites(tree, lines) == _sites(ast.parse(CALLS), None)
    sites = ApplySites(CALLS)
    assert sites.count("Scale") == 2  # the decorator names apply, it does not call it
    assert sites.passed("Scale", 0) == ["other", "other"]


def test_a_name_spelled_outside_ascii_is_found() -> None:
    text = "class ｆ:\n    x = 1\n\n    def g(self):\n        return Fn.ａpply(x)\n\n\nclass G:\n    y = 'é'\n"
    tree, lines = parse_holding(text, _APPLY, members=True)  # NFKC: f, apply
    assert tree is not None
    assert [ast.unparse(call) for call, _o, _f in _calls(tree, lines)] == ["Fn.apply(x)"]
    assert "x = 1" not in ast.unparse(tree)  # the members without a match are still left out


def test_lines_ended_by_a_carriage_return_are_counted_as_python_counts_them() -> None:
    text = "import torch\rclass A:\r    def f(self):\r        return Fn.apply(1)\r"
    tree, lines = parse_holding(text, _APPLY, members=True)
    assert tree is not None and lines == [4]
    assert _sites(tree, lines) == _sites(ast.parse(text), None)


def test_a_split_statement_falls_back_to_the_whole_file() -> None:
    # a column-0 line inside brackets splits the statement for the text scan
    text = "x = f(\n1)\ny = Fn.apply(\nx)\n"
    tree, _lines = parse_holding(text, _APPLY)
    assert tree is not None
    assert ast.dump(tree) == ast.dump(ast.parse(text))


@pytest.mark.corpus
def test_every_apply_call_of_the_corpus_and_torch_is_found_in_what_is_kept() -> None:
    checked = 0
    for tree_root in corpus_and_torch_trees():
        for path in sorted(tree_root.rglob("*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            if ".apply" not in text:
                continue
            whole = parse_quietly(text)
            if whole is None:
                continue
            expected = _sites(whole, None)
            for members in (False, True):
                tree, lines = parse_holding(text, _APPLY, members=members)
                assert tree is not None, path
                assert _sites(tree, lines) == expected, (path, members)
            checked += 1
    assert checked > 100
