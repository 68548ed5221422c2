"""Whether a backward reads the layout of a gradient: then a private copy is not equivalent.

A copy of the stride-0 gradient of `out.sum()` is dense, so on the copy `g.contiguous()` (or
`g.reshape(...)`, `g.flatten()`) returns `g` itself where on the original it returned a new
tensor: a write through the result then lands in the tensor backward returns, and the values
differ (`h = g.contiguous(); h.mul_(2); return g` returns 1s before the copy and 2s after it).
Branches on `is_contiguous()` or `stride()` change the same way. Views (`view`, `t`, `[i]`) and
conversions that keep dtype and device behave alike on both, so they are not layout reads.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.contract import ContractView
from ..analysis.flow import MethodFlow
from ..analysis.names import ImportTable

LAYOUT_METHODS = frozenset(
    {
        "contiguous",
        "reshape",
        "reshape_as",
        "flatten",
        "is_contiguous",
        "is_non_overlapping_and_dense",
        "stride",
        "storage_offset",
        "data_ptr",
        "untyped_storage",
        "storage",
    }
)
LAYOUT_FUNCTIONS = frozenset({"torch.reshape", "torch.flatten"})
NOTE = (
    "backward reads the gradient's layout (`contiguous`, `reshape`, `stride`, ...): on the "
    "stride-0 gradient of `out.sum()` the copy is dense, so that code takes another path"
)


def reads_layout(
    flow: MethodFlow, contract: ContractView, imports: ImportTable, gradient: str
) -> bool:
    """Whether any call of the backward asks the gradient `gradient`, or a tensor that may
    share its storage, for its layout, or makes it contiguous."""
    roots = {gradient}
    for site in flow.calls:
        func = site.node.func
        subject: cst.BaseExpression | None = None
        if isinstance(func, cst.Attribute) and func.attr.value in LAYOUT_METHODS:
            subject = func.value
        elif imports.resolve(func) in LAYOUT_FUNCTIONS and site.node.args:
            subject = site.node.args[0].value
        if subject is not None and contract.alias_of(subject, flow, site.order, roots, {}):
            return True
    return False
