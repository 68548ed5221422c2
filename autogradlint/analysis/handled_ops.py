"""Which ops a branch of a torch hook handles: `if func is aten.empty_like.default:`.

One reader for every check that asks (AGL301/302 count the handled op called directly as a
redispatch; AGL306 reads the handlers of ops whose caller chooses dtype, device or size), so
they never disagree about what a test selects."""

from __future__ import annotations

import libcst as cst

from .names import dotted

_SELECTING = (cst.Is, cst.Equal, cst.In)
# What `func` is compared through: the overload itself, or its packet (`aten._to_copy`).
_PACKETS = ("", ".overloadpacket", "._overloadpacket")


def op_name(expr: cst.BaseExpression, anchors: tuple[str, ...] = ("aten",)) -> str | None:
    """`unbind` for `aten.unbind.int`, `torch.ops.aten.unbind.int`, `aten.unbind`; with
    `Tensor` among the anchors, `to` for `torch.Tensor.to` too."""
    parts = (dotted(expr) or "").split(".")
    for anchor in anchors:
        if anchor in parts:
            at = parts.index(anchor)
            return parts[at + 1] if at + 1 < len(parts) else None
    return None


def handled_ops(test: cst.BaseExpression, func: str) -> frozenset[str]:
    """The ops whose calls reach the body of `if test:` through a comparison of `func`:
    `func is aten.X.y`, `func == X`, `func in (X, Y)`, `func.overloadpacket == aten.X`, and
    any of them joined by `and` / `or`. A negated test (`not`, `is not`, `!=`, `not in`)
    selects every other op: none is named."""
    if isinstance(test, cst.BooleanOperation):
        return handled_ops(test.left, func) | handled_ops(test.right, func)
    if not isinstance(test, cst.Comparison):
        return frozenset()
    if dotted(test.left) not in {func + packet for packet in _PACKETS}:
        return frozenset()
    names: set[str] = set()
    for target in test.comparisons:
        if not isinstance(target.operator, _SELECTING):
            return frozenset()
        value = target.comparator
        items = (
            [element.value for element in value.elements]
            if isinstance(value, (cst.Tuple, cst.List, cst.Set))
            else [value]
        )
        for item in items:
            # `__torch_function__` is handed the Python callable (`torch.Tensor.to`)
            name = op_name(item, ("aten", "Tensor"))
            if name is not None:
                names.add(name)
    return frozenset(names)
