"""AGL401: backward returns as many gradients as forward has inputs."""

from __future__ import annotations

import libcst as cst

from ..analysis.contract import params
from ..analysis.facts import ClassInfo
from ..analysis.flow import MethodFlow
from ..analysis.helper_effects import effects_of_call
from ..analysis.names import dotted
from ..analysis.source_text import code_of
from .base import Check
from .gates import function_gate
from .reads import Reads


class GradientCount(Check):
    """AGL401 on every return of every Function's backward."""

    codes = ("AGL401",)
    gate = function_gate(custom_ops=True)
    reads = Reads(functions=True, custom_ops=True)

    def run(self) -> None:
        contract = self.ctx.contract()
        for info in contract.classes():
            backward = info.methods.get("backward")
            forward = contract.method(info, "forward")
            if backward is None and "forward" in info.methods:
                # its own forward, a backward it inherits (from this file or another): held
                # to each other, reported at the forward that no longer fits
                backward = contract.method(info, "backward")
                if backward is not None and forward is not None:
                    self.ctx.enter(info.node)
                    self._class(info, forward, backward, at=forward)
                continue
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

    def _class(
        self,
        info: ClassInfo,
        forward: cst.FunctionDef,
        backward: cst.FunctionDef,
        at: cst.FunctionDef | None = None,
    ) -> None:
        """Each return of `backward` against `forward`'s inputs; reported at the return, or,
        for an inherited backward, once at the class's own forward (`at`)."""
        signature = forward.params
        star = isinstance(signature.star_arg, cst.Param)
        old_style = self.ctx.contract().method(info, "setup_context") is None
        if signature.kwonly_params and not old_style:
            return  # apply binds them and passes them on: another rule's matter
        # Keyword-only parameters are no inputs of the old style: `apply` binds a keyword only
        # to a positional parameter (AGL410), so they keep their defaults, and torch expects a
        # gradient per positional input (shown by tests/oracle, K12).
        if _never_differentiable(self.ctx.flow(forward)):
            return  # no output requires grad: backward never runs (semantics D1.4)
        inputs = params(forward)
        if old_style:
            inputs = inputs[1:]  # forward's first parameter is the ctx
        total = len(inputs)
        required = sum(1 for p in inputs if p.default is None)
        if not old_style and not star:
            # the setup_context style: apply binds forward's defaults, so torch expects a
            # gradient for every parameter, passed or not (shown by tests/oracle, K13)
            required = total
        # torch expects one gradient per argument apply receives (shown by tests/oracle, K13):
        # when every apply call of the file passes the same number, that is the count (a
        # default passed or omitted, a *args forward); a gradient past it must be None
        passed = self.ctx.apply_sites.count(info.name) if old_style else None
        if passed is not None and (passed < required or (passed > total and not star)):
            passed = None  # AGL410's call: not this rule's count
        if passed is None and star:
            return  # *args forwards: the count is not knowable
        backward_flow = self.ctx.flow(backward)
        grad_params = set(backward_flow.params[1:])
        for ret, _order in backward_flow.returns:
            count, extras_none = gradient_count(ret.value, total)
            packed = False
            if count is None:
                # a helper of backward's own file, wherever that is
                home = self.ctx.contract().foreign_paths.get(id(backward))
                count, extras_none = self._packed(ret.value, total, home)
                packed = count is not None
            if count is None and one_value(ret.value, backward_flow):
                count, extras_none = 1, True
            if count is None:
                continue
            if passed is not None:
                value = ret.value
                assert value is not None  # counted: a value was returned
                elements = tuple_elements(value)
                if packed:
                    assert isinstance(value, cst.Call)  # `_pack(gx, g)`: what it packs
                    elements = [arg.value for arg in value.args]
                past = (elements if elements is not None else [value])[passed:]
                wrong = (
                    count < passed
                    or any(_surely_gradient(e, grad_params) for e in past)
                    or (not star and count > total and not extras_none)
                )
                expected = str(passed)
            else:
                wrong = count < required or (count > total and not extras_none)
                expected = str(total) if required == total else f"{required} to {total}"
            if wrong:
                shown = expected.split(" ")[-1]
                self.report(
                    "AGL401",
                    ret if at is None else at,
                    anchor=None if at is None else at.name,
                    cls=info.name,
                    expected=expected,
                    actual=count,
                    error=f"function {info.name}Backward returned an incorrect number of "
                    f"gradients (expected {shown}, got {count})",
                    counting="",
                    slots=slots([p.name.value for p in inputs], ret.value),
                )
                if at is not None:
                    return  # one finding at the forward, however many returns

    def _packed(
        self, value: cst.BaseExpression | None, total: int, path: str | None = None
    ) -> tuple[int | None, bool]:
        """`return _pack(gx, gw, g)` where the helper returns `tuple(args)` of its `*args`:
        as many gradients as the call passes (and whether the extras are all None)."""
        if not isinstance(value, cst.Call) or any(arg.star or arg.keyword for arg in value.args):
            return None, False
        found = effects_of_call(self.ctx.summaries, dotted(value.func), path)
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


def _never_differentiable(forward: MethodFlow) -> bool:
    """Whether every output forward returns is marked with `ctx.mark_non_differentiable` (or
    is plainly no tensor: a literal, None): then no output requires grad and backward never
    runs, whatever it returns (semantics D1.4)."""
    if not forward.params or not forward.returns:
        return False
    marker = f"{forward.params[0]}.mark_non_differentiable"
    marked = {
        arg.value.value
        for site in forward.calls
        if not site.in_nested_def and dotted(site.node.func) == marker
        for arg in site.node.args
        if not arg.star and isinstance(arg.value, cst.Name)
    }
    if not marked:
        return False
    for ret, _order in forward.returns:
        value = ret.value
        elements = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        for element in elements:
            if element is None or isinstance(element, (cst.Integer, cst.Float)):
                continue
            if isinstance(element, cst.Name) and (
                element.value in marked or element.value in ("None", "True", "False")
            ):
                continue
            return False
    return True


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


def _surely_gradient(value: cst.BaseExpression, grad_params: set[str]) -> bool:
    """A returned value that cannot be None: arithmetic, or an incoming gradient itself (a
    name assigned None on some path, `grad_b`, may be None: not counted)."""
    if isinstance(value, cst.BinaryOperation):
        return True
    return isinstance(value, cst.Name) and value.value in grad_params


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


def one_value(value: cst.BaseExpression | None, flow: MethodFlow) -> bool:
    """Whether a returned name holds one value, never a tuple of gradients: an incoming
    gradient never rebound, or a name every binding of which is arithmetic (`grad_x = g * w`;
    `grad_x += ...` keeps it one). A name bound to anything else (a call, an unpacking, a
    tuple) may hold a tuple, so its count is unknown (shown by tests/oracle, K10)."""
    if not isinstance(value, cst.Name):
        return False
    definitions = flow.defs.get(value.value, [])
    if not definitions:
        return False
    if all(d.kind == "param" for d in definitions):
        return value.value in flow.params[1:]  # a gradient (the vararg is a tuple)
    assigned = False
    for definition in definitions:
        if definition.kind == "augassign":
            continue
        expression = definition.expression
        if definition.kind != "assign" or not _arithmetic(expression):
            return False
        assigned = True
    return assigned


def _arithmetic(expr: cst.BaseExpression | None) -> bool:
    """An operator expression with no tuple in it (`(gx,) + (None,)` is a tuple)."""
    return isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)) and not _has_tuple(expr)


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
