"""AGL204: a backward `.view(...)`s its incoming gradient (or an alias of it) into a shape that
may merge dims, with no `.contiguous()` before it: a transposed or narrow gradient raises
(semantics B1.7). The fix is `.reshape(...)` (FIX-B3)."""

from __future__ import annotations

import functools

import libcst as cst

from ..analysis.aliasing import ALIASING_METHODS
from ..analysis.contract import mutation
from ..analysis.flow import MethodFlow
from ..analysis.names import dotted
from ..analysis.source_text import code_of
from ..analysis.torch_api import TENSOR_METHODS
from ..edits import Edits, Fix
from ..preconditions import Unproven, verdict
from .base import Check
from .common import BackwardOf, backward_methods, source_of
from .gates import function_gate
from .gradient_trace import ALIASING_ATTRIBUTES, GradientTrace, GradState
from .guard_decorators import unless_guarded
from .reads import Reads

# The view methods and the reshape that takes the same arguments (B1.9: the same view where
# the view works, a copy where it raises).
RESHAPE_OF = {"view": "reshape", "view_as": "reshape_as"}


class GradientViews(Check):
    """AGL204 over every backward: Function classes' and custom ops' alike."""

    codes = ("AGL204",)
    gate = function_gate(b"view", custom_ops=True)
    reads = Reads(functions=True, custom_ops=True)

    def run(self) -> None:
        for info, method in backward_methods(self.ctx.facts):
            self.ctx.enter(info.subject)
            unless_guarded(self.ctx, method, functools.partial(self._method, info, method))

    def _method(self, info: BackwardOf, method: cst.FunctionDef) -> None:
        flow = self.ctx.flow(method)
        grads = set(flow.params[1:])
        if flow.vararg:
            grads.add(flow.vararg)
        if not grads:
            return
        tracer = GradientTrace()
        module = self.ctx.facts.module
        found: list[tuple[int, cst.Call, cst.Attribute, GradState]] = []
        for site in flow.calls:
            call, func = site.node, site.node.func
            if site.in_nested_def or not isinstance(func, cst.Attribute):
                continue
            if func.attr.value not in RESHAPE_OF or not call.args:
                continue
            state = tracer.state(func.value, flow, grads, site.order)
            if state is None or state.read_safe or state.pointer:
                continue
            if _dtype_view(call) or _per_sample(call) or _merges_no_dims(call, func.value, module):
                continue
            if _back_to_own_shape(call, flow, site.order) or _same_rows(call, flow, site.order):
                continue
            found.append((site.order, call, func, state))
        for order, call, func, state in found:
            if any(_derives(func.value, other, flow, order) for _, other, _, _ in found):
                continue  # it views a view flagged already: one finding per chain
            name = func.attr.value
            self.report(
                "AGL204",
                call,
                fix=self._fix(call, func, method, flow),
                shown=source_of(module, call),
                grad=state.root or state.name,
                code=name,
                method=RESHAPE_OF[name],
                cls=info.name,
                evidence=_evidence(state.root or state.name, state.name),
            )

    def _fix(
        self, call: cst.Call, func: cst.Attribute, method: cst.FunctionDef, flow: MethodFlow
    ) -> Fix:
        """FIX-B3: `.view` -> `.reshape`, safe where nothing writes into the result."""
        why = self._written(call, flow)
        unproven = Unproven("AGL204", "result-not-written", why) if why else None
        replacement = RESHAPE_OF[func.attr.value]

        def build(edits: Edits) -> None:
            edits.nodes[id(func.attr)] = lambda _: cst.Name(replacement)

        safety, note = verdict([unproven])
        return Fix(safety, method, build, f"use `.{replacement}(...)`", note)

    def _written(self, call: cst.Call, flow: MethodFlow) -> str | None:
        """Why the view's result may be written into (None: nothing writes into it): an
        in-place statement reaches it, or it is handed to code outside torch."""
        module = self.ctx.facts.module
        for node, order in flow.statements:
            found = mutation(node)
            if found is not None and _derives(found[0], call, flow, order):
                return f"`{source_of(module, found[1])}` writes into it"
        imports = self.ctx.facts.imports
        for site in flow.calls:
            func = site.node.func
            handed = [a for a in site.node.args if _derives(a.value, call, flow, site.order)]
            if not handed:
                continue
            resolved = imports.resolve(func) or dotted(func) or ""
            if resolved.split(".", 1)[0] == "torch":
                if any(a.keyword is not None and a.keyword.value == "out" for a in handed):
                    return f"`{source_of(module, site.node)}` writes into it (`out=`)"
                continue
            head = (dotted(func) or "").split(".", 1)[0]
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in TENSOR_METHODS
                and not imports.is_imported(head)  # `ext.backward(flat)` is the module's
            ):
                if not (func.attr.value.endswith("_") or _has_out(site.node)):
                    continue  # `w.matmul(flat)`: a tensor's method reads it
            shown = code_of(func, module)
            return f"it is handed to `{shown}`, which may write into it"
        return None


