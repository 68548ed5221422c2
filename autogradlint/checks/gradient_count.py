"""AGL401: backward returns as many gradients as forward has inputs."""

from __future__ import annotations

import libcst as cst

from ..analysis.contract import params
from ..analysis.facts import ClassInfo
from ..analysis.helper_effects import effects_of_call
from ..analysis.names import dotted
from ..analysis.source_text import code_of
from .base import Check


class GradientCount(Check):
    """AGL401 on every return of every Function's backward."""

    def run(self) -> None:
        contract = self.ctx.contract()
        for info in contract.classes():
            backward = info.methods.get("backward")
            forward = contract.method(info, "forward")
            if backward is not None and forward is not None:
                self.ctx.enter(info.node)
                self._class(info, forward, backward)
        for op in self.ctx.facts.custom_ops:
            if op.backward is None:
                continue
            inputs: list[str] | None = None
            if op.schema is not None:
                signature = op.schema.params
                if not isinstance(signature.star_arg, cst.Param) and not signature.kwonly_params:
                    inputs = [p.name.value for p in params(op.schema)]
            elif op.declared is not None:
                inputs = list(op.declared)  # from the schema string the op is defined with
            if inputs is not None:
                self.ctx.enter(op.subject)
                self._custom_op(op.op, op.qualified, inputs, op.backward)

    def _custom_op(
        self, name: str, qualified: str, inputs: list[str], backward: cst.FunctionDef
    ) -> None:
        """A custom op's backward returns a gradient (or None) for every input of the op,
        defaults included: fewer raises at the first backward (D11.1)."""
        total = len(inputs)
        # PyTorch's name for the node, and its counts, which include one hidden input (D11.1)
        generated = qualified.replace("::", "_").replace(".", "_") if qualified else "<ns>_<op>"
        for ret, _order in self.ctx.flow(backward).returns:
            count, _extras = gradient_count(ret.value, total)
            if count is not None and count < total:
                self.report(
                    "AGL401",
                    ret,
                    cls=name,
                    expected=str(total),
                    actual=count,
                    error=f"function GeneratedBackwardFor_{generated}_defaultBackward returned "
                    f"an incorrect number of gradients (expected {total + 1}, got {count + 1})",
                    counting=HIDDEN_INPUT,
                    slots=slots(inputs, ret.value),
                )

    def _class(self, info: ClassInfo, forward: cst.FunctionDef, backward: cst.FunctionDef) -> None:
        signature = forward.params
        if isinstance(signature.star_arg, cst.Param) or signature.kwonly_params:
            return  # *args forwards or keyword-only inputs: the count is not knowable
        inputs = params(forward)
        if self.ctx.contract().method(info, "setup_context") is None:
            inputs = inputs[1:]  # forward's first parameter is the ctx
        total = len(inputs)
        required = sum(1 for p in inputs if p.default is None)
        for ret, _order in self.ctx.flow(backward).returns:
            count, extras_none = gradient_count(ret.value, total)
            if count is None:
                count, extras_none = self._packed(ret.value, total)
            if count is None:
                continue
            if count < required or (count > total and not extras_none):
                expected = str(total) if required == total else f"{required} to {total}"
                shown = expected.split(" ")[-1]
                self.report(
                    "AGL401",
                    ret,
                    cls=info.name,
                    expected=expected,
                    actual=count,
                    error=f"function {info.name}Backward returned an incorrect number of "
                    f"gradients (expected {shown}, got {count})",
                    counting="",
                    slots=slots([p.name.value for p in inputs], ret.value),
                )

    def _packed(self, value: cst.BaseExpression | None, total: int) -> tuple[int | None, bool]:
        """`return _pack(gx, gw, g)` where the helper returns `tuple(args)` of its `*args`:
        as many gradients as the call passes (and whether the extras are all None)."""
        if not isinstance(value, cst.Call) or any(arg.star or arg.keyword for arg in value.args):
            return None, False
        found = effects_of_call(self.ctx.summaries, dotted(value.func))
        if found is None or not found[0].packs:
            return None, False
        function = found[1]
        named = len(function.args.posonlyargs) + len(function.args.args)
        if named:
            return None, False  # `_pack(ctx, *grads)`: only the starred ones are returned
        extras = all(
            isinstance(arg.value, cst.Name) and arg.value.value == "None"
            for arg in value.args[total:]
        )
        return len(value.args), extras


