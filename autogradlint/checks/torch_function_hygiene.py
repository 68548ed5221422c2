"""AGL303-AGL305: how __torch_function__ overrides are declared and how they redispatch."""

from __future__ import annotations

import libcst as cst

from ..analysis.control import mentions
from ..analysis.facts import ClassInfo
from ..analysis.names import dotted
from ..analysis.source_text import code_of
from ..analysis.walk import FastVisitor, names_in
from ..edits import Edits, Fix
from ..preconditions import Unproven
from .base import Check
from .common import add_decorator_fix, super_calls

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
        found: list[cst.Attribute] = []

        func_name = params[1] if len(params) > 1 else "func"

        class _Visit(FastVisitor):
            def __init__(self) -> None:
                self.disabled = 0
                self.func_branches = 0
                self.bounded = False

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

            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is hook

            def visit_Lambda(self, node: cst.Lambda) -> bool:
                return False

            def visit_With(self, node: cst.With) -> None:
                if any(_is_disabler(item.item, imports) for item in node.items):
                    self.disabled += 1

            def leave_With(self, original_node: cst.With) -> None:
                if any(_is_disabler(item.item, imports) for item in original_node.items):
                    self.disabled -= 1

            def visit_For(self, node: cst.For) -> None:
                if _mentions(node.iter, derived) and isinstance(node.target, cst.Name):
                    derived.add(node.target.value)

            def visit_CompFor(self, node: cst.CompFor) -> None:
                if _mentions(node.iter, derived) and isinstance(node.target, cst.Name):
                    derived.add(node.target.value)

            def visit_Assign(self, node: cst.Assign) -> None:
                if isinstance(node.value, (cst.Subscript, cst.Name)) and _mentions(
                    node.value, derived
                ):
                    for target in node.targets:
                        if isinstance(target.target, cst.Name):
                            derived.add(target.target.value)

            def visit_Attribute(self, node: cst.Attribute) -> None:
                if self.disabled or self.func_branches or self.bounded:
                    return
                if node.attr.value not in TENSOR_ATTRS:
                    return
                base = node.value
                while isinstance(base, cst.Subscript):
                    base = base.value
                if isinstance(base, cst.Name) and base.value in derived:
                    found.append(node)

        # The comprehension element is visited before its `for`: bind loop names first.
        class _Bind(FastVisitor):
            def visit_CompFor(self, node: cst.CompFor) -> None:
                if _mentions(node.iter, derived) and isinstance(node.target, cst.Name):
                    derived.add(node.target.value)

        _Bind().walk(hook)
        _Visit().walk(hook)
        if found:
            node = found[0]
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
