"""Evidence that a forward input is a tensor, read from backward: a gradient for it.

autograd accepts a gradient other than None only at the position of a tensor input: for any
other input it raises "returned a gradient different than None at position k, but the
corresponding forward input was not a Variable". So a backward that returns, at an input's
position, a value that cannot be None (arithmetic, or an incoming gradient as is) says that
input is a tensor, as an annotation would.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.contract import ContractView, ForwardInputs, is_tensor_container_annotation
from ..analysis.facts import ClassInfo
from ..analysis.flow import MethodFlow
from ..analysis.names import dotted
from ..analysis.summaries import Summaries


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


def inherited_forwards(
    contract: ContractView, unread_there: bool = False
) -> Iterator[tuple[ClassInfo, cst.FunctionDef, ForwardInputs, set[str]]]:
    """The classes of this file with their own backward and a forward of another module: each
    with that backward, forward as read, and the inputs only this backward proves tensors
    (the other file reports what it can prove itself; a class with none is left out).
    `unread_there`: a forward whose own class has no backward is judged here, by this
    backward's reads, for every input known a tensor (its file has no reads to judge by)."""
    for info in contract.classes():
        backward = info.methods.get("backward")
        forward = contract.method(info, "forward")
        if backward is None or "forward" in info.methods or forward is None:
            continue
        if not contract.is_foreign(forward):
            continue  # this file's: checked with the class that defines it
        seen = contract.forward_of(info, forward)
        proven = gradient_evidence(contract, info, seen.flow) - seen.tensors
        if unread_there and contract.base_method(info, "backward") is None:
            proven |= seen.tensors | {
                p.name.value
                for p in seen.inputs
                if p.annotation is not None
                and is_tensor_container_annotation(p.annotation.annotation)
            }
        if proven:
            yield info, backward, seen, proven


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


def picked_compiled(call: cst.Call, flow: MethodFlow, summaries: Summaries) -> bool:
    """`fw = get_fn("PoolingForward", x)` then `fw(x, ...)`: a local every definition of which
    is a project function returning `getattr(<compiled module>, name + ...)`, so the call
    runs a compiled kernel (its results are what the kernel made)."""
    if not isinstance(call.func, cst.Name):
        return False
    definitions = flow.defs.get(call.func.value, ())
    if not definitions:
        return False
    for definition in definitions:
        value = definition.expression
        if definition.kind != "assign" or not isinstance(value, cst.Call):
            return False
        helper = dotted(value.func)
        found = summaries.function(helper) if helper is not None else None
        summary = summaries.summary(*found) if found is not None else None
        if summary is None or summary.returns_member is None:
            return False
    return True