def _has_out(call: cst.Call) -> bool:
    return any(a.keyword is not None and a.keyword.value == "out" for a in call.args)


def _unaliased(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` with the views and aliases on top of it taken off: what it shares storage with."""
    for _ in range(32):
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Attribute) and expr.attr.value in ALIASING_ATTRIBUTES:
            expr = expr.value
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ALIASING_METHODS
        ):
            if expr.func.attr.value in RESHAPE_OF:
                return expr  # the view itself: the caller asks whether it is this one
            expr = expr.func.value
        else:
            return expr
    return expr


def _derives(expr: cst.BaseExpression, view: cst.Call, flow: MethodFlow, order: int) -> bool:
    """Whether `expr` at `order` may share storage with the result of `view`."""
    for _ in range(32):
        base = _unaliased(expr)
        if base is view:
            return True
        if isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute):
            if base.func.attr.value in RESHAPE_OF:
                expr = base.func.value  # a view of a view of it
                continue
            return False
        if not isinstance(base, cst.Name):
            return False
        definition = flow.definition_before(base.value, order)
        if definition is None or definition.expression is None:
            return False
        expr, order = definition.expression, definition.order
    return False


def _dtype_view(call: cst.Call) -> bool:
    """`g.view(torch.int32)`, `g.view(x.dtype)`: a view of the bytes as another dtype, not of
    another shape."""
    if len(call.args) != 1 or call.args[0].star:
        return False
    written = dotted(call.args[0].value) or ""
    return written.endswith("dtype") or (
        written.startswith("torch.") and written.count(".") == 1 and written != "torch.Size"
    )


# Methods that only reshape (or densify) what they are given: a chain of them from a tensor
# leaves a layout that views back into the tensor's own shape (each view merged or split dims
# that were contiguous chunks; a copy is dense).
_SHAPE_ONLY = frozenset(
    {"view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "contiguous", "clone"}
)


def _back_to_own_shape(call: cst.Call, flow: MethodFlow, order: int) -> bool:
    """`dX.view(*shape)` after `shape = dY.shape; dY = dY.reshape(-1, dim); dX = dY`: a value
    reshaped from the gradient, viewed back into the gradient's own shape. Every step merged
    or split contiguous chunks (else reshape copied), so the way back only splits and merges
    what was merged: it never raises (B1.8, B1.9)."""
    assert isinstance(call.func, cst.Attribute)
    root = _reshaped_from(call.func.value, flow, order)
    if root is None or len(call.args) != 1 or call.args[0].keyword is not None:
        return False
    target = call.args[0].value
    if call.func.attr.value == "view_as":
        return _param_at(target, flow, order) == root
    return _shape_of_param(target, flow, order) == root


def _same_rows(call: cst.Call, flow: MethodFlow, order: int) -> bool:
    """`g2.narrow(0, i, n).view_as(x_shard)` after `g2 = g.reshape(-1, H)` and `x_shard` a
    dim-0 chunk of `x.reshape(-1, H)` (DeepSpeed's tiled MLP): both are rows of width `H`, and
    a view between two 2-D shapes of the same width and element count is the same shape: it
    merges no dims (B1.8)."""
    assert isinstance(call.func, cst.Attribute)
    if call.func.attr.value != "view_as" or len(call.args) != 1:
        return False
    mine = _rows_of(call.func.value, flow, order)
    return mine is not None and mine == _rows_of(call.args[0].value, flow, order)


def _rows_of(expr: cst.BaseExpression, flow: MethodFlow, order: int) -> str | None:
    """The width `H`, as written, when `expr` is rows of `t.reshape(-1, H)` / `t.view(-1, H)`:
    that tensor, a dim-0 `narrow`, or a dim-0 `torch.chunk` / `torch.split` piece (also as a
    loop over a list of them)."""
    for _ in range(16):
        if isinstance(expr, cst.Name):
            definition = flow.definition_before(expr.value, order)
            if definition is None or not isinstance(definition.value, cst.BaseExpression):
                return None
            value = definition.value
            loop = definition.kind == "loop"
            if (  # `for i, piece in enumerate(pieces)`
                definition.kind == "unpack"
                and isinstance(definition.node, cst.For)
                and definition.index == 1
                and isinstance(value, cst.Call)
                and dotted(value.func) == "enumerate"
                and value.args
            ):
                loop, value = True, value.args[0].value
            elif definition.kind not in ("assign", "loop"):
                return None
            expr, order = value, definition.order
            if loop:  # `for piece in pieces`: one of `pieces`
                expr, order = _resolved(expr, flow, order)
                if isinstance(expr, cst.Call) and dotted(expr.func) == "list" and expr.args:
                    expr = expr.args[0].value
                if not _dim0_pieces(expr):
                    return None
                assert isinstance(expr, cst.Call)
                expr = expr.args[0].value
            continue
        if isinstance(expr, cst.Subscript) and _dim0_pieces(expr.value):
            assert isinstance(expr.value, cst.Call)
            expr = expr.value.args[0].value  # `torch.chunk(t, n, dim=0)[i]`
            continue
        if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
            return None
        name = expr.func.attr.value
        args = [a.value for a in expr.args]
        if name == "narrow" and args and _is_zero(args[0]):
            expr = expr.func.value
            continue
        if (
            name in ("reshape", "view")
            and len(args) == 2
            and all(a.keyword is None and not a.star for a in expr.args)
            and isinstance(args[0], cst.UnaryOperation)
            and isinstance(args[0].operator, cst.Minus)
            and isinstance(args[0].expression, cst.Integer)
            and args[0].expression.value == "1"
        ):
            return cst.Module([]).code_for_node(args[1])
        return None
    return None


def _dim0_pieces(expr: cst.BaseExpression) -> bool:
    """`torch.chunk(t, n, dim=0)` / `torch.split(t, n, dim=0)` (dim 0 as the default too)."""
    if not isinstance(expr, cst.Call) or not expr.args or expr.args[0].keyword is not None:
        return False
    if (dotted(expr.func) or "") not in ("torch.chunk", "torch.split"):
        return False
    dims = [a.value for a in expr.args if a.keyword is not None and a.keyword.value == "dim"]
    positional = [a.value for a in expr.args if a.keyword is None]
    dim = dims[0] if dims else positional[2] if len(positional) > 2 else None
    return dim is None or _is_zero(dim)


def _is_zero(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Integer) and expr.value == "0"


def _resolved(
    expr: cst.BaseExpression, flow: MethodFlow, order: int
) -> tuple[cst.BaseExpression, int]:
    """`expr` with local names replaced by what they were assigned (not parameters)."""
    for _ in range(32):
        if not isinstance(expr, cst.Name):
            break
        definition = flow.definition_before(expr.value, order)
        if definition is None or definition.kind != "assign" or definition.expression is None:
            break
        expr, order = definition.expression, definition.order
    return expr, order


def _param_at(expr: cst.BaseExpression, flow: MethodFlow, order: int) -> str | None:
    """The parameter `expr` is, unchanged, at `order`."""
    expr, order = _resolved(expr, flow, order)
    if isinstance(expr, cst.Name):
        definition = flow.definition_before(expr.value, order)
        if definition is not None and definition.kind == "param":
            return expr.value
    return None


def _reshaped_from(
    expr: cst.BaseExpression, flow: MethodFlow, order: int, depth: int = 0
) -> str | None:
    """The parameter `expr` was made from by `_SHAPE_ONLY` methods alone. Of a conditional
    value (`torch.empty_like(dY) if gemma else dY`), the branches that are the gradient must
    all be, and the others fresh tensors of torch's (not the gradient: not this rule's)."""
    for _ in range(32):
        expr, order = _resolved(expr, flow, order)
        if isinstance(expr, cst.IfExp) and depth < 4:
            roots = set()
            for branch in (expr.body, expr.orelse):
                if isinstance(branch, cst.Call) and (dotted(branch.func) or "").startswith(
                    "torch."
                ):
                    continue
                roots.add(_reshaped_from(branch, flow, order, depth + 1))
            return roots.pop() if len(roots) == 1 else None
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _SHAPE_ONLY
        ):
            expr = expr.func.value
            continue
        return _param_at(expr, flow, order)
    return None


def _shape_of_param(expr: cst.BaseExpression, flow: MethodFlow, order: int) -> str | None:
    """The parameter whose `.shape` / `.size()` `expr` is."""
    expr, order = _resolved(expr, flow, order)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "shape":
        return _param_at(expr.value, flow, order)
    if (
        isinstance(expr, cst.Call)
        and not expr.args
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "size"
    ):
        return _param_at(expr.func.value, flow, order)
    return None


def _per_sample(call: cst.Call) -> bool:
    """`g.view(-1, 1, 1)`: the idiom that broadcasts a per-sample gradient over a batch. It
    merges dims only of a gradient of rank 2 or more, and then the code breaks anyway (a
    `[B * N, 1, 1]` tensor does not broadcast against the `[B, ...]` one it scales), so it is
    written for a 1-D gradient, where it only adds size-1 dims (B1.8). An assumption, not a
    proof: the rule's docs say so."""
    values = [arg.value for arg in call.args]
    if len(values) < 2 or any(arg.star or arg.keyword for arg in call.args):
        return False
    first = values[0]
    return (
        isinstance(first, cst.UnaryOperation)
        and isinstance(first.operator, cst.Minus)
        and isinstance(first.expression, cst.Integer)
        and first.expression.value == "1"
        and all(isinstance(v, cst.Integer) and v.value == "1" for v in values[1:])
    )


def _merges_no_dims(call: cst.Call, receiver: cst.BaseExpression, module: cst.Module) -> bool:
    """Whether the view provably merges no dims of `receiver` (B1.8: it never raises): the
    same shape, size-1 dims added, or the last dim split."""
    assert isinstance(call.func, cst.Attribute)
    mine = code_of(receiver, module)

    def same(expr: cst.BaseExpression) -> bool:
        return code_of(expr, module) == mine

    def shape_of(expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """`t` of `t.shape` / `t.size()`."""
        if isinstance(expr, cst.Attribute) and expr.attr.value == "shape":
            return expr.value
        if (
            isinstance(expr, cst.Call)
            and not expr.args
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "size"
        ):
            return expr.func.value
        return None

    if call.func.attr.value == "view_as":
        return same(call.args[0].value)
    args: list[cst.BaseExpression | cst.StarredElement] = []
    if len(call.args) == 1 and isinstance(call.args[0].value, (cst.Tuple, cst.List)):
        for element in call.args[0].value.elements:
            args.append(
                cst.StarredElement(element.value)
                if isinstance(element, cst.StarredElement)
                else element.value
            )
    else:
        for arg in call.args:
            if arg.keyword is not None:
                return False
            args.append(cst.StarredElement(arg.value) if arg.star == "*" else arg.value)
    if len(args) == 1 and not isinstance(args[0], cst.StarredElement):
        owner = shape_of(args[0])
        return owner is not None and same(owner)  # `g.view(g.shape)`
    kept = [a for a in args if not (isinstance(a, cst.Integer) and a.value == "1")]
    starred = [i for i, a in enumerate(kept) if isinstance(a, cst.StarredElement)]
    if len(starred) != 1:
        return False
    spread = kept[starred[0]]
    assert isinstance(spread, cst.StarredElement)
    owner = shape_of(spread.value)
    if owner is not None:
        return same(owner) and len(kept) == 1  # `g.view(1, *g.shape)`: size-1 dims added
    # `g.view(*g.shape[:-1], heads, -1)`: every dim but the last kept, the last one split
    value = spread.value
    if starred[0] != 0 or not isinstance(value, cst.Subscript) or len(value.slice) != 1:
        return False
    owner = shape_of(value.value)
    part = value.slice[0].slice
    return (
        owner is not None
        and same(owner)
        and isinstance(part, cst.Slice)
        and part.lower is None
        and part.step is None
        and isinstance(part.upper, cst.UnaryOperation)
        and isinstance(part.upper.operator, cst.Minus)
        and isinstance(part.upper.expression, cst.Integer)
        and part.upper.expression.value == "1"
    )


def _evidence(root: str, name: str) -> str:
    """The help line's opening: which value is viewed, when it is not the gradient itself."""
    return "" if name == root else f"`{name}` is derived from the gradient `{root}`. "
