"""Evidence that a forward input is a tensor, read from backward: a gradient for it.

autograd accepts a gradient other than None only at the position of a tensor input: for any
other input it raises "returned a gradient different than None at position k, but the
corresponding forward input was not a Variable". So a backward that returns, at an input's
position, a value that cannot be None (arithmetic, or an incoming gradient as is) says that
input is a tensor, as an annotation would.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.contract import ContractView
from ..analysis.facts import ClassInfo
from ..analysis.flow import MethodFlow


def gradient_evidence(contract: ContractView, info: ClassInfo, forward: MethodFlow) -> set[str]:
    """forward's inputs that backward (found as the class resolves it) returns a certain
    gradient for."""
    backward = contract.method(info, "backward")
    if backward is None:
        return set()
    seen = contract.forward_of(info, forward.function)
    if seen.vararg is not None:
        return set()  # positions past the named inputs are unknowable
    inputs = [p.name.value for p in seen.inputs]
    flow = contract.flow(backward)
    incoming = set(flow.params[1:])
    found: set[str] = set()
    for ret, _order in flow.returns:
        value = ret.value
        if value is None:
            continue
        if isinstance(value, cst.Tuple):
            elements = value.elements
            if any(isinstance(e, cst.StarredElement) for e in elements):
                continue
            gradients = [e.value for e in elements]
        elif len(inputs) == 1:
            gradients = [value]
        else:
            continue
        for name, gradient in zip(inputs, gradients, strict=False):
            if _never_none(gradient, incoming):
                found.add(name)
    return found


def _never_none(expr: cst.BaseExpression, incoming: set[str]) -> bool:
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
        return True
    return isinstance(expr, cst.Name) and expr.value in incoming
