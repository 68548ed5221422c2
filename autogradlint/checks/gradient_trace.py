"""Which incoming gradient a backward's expression derives from, and which layout or copy guard
it went through on the way: the tracing AGL201/AGL202 judge kernel calls by and AGL204 judges
`.view(...)` by (one tracer, so the two families can never disagree on what is guarded)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import libcst as cst

from ..analysis.aliasing import ALIASING_METHODS
from ..analysis.flow import MethodFlow
from ..analysis.names import dotted
from .common import keyword

ALIASING_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data"})
# Operators that ATen computes element by element (TensorIterator: the result keeps the
# operand's memory layout); `@` makes a fresh contiguous result.
_ELEMENTWISE = (cst.Multiply, cst.Divide, cst.Add, cst.Subtract, cst.Power, cst.FloorDivide)


@dataclass(frozen=True)
class GradState:
    """A value derived from a gradient, and which guards it went through."""

    name: str
    read_safe: bool  # dense row-major: `.contiguous()` or clone(memory_format=contiguous_format)
    write_safe: bool  # a private copy: any `.clone()`
    root: str = ""  # the gradient parameter it comes from
    # `g.data_ptr()`: the raw address, no strides with it: whatever reads through it reads the
    # memory as it lies (a CuPy kernel launch, ctypes), whoever the callee is
    pointer: bool = False


# `origin(expr, flow, order)`: the state of a tracked tensor that is no parameter, or None
Origin = Callable[[cst.BaseExpression, MethodFlow, int], "GradState | None"]


class GradientTrace:
    """One backward's (or one forward's, reached through `apply`) gradient states, memoised:
    a chain of reassignments is walked once, not once per argument that reaches it."""

    def __init__(self, origin: Origin | None = None) -> None:
        # a tracked tensor that is no parameter (AGL203's bindings of `ctx.saved_tensors`),
        # asked first at every step of a trace
        self.origin = origin
        self._states: dict[int, dict[tuple[int, int], GradState | None]] = {}
        # the parameters of a forward `Other.apply(g, ...)` hands gradients to, guarded as far
        # as they were when handed (empty outside such a forward)
        self.handed: dict[str, GradState] = {}

    def forget(self, flow: MethodFlow) -> None:
        """Trace `flow` afresh: another `apply` hands its forward other states."""
        self._states.pop(id(flow), None)

    def state(
        self,
        expr: cst.BaseExpression,
        flow: MethodFlow,
        grads: set[str],
        order: int,
        depth: int = 0,
    ) -> GradState | None:
        """What gradient `expr` is derived from at `order`, or None."""
        key = (id(expr), order)
        memo = self._states.setdefault(id(flow), {})
        if key not in memo:
            memo[key] = self._trace(expr, flow, grads, order, depth)
        return memo[key]

    def _trace(
        self,
        expr: cst.BaseExpression,
        flow: MethodFlow,
        grads: set[str],
        order: int,
        depth: int = 0,
    ) -> GradState | None:
        if depth > 20:
            return None
        if self.origin is not None and (found := self.origin(expr, flow, order)) is not None:
            return found
        if isinstance(expr, cst.Name):
            if (definition := flow.definition_before(expr.value, order)) is None:
                return None
            if definition.kind == "param":
                if expr.value not in grads:
                    return None
                given = self.handed.get(expr.value)
                safe = (given.read_safe, given.write_safe) if given else (False, False)
                return GradState(expr.value, *safe, expr.value)
            value = definition.expression
            if value is None or definition.kind == "with":
                return None
            inner = self.state(value, flow, grads, definition.order, depth + 1)
            return None if inner is None else replace(inner, name=expr.value)
        if isinstance(expr, cst.StarredElement):
            return self.state(expr.value, flow, grads, order, depth + 1)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _ELEMENTWISE):
            # `g * scale`: a fresh tensor (a write into it harms no one), laid out as ATen's
            # TensorIterator lays out its result: like `g`, so a transposed `g` gives a
            # transposed product (tiny-cuda-nn's `doutput * loss_scale`)
            for side in (expr.left, expr.right):
                found = self.state(side, flow, grads, order, depth + 1)
                if found is not None:
                    # `ptr + offset` still points into the gradient's own memory
                    return found if found.pointer else replace(found, write_safe=True)
            return None
        if isinstance(expr, cst.IfExp):
            # `dQ.clone() if not dQ.is_contiguous else dQ`: either branch may be the value,
            # so it is guarded only as far as both are.
            states = [
                self.state(branch, flow, grads, order, depth + 1)
                for branch in branches_not_none(expr)
            ]
            known = [found for found in states if found is not None]
            if not known:
                return None
            return GradState(
                known[0].name,
                all(found.read_safe for found in known),
                all(found.write_safe for found in known),
                known[0].root,
            )
        if isinstance(expr, cst.Subscript):
            return self.state(expr.value, flow, grads, order, depth + 1)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in ALIASING_ATTRIBUTES:
                return self.state(expr.value, flow, grads, order, depth + 1)
            return None
        if isinstance(expr, (cst.Tuple, cst.List)):
            for element in expr.elements:
                found = self.state(element.value, flow, grads, order, depth + 1)
                if found is not None and not (found.read_safe and found.write_safe):
                    return found
            return None
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            inner = self.state(expr.func.value, flow, grads, order, depth + 1)
            if inner is None:
                return None
            if method == "contiguous":
                return GradState(inner.name, True, inner.write_safe, inner.root)
            if method == "clone":
                fmt = dotted(keyword(expr, "memory_format") or cst.Name("x")) or ""
                dense = fmt.endswith("contiguous_format")
                return GradState(inner.name, inner.read_safe or dense, True, inner.root)
            if method in ALIASING_METHODS:
                return inner
            if method in ("data_ptr", "const_data_ptr"):
                return replace(inner, pointer=True)
        return None


def branches_not_none(expr: cst.IfExp) -> list[cst.BaseExpression]:
    """The branches of `expr` that may hold a tensor: in `g if g is None else g.contiguous()`
    (FIX-B1's own form) the first branch is taken only when `g` is None."""
    test = expr.test
    if (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
        and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot))
    ):
        tested = dotted(test.left)
        none_branch = expr.body if isinstance(test.comparisons[0].operator, cst.Is) else expr.orelse
        if tested is not None and dotted(none_branch) == tested:
            return [expr.orelse if none_branch is expr.body else expr.body]
    return [expr.body, expr.orelse]
