"""What our speed-ups assume of libcst's internals, held on the installed libcst.

pyproject.toml pins libcst to the range these were checked on. Three places reach inside it:
- analysis/parsing.py swaps `CSTNode.__post_init__` (validation) off while libcst's own parser
  builds nodes from text it just parsed, and turns a parsed string leaf into a `RunString`;
- speed/rebuild.py builds nodes with `object.__new__` and sets their dataclass fields directly;
- runtime/dataclass_code.py caches the code `dataclasses` compiles for libcst's node classes.
A libcst release that breaks one of these fails here, before it fails a user (the tree and
finding comparisons in test_parsing, test_rebuild and test_speed_contract hold the results).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst
import pytest
from conftest import ROOT

from autogradlint.analysis import parsing
from autogradlint.analysis.parsing import RunString, parse_module
from autogradlint.speed.rebuild import _node


def _node_classes(kind: type = cst.CSTNode) -> Iterator[type]:
    sub: type
    for sub in kind.__subclasses__():
        if sub.__module__.startswith("libcst."):
            yield sub
            yield from _node_classes(sub)


def _nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _nodes(child)


def _stored(node: object) -> set[str]:
    """The attributes an object holds: in its `__dict__` and in its classes' slots."""
    slots = {
        name
        for kind in type(node).__mro__
        for name in kind.__dict__.get("__slots__", ())
        if name not in ("__dict__", "__weakref__") and hasattr(node, name)
    }
    return set(getattr(node, "__dict__", {})) | slots


def test_validation_is_one_switch_every_node_goes_through() -> None:
    """parsing.py skips validation by swapping the base class's `__post_init__`: no node class
    may have its own, and the constructor must call it."""
    classes = list(_node_classes())
    assert len(classes) > 200
    assert [k.__name__ for k in classes if "__post_init__" in vars(k)] == []
    assert cst.CSTNode.__post_init__ is parsing._VALIDATING
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")  # validated: an empty identifier
    cst.CSTNode.__post_init__ = parsing._trusted  # type: ignore[method-assign]
    try:
        assert cst.Name("").value == ""  # the switch is what the constructor runs
    finally:
        cst.CSTNode.__post_init__ = parsing._VALIDATING  # type: ignore[method-assign]


def test_a_node_is_its_fields_and_can_be_made_without_its_constructor() -> None:
    """rebuild.py makes a node with `object.__new__` and sets each dataclass field: a node
    must hold its fields and nothing else, and so made, equal the parser's node."""
    source = (ROOT / "examples" / "reentrant_bug.py").read_text()
    module = cst.parse_module(source)
    kinds = set()
    for node in _nodes(module):
        names = {field.name for field in dataclasses.fields(node)}
        assert _stored(node) == names, type(node).__name__
        made = _node(type(node), **{name: getattr(node, name) for name in names})
        assert made.deep_equals(node)
        kinds.add(type(node))
    assert len(kinds) > 40
    assert cst.Module([]).code_for_node(made) == cst.Module([]).code_for_node(node)


def test_a_parsed_string_leaf_can_become_a_run() -> None:
    """parsing.py gives a parsed `SimpleString` the class `RunString` in place (no copy of a
    tree thousands of literals deep): the two classes must share their layout."""
    leaf = cst.parse_expression('"a"')
    assert type(leaf) is cst.SimpleString
    object.__setattr__(leaf, "__class__", RunString)
    assert isinstance(leaf, cst.SimpleString) and leaf.value == '"a"'
    run = '"x"\n' * parsing.MIN_RUN
    (statement,) = parse_module(f"s = (\n{run})\n").body
    assert isinstance(statement, cst.SimpleStatementLine)
    assign = statement.body[0]
    assert isinstance(assign, cst.Assign)
    assert isinstance(assign.value, RunString)
    assert assign.value.evaluated_value == "x" * parsing.MIN_RUN
