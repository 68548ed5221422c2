"""AGL303-AGL305: how __torch_function__ overrides are declared and how they redispatch."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..analysis.control import mentions
from ..analysis.facts import ClassInfo
from ..analysis.names import ImportTable, dotted
from ..analysis.source_text import code_of
from ..analysis.walk import FastVisitor, names_in
from ..edits import Edits, Fix
from ..preconditions import Unproven
from .base import Check
from .common import add_decorator_fix, super_calls
from .gates import Gate, pattern
from .reads import Reads

# Tensor attributes and methods implemented in C: reading them on a subclass instance goes
# through __torch_function__ again (semantics C1.1, C1.3).
TENSOR_ATTRS = frozenset(
    {
        "dtype",
        "device",
        "shape",
        "size",
        "dim",
        "ndim",
        "numel",
        "float",
        "half",
        "bfloat16",
        "double",
        "to",
        "cuda",
        "cpu",
        "type",
        "contiguous",
        "view",
        "reshape",
        "clone",
        "detach",
        "element_size",
        "is_cuda",
        "layout",
        "stride",
        "item",
        "tolist",
        "t",
        "transpose",
        "permute",
        "sum",
        "mean",
        "mul",
        "add",
        "requires_grad",
        "grad",
        "data",
        "numpy",
    }
)
DISABLERS = ("DisableTorchFunctionSubclass", "DisableTorchFunction")


def _decorated(method: cst.FunctionDef, name: str) -> bool:
    return any(dotted(d.decorator) == name for d in method.decorators)


class TorchFunctionHygiene(Check):
    codes = ("AGL303", "AGL304", "AGL305")
    gate = Gate((pattern(b"__torch_function__", rb"def\s+__torch_function__"),), (b"__torch_",))
    reads = Reads(overrides=True)

    def run(self) -> None:
        for info in self.ctx.facts.classes:
            self.ctx.enter(info.node)
            hook = info.methods.get("__torch_function__")
            if hook is None:
                continue
            if "tensor" in info.kinds:
                self._declaration(info, hook)
                if _decorated(hook, "classmethod"):
                    self._recursion(info, hook)
            if any(b.rsplit(".", 1)[-1] == "TorchFunctionMode" for b in info.base_names):
                self._mode_super(info, hook)

    def _declaration(self, info: ClassInfo, hook: cst.FunctionDef) -> None:
        if _decorated(hook, "classmethod") or _decorated(hook, "staticmethod"):
            return
        params = [p.name.value for p in hook.params.params]
        fix = None
        if params and params[0] == "cls":
            # A plain method gets the instance as `cls`, a classmethod the class: the same only
            # when the body never reads `cls` (zero-argument `super()` works either way).
            reads = mentions(hook.body, "cls")
            why = "as a plain method it is the instance, as a classmethod the class"
            fix = add_decorator_fix(
                hook,
                "classmethod",
                unproven=[Unproven("AGL303", "cls-not-read", why) if reads else None],
            )
        self.report("AGL303", hook, anchor=hook.name, fix=fix, cls=info.name)

    def _recursion(self, info: ClassInfo, hook: cst.FunctionDef) -> None:
        params = [p.name.value for p in hook.params.params]
        derived = set(params[3:5])  # cls, func, types, args, kwargs
        imports = self.ctx.facts.imports
        helpers = _HelperReads(self.ctx.methods.function, imports)
        func_name = params[1] if len(params) > 1 else "func"

        class _Visit(_Reads):
            def __init__(self) -> None:
                super().__init__(hook, derived, imports, helpers)
                self.func_branches = 0
                self.bounded = False

            def quiet(self) -> bool:
                return bool(self.disabled or self.func_branches or self.bounded)

            def visit_If(self, node: cst.If) -> None:
                # Inside `if func is ...`, the re-entered call (for the property getter) takes
                # another branch: it re-enters once, it does not recurse without end.
                if _mentions(node.test, {func_name}):
                    self.func_branches += 1

            def leave_If(self, original_node: cst.If) -> None:
                if _mentions(original_node.test, {func_name}):
                    self.func_branches -= 1
                    # `if func is not F.linear: return super()...`: the re-entered call (the
                    # getter of what is read below) leaves here, so it re-enters only once.
                    if _excludes(original_node.test, func_name) and _exits(original_node.body):
                        self.bounded = True

        visit = _Visit()
        visit.run()
        if visit.found:
            node = visit.found[0]
            code = code_of(node)
            self.report("AGL304", node, cls=info.name, code=code)

    def _mode_super(self, info: ClassInfo, hook: cst.FunctionDef) -> None:
        params = [p.name.value for p in hook.params.params]
        names = params[1:5] if len(params) >= 5 else []  # func, types, args, kwargs

        for call in super_calls(hook, "__torch_function__"):
            fix = None
            if len(names) == 4:
                fn, _types, a, kw = names

                code = f"{fn}(*{a}, **({kw} or {{}}))"

                def build(edits: Edits, call: cst.Call = call, code: str = code) -> None:
                    replacement = cst.parse_expression(code)
                    edits.nodes[id(call)] = lambda _updated: replacement

                fix = Fix("unsafe", hook, build, "call `func(*args, **kwargs)`")
            self.report("AGL305", call, anchor=call.func, fix=fix, cls=info.name)


class _Reads(FastVisitor):
    """Tensor attribute and method reads on `derived` values (and on values taken from them)
    in one function, outside a disabling `with`, itself or in a module-level helper it hands
    them to (`seen = _seen(args)`): each one re-enters the override (C1.1, C1.3)."""

    def __init__(
        self,
        function: cst.FunctionDef,
        derived: set[str],
        imports: ImportTable,
        helpers: _HelperReads,
    ) -> None:
        self.function = function
        self.derived = derived
        self.imports = imports
        self.helpers = helpers
        self.disabled = 0
        self.found: list[cst.CSTNode] = []

    def run(self) -> None:
        # The comprehension element is visited before its `for`: bind loop names first.
        derived = self.derived

        class _Bind(FastVisitor):
            def visit_CompFor(self, node: cst.CompFor) -> None:
                if _mentions(node.iter, derived) and isinstance(node.target, cst.Name):
                    derived.add(node.target.value)

        _Bind().walk(self.function)
        self.walk(self.function)

    def quiet(self) -> bool:
        """Whether a read here does not re-enter without end."""
        return bool(self.disabled)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.function

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_With(self, node: cst.With) -> None:
        if any(_is_disabler(item.item, self.imports) for item in node.items):
            self.disabled += 1

    def leave_With(self, original_node: cst.With) -> None:
        if any(_is_disabler(item.item, self.imports) for item in original_node.items):
            self.disabled -= 1

    def visit_For(self, node: cst.For) -> None:
        if _mentions(node.iter, self.derived) and isinstance(node.target, cst.Name):
            self.derived.add(node.target.value)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        if _mentions(node.iter, self.derived) and isinstance(node.target, cst.Name):
            self.derived.add(node.target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, (cst.Subscript, cst.Name)) and _mentions(
            node.value, self.derived
        ):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    self.derived.add(target.target.value)

    def visit_Call(self, node: cst.Call) -> None:
        if self.quiet() or not isinstance(node.func, cst.Name):
            return
        if any(_mentions(arg.value, self.derived) for arg in node.args):
            if self.helpers.reads(node.func.value):
                self.found.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.quiet() or node.attr.value not in TENSOR_ATTRS:
            return
        base = node.value
        while isinstance(base, cst.Subscript):
            base = base.value
        if isinstance(base, cst.Name) and base.value in self.derived:
            self.found.append(node)


class _HelperReads:
    """Whether a module-level function of the file reads a tensor attribute or method on what
    it is handed (or on values taken from it), outside a disabling `with`, itself or through
    another such helper it hands them to."""

    def __init__(
        self, function: Callable[[str], cst.FunctionDef | None], imports: ImportTable
    ) -> None:
        self.function = function
        self.imports = imports
        self.known: dict[str, bool] = {}

    def reads(self, name: str) -> bool:
        if self.imports.is_imported(name):
            return False
        if name not in self.known:
            self.known[name] = False  # a recursive helper stops here
            function = self.function(name)
            if function is not None:
                params = function.params
                derived = {p.name.value for p in (*params.posonly_params, *params.params)}
                if isinstance(params.star_arg, cst.Param):
                    derived.add(params.star_arg.name.value)  # `def _seen(*args)`
                visit = _Reads(function, derived, self.imports, self)
                visit.run()
                self.known[name] = bool(visit.found)
        return self.known[name]


def _is_disabler(expr: cst.BaseExpression, imports) -> bool:  # type: ignore[no-untyped-def]
    if isinstance(expr, cst.Call):
        expr = expr.func
    name = imports.resolve(expr) or ""
    return name.rsplit(".", 1)[-1] in DISABLERS


def _excludes(test: cst.BaseExpression, func: str) -> bool:
    """A test true for every `func` but the handled ones (`func is not X`, `func not in S`,
    `func != X`, `not (func in S)`): a tensor getter re-entering the override passes it."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        return isinstance(inner, cst.Comparison) and _compares(inner, func, (cst.In, cst.Is))
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _excludes(test.left, func) and _excludes(test.right, func)
    return isinstance(test, cst.Comparison) and _compares(
        test, func, (cst.NotIn, cst.IsNot, cst.NotEqual)
    )


def _compares(test: cst.Comparison, func: str, operators: tuple[type, ...]) -> bool:
    return (
        isinstance(test.left, cst.Name)
        and test.left.value == func
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, operators)
    )


def _exits(body: cst.BaseSuite) -> bool:
    """Whether a block ends in `return` or `raise`."""
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    last = statements[-1] if statements else None
    if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return isinstance(last.body[-1], (cst.Return, cst.Raise))
    return False


def _mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    return not names.isdisjoint(names_in(expr))
