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
    """forward's inputs that a backward paired with it returns a certain gradient for: the
    class's own (or inherited) backward, or that of a subclass here inheriting this forward."""
    seen = contract.forward_of(info, forward.function)
    if seen.vararg is not None:
        return set()  # positions past the named inputs are unknowable
    # Only inputs every call passes: where a default is not passed, what backward returns in
    # its slot is an extra gradient, not one for a non-tensor (shown by tests/oracle).
    inputs = [p.name.value if p.default is None else "" for p in seen.inputs]
    backwards = [contract.method(info, "backward")]
    if backwards[0] is None:
        backwards = [
            contract.method(other, "backward")
            for other in contract.classes()
            if other is not info and contract.method(other, "forward") is forward.function
        ]
    found: set[str] = set()
    for backward in backwards:
        if backward is not None:
            found |= _returned_for(contract, backward, inputs)
    return found


def _returned_for(contract: ContractView, backward: cst.FunctionDef, inputs: list[str]) -> set[str]:
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
            if name and _never_none(gradient, incoming):
                found.add(name)
    return found


def _never_none(expr: cst.BaseExpression, incoming: set[str]) -> bool:
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
        return True
    return isinstance(expr, cst.Name) and expr.value in incoming