# Why PyTorch's counts for a custom op are one more on each side than the op's (D11.1):
# torch.library runs the op through a generated autograd.Function whose `apply` gets the op's
# inputs and one more, a metadata object (dispatch keys, keyword-only arguments), and whose
# backward returns what the registered backward returns with a `None` for that object appended.
HIDDEN_INPUT = (
    " PyTorch counts one more on each side: torch.library calls its generated autograd Function"
    " with the op's inputs and one hidden metadata argument, and appends a `None` for it to what"
    " this backward returns."
)


def slots(inputs: list[str], value: cst.BaseExpression | None) -> str:
    """Which returned gradient lands in which input's slot, and any named for another input
    (`dq` in `k`'s slot): what to move, not only how many are missing."""
    elements = tuple_elements(value) if value is not None else None
    if elements is None:
        elements = [value] if value is not None else []
    shown = [code_of(e) for e in elements]
    pairs = [
        f"{name} <- {shown[i] if i < len(shown) else '(nothing)'}" for i, name in enumerate(inputs)
    ]
    pairs += [f"(no input) <- {extra}" for extra in shown[len(inputs) :]]
    out = f" Slot by slot: {', '.join(pairs)}."
    misplaced = [
        f"`{text}` looks like the gradient of `{owner}` but is in the slot of `{inputs[i]}`"
        for i, text in enumerate(shown)
        if (owner := _gradient_of(text, inputs)) is not None
        and (i >= len(inputs) or owner != inputs[i])
    ]
    if misplaced:
        out += " " + "; ".join(misplaced) + "."
    return out


def _gradient_of(text: str, inputs: list[str]) -> str | None:
    """The input a gradient's name says it belongs to: `dq`, `d_q`, `grad_q`, `q_grad`, `gq`."""
    for name in inputs:
        if text in (f"d{name}", f"d_{name}", f"grad_{name}", f"{name}_grad", f"grad{name}"):
            return name
        if len(name) <= 2 and text == f"g{name}":
            return name
    return None


def gradient_count(value: cst.BaseExpression | None, total: int) -> tuple[int | None, bool]:
    """(number of gradients returned, whether those past `total` are all None); None when the
    number depends on runtime values."""
    if value is None:
        return None, True
    elements = tuple_elements(value)
    if elements is not None:
        extras = elements[total:]
        return len(elements), all(isinstance(e, cst.Name) and e.value == "None" for e in extras)
    if _has_tuple(value):
        return None, True  # `(None, None) + grads`: the length depends on runtime values
    if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)) or (
        isinstance(value, cst.Name) and value.value == "None"
    ):
        return 1, True
    return None, True


def tuple_elements(expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The elements of a tuple expression built from literals: `(a,) + (None,) * 3`."""
    if isinstance(expr, cst.Tuple):
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return None
        return [e.value for e in expr.elements]
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Add):
            left, right = tuple_elements(expr.left), tuple_elements(expr.right)
            return None if left is None or right is None else left + right
        if isinstance(expr.operator, cst.Multiply):
            for seq, times in ((expr.left, expr.right), (expr.right, expr.left)):
                items = tuple_elements(seq)
                if items is not None and isinstance(times, cst.Integer):
                    return items * int(times.value)
    return None


def _has_tuple(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Tuple):
        return True
    if isinstance(expr, cst.Call) and dotted(expr.func) in ("tuple", "list"):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return _has_tuple(expr.left) or _has_tuple(expr.right)
    return False
