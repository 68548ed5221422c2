"""Where a value in a backward body comes from: which grad mode built it, which tensors feed it."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .flow import DEFAULT, DISABLE, ENABLE, UNKNOWN, MethodFlow
from .names import ImportTable

# Calls that only select or repackage values: they neither build graph nor cut it.
SELECTION_METHODS = frozenset(
    {"pop", "get", "values", "items", "keys", "index", "append", "popleft", "copy", "setdefault"}
)
DETACHING_METHODS = frozenset({"detach", "detach_"})
PASSTHROUGH_METHODS = frozenset({"requires_grad_", "retain_grad"})
DETACHING_FUNCTIONS = frozenset({"detach_variable"})
# Builtins that repackage their arguments: the values inside keep their graph.
CONTAINER_BUILTINS = frozenset(
    {"tuple", "list", "sorted", "reversed", "filter", "iter", "next", "zip", "enumerate", "set"}
)
EXTERNAL = "external"  # a graph built outside this body (held on ctx, a parameter, a global)
# Tensor methods that compute a new value (or view) from their receiver: with grad mode off,
# what they return has no graph. Unknown methods and helpers may switch grad mode on inside.
COMPUTING_METHODS = frozenset(
    {
        "abs",
        "add",
        "amax",
        "amin",
        "bmm",
        "clamp",
        "clone",
        "contiguous",
        "cos",
        "cumsum",
        "div",
        "double",
        "exp",
        "expand",
        "expand_as",
        "flatten",
        "float",
        "gather",
        "half",
        "index_select",
        "log",
        "log_softmax",
        "masked_fill",
        "matmul",
        "max",
        "mean",
        "min",
        "mm",
        "mul",
        "narrow",
        "neg",
        "norm",
        "permute",
        "pow",
        "prod",
        "relu",
        "reshape",
        "reshape_as",
        "rsqrt",
        "select",
        "sigmoid",
        "sin",
        "softmax",
        "sqrt",
        "square",
        "squeeze",
        "sub",
        "sum",
        "t",
        "tanh",
        "to",
        "transpose",
        "unsqueeze",
        "view",
        "view_as",
        "where",
    }
)
# torch functions whose results can carry a graph even with grad mode off.
_GRAPH_MAKERS = (
    "torch.autograd",
    "torch.func",
    "torch.utils.checkpoint",
    "torch.enable_grad",
    "torch.set_grad_enabled",
    "torch.nn.Parameter",
    "torch.nn.parameter",
)

# Source tags
SAVED, CTX, GRAD, DETACHED, PRIVATE_LEAF, OTHER = (
    "saved",
    "ctx",
    "grad",
    "detached",
    "private-leaf",
    "other",
)


@dataclass(frozen=True)
class Binding:
    """What a helper's parameter received at its call from backward."""

    producers: frozenset[str]
    sources: frozenset[str]


