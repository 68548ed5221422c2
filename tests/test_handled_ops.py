"""Which ops a hook's branch handles: the one reader AGL301/302 and AGL306 share."""

from __future__ import annotations

import libcst as cst
import pytest

from autogradlint.analysis.handled_ops import handled_ops, op_name
from autogradlint.engine.door import lint_file


@pytest.mark.parametrize(
    ("test", "ops"),
    [
        ("func is aten.empty_like.default", {"empty_like"}),
        ("func == torch.ops.aten.new_zeros.default", {"new_zeros"}),
        ("func in (aten.new_empty.default, aten.new_zeros.default)", {"new_empty", "new_zeros"}),
        ("func.overloadpacket == aten._to_copy", {"_to_copy"}),
        ("func._overloadpacket is aten.unbind", {"unbind"}),
        (
            "func is aten.empty_like.default or func is aten.zeros_like.default",
            {"empty_like", "zeros_like"},
        ),
        ("func is aten.empty_like.default and kwargs", {"empty_like"}),
        ("func is torch.Tensor.to and args", {"to"}),
        # every other op reaches these bodies: none is named
        ("func is not aten.empty_like.default", set()),
        ("func not in (aten.empty_like.default,)", set()),
        ("func != aten.empty_like.default", set()),
        ("not func is aten.empty_like.default", set()),
        # not a test of `func`
        ("other is aten.empty_like.default", set()),
        ('str(func) == "aten.empty_like.default"', set()),
    ],
)
def test_the_ops_a_branch_test_names(test: str, ops: set[str]) -> None:
    assert handled_ops(cst.parse_expression(test), "func") == ops


def test_a_called_op_is_named_from_aten_only() -> None:
    """`aten.add.Tensor(x, y)` computes `add`; `torch.Tensor.add(x, y)` is a method call."""
    assert op_name(cst.parse_expression("torch.ops.aten.add.Tensor")) == "add"
    assert op_name(cst.parse_expression("torch.Tensor.add")) is None
    assert op_name(cst.parse_expression("aten")) is None


HANDLER = """
import torch
aten = torch.ops.aten

class Wrapper(torch.Tensor):
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket == aten.empty_like or func is aten.new_empty.default:
            inner = args[0]._data
            return Wrapper(torch.empty_like(inner))
        return func(*args, **kwargs)
"""


def test_a_handler_selected_through_the_overload_packet_is_read() -> None:
    """AGL306, once at the branch: its body ignores the dtype `empty_like` is asked for."""
    found = lint_file(HANDLER.encode(), "wrapper.py", enabled=frozenset({"AGL306"})).findings
    assert [(f.rule_id, f.line) for f in found] == [("AGL306", 9)]
    assert "handles `empty_like` but ignores the requested dtype and device" in found[0].message
    # the second op of the `or` alone is read the same way
    alone = HANDLER.replace("func.overloadpacket == aten.empty_like or ", "")
    found = lint_file(alone.encode(), "wrapper.py", enabled=frozenset({"AGL306"})).findings
    assert [(f.rule_id, f.line) for f in found] == [("AGL306", 9)]
    assert "handles `new_empty`" in found[0].message
