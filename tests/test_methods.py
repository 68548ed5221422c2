"""A class's own method is read from the class's header and the members that may define it,
not the whole class: what it finds is what the whole class holds."""

from __future__ import annotations

import re

import libcst as cst
import pytest
from conftest import corpus_and_torch_trees

from autogradlint.analysis.methods import FileMethods, Method

WRAPPERS = '''\
import torch


class Wrapped(torch.Tensor):
    """A wrapper whose constructor is decorated over two lines."""

    size_hint = 3

    @staticmethod
    @torch._disable_dynamo(
        recursive=False)
    def __new__(cls, data):
        return torch.Tensor._make_wrapper_subclass(cls, data.shape)

    def __init__(self, data):
        self._data = data

    if True:
        def __init__(self, other):  # not a member the class defines directly
            pass

    class Inner:
        def __init__(self):
            pass


class Other(torch.Tensor):
    def __init__(self, a, b):
        pass
'''


def _shown(methods: list[Method]) -> list[tuple[str, str, bool]]:
    """Each method's code, without the blank lines and comments above it (which of two
    members those belong to is the text scan's choice, and no check reads them)."""
    return [
        (m.owner, _code(m.node.with_changes(leading_lines=())), m.binds_receiver) for m in methods
    ]


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _whole(methods: FileMethods, owner: str, name: str) -> list[Method]:
    """The method read from the whole class, as every other question reads it."""
    return [m for m in methods._find(name, None) if m.owner == owner]


def test_the_members_that_may_define_the_method_are_what_is_read() -> None:
    methods = FileMethods(WRAPPERS)
    init = methods.of_class("Wrapped", "__init__")
    assert [_code(m.node).strip().splitlines()[0] for m in init] == ["def __init__(self, data):"]
    new = methods.of_class("Wrapped", "__new__")
    assert len(new) == 1 and not new[0].binds_receiver  # its decorators came with it
    assert [m.owner for m in methods.of_class("Other", "__init__")] == ["Other"]
    assert methods.of_class("Inner", "__init__") == []  # not a top-level class
    for owner, name in [("Wrapped", "__init__"), ("Wrapped", "__new__"), ("Other", "__init__")]:
        assert _shown(methods.of_class(owner, name)) == _shown(
            _whole(FileMethods(WRAPPERS), owner, name)
        )


@pytest.mark.corpus
def test_every_tensor_subclass_of_the_corpus_and_torch_reads_its_methods_as_whole() -> None:
    checked = 0
    for tree in corpus_and_torch_trees():
        for path in sorted(tree.rglob("*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            if "__torch_dispatch__" not in text:
                continue
            methods, whole = FileMethods(text), FileMethods(text)
            for owner in re.findall(r"^class[ \t]+(\w+)", text, re.MULTILINE):
                for name in ("__init__", "__new__", "__tensor_flatten__"):
                    found = _shown(methods.of_class(owner, name))
                    assert found == _shown(_whole(whole, owner, name)), (path, owner, name)
                    checked += bool(found)
    assert checked > 50