class Provenance:
    """Answers two questions about expressions of one method flow (memoised, cycle-safe)."""

    def __init__(
        self,
        flow: MethodFlow,
        imports: ImportTable,
        bound: dict[str, Binding] | None = None,
    ) -> None:
        """`bound` is set for a helper called from backward: what each parameter received at
        the call, as the caller's provenance sees it (the ctx is whichever got the ctx)."""
        self.flow = flow
        self.imports = imports
        self.bound = bound
        if bound is None:
            self.ctx_name = flow.params[0] if flow.params else None
            self.grad_names = set(flow.params[1:])
            if flow.vararg:
                self.grad_names.add(flow.vararg)
        else:
            self.ctx_name = next((n for n, b in bound.items() if b.sources == {CTX}), None)
            self.grad_names = set()

    # --- which grad mode ran the operation that finally produced a value -----------------
    def producers(
        self, expr: cst.BaseExpression, order: int, mode: str, depth: int = 0
    ) -> set[str]:
        if depth > 25:
            return {UNKNOWN}
        recurse = self.producers
        if isinstance(expr, cst.Name):
            definition = self.flow.definition_before(expr.value, order)
            if definition is None or definition.value is None:
                if definition is not None and self.bound and expr.value in self.bound:
                    return set(self.bound[expr.value].producers)
                return {EXTERNAL}
            if definition.kind == "with":
                return {UNKNOWN}
            if definition.kind == "augassign":
                return {definition.mode}
            value = definition.expression
            assert value is not None  # neither a parameter nor an augmented assignment
            return recurse(value, definition.order, definition.mode, depth + 1)
        if isinstance(expr, cst.Attribute):
            if self._is_ctx(expr.value):
                return {EXTERNAL}
            return recurse(expr.value, order, mode, depth + 1)
        if isinstance(expr, cst.Subscript):
            return recurse(expr.value, order, mode, depth + 1)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            out: set[str] = set()
            for element in expr.elements:
                out |= recurse(element.value, order, mode, depth + 1)
            return out or {EXTERNAL}
        if isinstance(expr, cst.IfExp):
            return recurse(expr.body, order, mode, depth + 1) | recurse(
                expr.orelse, order, mode, depth + 1
            )
        if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
            return {mode}
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return recurse(expr.for_in.iter, order, mode, depth + 1)  # a selection
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute):
                method = func.attr.value
                if method in SELECTION_METHODS or method in PASSTHROUGH_METHODS:
                    return recurse(func.value, order, mode, depth + 1)
                if method in DETACHING_METHODS:
                    return {DETACHED}
                resolved = self.imports.resolve(func) or ""
                if resolved.startswith("torch.") or not self._is_module_like(func.value):
                    return {mode}
            resolved = self.imports.resolve(func) or ""
            if resolved.rsplit(".", 1)[-1] in DETACHING_FUNCTIONS:
                return {DETACHED}
            if resolved.startswith("torch."):
                return {mode}
            if resolved == "getattr" and expr.args and self._is_ctx(expr.args[0].value):
                return {EXTERNAL}  # `getattr(ctx, "tail", None)` reads ctx like `ctx.tail`
            if resolved in CONTAINER_BUILTINS:
                out = set()
                for arg in expr.args:
                    out |= recurse(arg.value, order, mode, depth + 1)
                return out or {EXTERNAL}
            # An unknown helper: if it is handed a graph built under enable_grad it most likely
            # selects from it (`filter_out(out, ...)`); otherwise it computes in this mode.
            inner: set[str] = set()
            for arg in expr.args:
                inner |= recurse(arg.value, order, mode, depth + 1)
            if ENABLE in inner:
                return inner
            return {mode}
        return {EXTERNAL}

    # --- whether a value is certainly without a graph when grad mode is off ---------------
    def graphless(self, expr: cst.BaseExpression, order: int, depth: int = 0) -> bool:
        """True only when `expr` is computed here, by arithmetic, torch functions or tensor
        methods, from whatever inputs: with grad mode off such a value never requires grad.
        False for anything that may be a leaf requiring grad (a saved tensor, a parameter, a
        factory given `requires_grad`) or come from code that may enable grad itself."""
        if depth > 25:
            return False
        recurse = self.graphless
        if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison)):
            return True
        if isinstance(expr, cst.Name):
            definition = self.flow.definition_before(expr.value, order)
            if definition is None or definition.kind != "assign":
                return False
            value = definition.expression
            assert value is not None  # an assignment binds an expression
            return recurse(value, definition.order, depth + 1)
        if isinstance(expr, cst.Subscript):
            return recurse(expr.value, order, depth + 1)
        if isinstance(expr, cst.IfExp):
            return recurse(expr.body, order, depth + 1) and recurse(expr.orelse, order, depth + 1)
        if isinstance(expr, cst.Call):
            if any(
                arg.keyword is not None and arg.keyword.value == "requires_grad"
                for arg in expr.args
            ):
                return False
            func = expr.func
            resolved = self.imports.resolve(func) or ""
            if resolved.startswith("torch."):
                return not resolved.startswith(_GRAPH_MAKERS)
            if isinstance(func, cst.Attribute) and not self._is_module_like(func.value):
                if self._is_ctx(func.value):
                    return False  # a function held on ctx (a checkpoint's run_function)
                return func.attr.value in COMPUTING_METHODS
        return False

    # --- which tensors feed a value (stopping at detach) ----------------------------------
    def sources(self, expr: cst.BaseExpression, order: int, depth: int = 0) -> set[str]:
        if depth > 25:
            return {OTHER}
        recurse = self.sources
        if isinstance(expr, cst.Name):
            definition = self.flow.definition_before(expr.value, order)
            if definition is None:
                return {OTHER}
            if definition.kind == "param":
                if self.bound is not None and expr.value in self.bound:
                    return set(self.bound[expr.value].sources)
                if expr.value == self.ctx_name:
                    return {CTX}
                return {GRAD} if expr.value in self.grad_names else {OTHER}
            if definition.value is None or definition.kind == "with":
                return {OTHER}
            if definition.kind == "augassign":
                return recurse(cst.Name(expr.value), definition.order, depth + 1)
            value = definition.expression
            assert value is not None  # neither a parameter nor an augmented assignment
            found = recurse(value, definition.order, depth + 1)
            # `x.requires_grad_()` as a statement turns x into a private leaf when x was detached.
            return found
        if isinstance(expr, cst.Attribute):
            if self._is_ctx(expr.value):
                attr = expr.attr.value
                return {SAVED} if attr in ("saved_tensors", "saved_variables") else {CTX}
            return recurse(expr.value, order, depth + 1)
        if isinstance(expr, cst.Subscript):
            return recurse(expr.value, order, depth + 1)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            out: set[str] = set()
            for element in expr.elements:
                out |= recurse(element.value, order, depth + 1)
            return out
        if isinstance(expr, cst.IfExp):
            return recurse(expr.body, order, depth + 1) | recurse(expr.orelse, order, depth + 1)
        if isinstance(expr, cst.BinaryOperation):
            return recurse(expr.left, order, depth + 1) | recurse(expr.right, order, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return recurse(expr.expression, order, depth + 1)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute):
                method = func.attr.value
                if method in DETACHING_METHODS:
                    return {DETACHED}
                if method == "requires_grad_":
                    inner = recurse(func.value, order, depth + 1)
                    return {PRIVATE_LEAF} if DETACHED in inner else inner
                # `ctx.run_function(...)`: the callee is a function held on ctx, not a tensor.
                out = set() if self._is_ctx(func.value) else recurse(func.value, order, depth + 1)
            else:
                resolved = self.imports.resolve(func) or ""
                if resolved.rsplit(".", 1)[-1] in DETACHING_FUNCTIONS:
                    return {DETACHED}
                out = set()
            for arg in expr.args:
                out |= recurse(arg.value, order, depth + 1)
            return out or {OTHER}
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self._comprehension_sources(expr, order, depth)
        return {OTHER}

    def _comprehension_sources(
        self, expr: cst.ListComp | cst.GeneratorExp | cst.SetComp, order: int, depth: int
    ) -> set[str]:
        out = self.sources(expr.for_in.iter, order, depth + 1)
        element = expr.elt
        if isinstance(element, cst.Call) and isinstance(element.func, cst.Attribute):
            chain = _method_chain(element)
            if "detach" in chain:
                return {PRIVATE_LEAF} if "requires_grad_" in chain else {DETACHED}
        return out

    def _is_ctx(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Name) and expr.value == self.ctx_name

    def _is_module_like(self, expr: cst.BaseExpression) -> bool:
        """`torch.nn.functional`, an imported module, or a class: calls on it are functions."""
        if isinstance(expr, cst.Name):
            return self.imports.is_imported(expr.value) or expr.value[:1].isupper()
        if isinstance(expr, cst.Attribute):
            return self._is_module_like(expr.value)
        return False


def _method_chain(call: cst.Call) -> list[str]:
    names: list[str] = []
    expr: cst.BaseExpression = call
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        names.append(expr.func.attr.value)
        expr = expr.func.value
    return names


__all__ = [
    "Binding",
    "CTX",
    "DEFAULT",
    "DETACHED",
    "DISABLE",
    "ENABLE",
    "EXTERNAL",
    "GRAD",
    "OTHER",
    "PRIVATE_LEAF",
    "SAVED",
    "UNKNOWN",
    "Provenance",
]
