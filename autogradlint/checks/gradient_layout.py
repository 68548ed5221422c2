"""Whether a backward asks a gradient for its layout: then a private copy is not equivalent.

A copy of the stride-0 gradient of `out.sum()` is dense, so `g.is_contiguous()`, `g.stride()`
or `g.data_ptr()` answer otherwise on the copy, and code that branches on them takes another
path (AGL406's `layout-not-read`). Writes through a method that may copy (`g.contiguous()`) are
`whole-gradient-writes`' (backward_state.py).
"""

from __future__ import annotations

import libcst as cst

from ..analysis.contract import ContractView
from ..analysis.flow import MethodFlow

# `contiguous()`, `reshape()` and `flatten()` alias a gradient of one layout and copy one of
# another: after `g = g.clone()` (dense) they alias where they copied, so a later in-place
# write reaches them (found by tests/differential/sweep.py: `h = g.contiguous(); g.zero_()`).
LAYOUT_METHODS = frozenset(
    {
        "contiguous",
        "reshape",
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


def reads_layout(flow: MethodFlow, contract: ContractView, gradient: str) -> str | None:
    """Why the backward asks the gradient `gradient`, or a tensor that may share its storage,
    for its layout ("`stride()` reads its layout"), or None."""
    roots = {gradient}
    for site in flow.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in LAYOUT_METHODS:
            if contract.alias_of(func.value, flow, site.order, roots, {}):
                return f"`{func.attr.value}()` reads its layout"
    return None
