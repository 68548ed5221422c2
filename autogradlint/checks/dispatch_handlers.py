"""AGL306: a `__torch_dispatch__` handler of a factory or conversion op that ignores what the
caller asked for (dtype, device, size)."""

from __future__ import annotations

import re

import libcst as cst

from ..analysis.facts import ClassInfo
from ..analysis.names import dotted, iter_statements
from ..analysis.walk import FastVisitor, names_in
from ..settings import DISPATCH_REQUEST_OPS, DISPATCH_SIZED_OPS
from .base import Check

REQUESTING_OPS = DISPATCH_REQUEST_OPS
SIZED_OPS = DISPATCH_SIZED_OPS
_OP = re.compile(r"\b(" + "|".join(sorted(REQUESTING_OPS | SIZED_OPS)) + r")\b")


class DispatchHandlers(Check):
    """AGL306 on `if func is aten.<op>...:` branches of `__torch_dispatch__`."""

    def run(self) -> None:
        for info in self.ctx.facts.classes:
            hook = info.methods.get("__torch_dispatch__")
            if hook is not None:
                self.ctx.enter(info.node)
                self._hook(info, hook)
        self.ctx.enter(None)
        # Handlers registered per op by decorator (`@implements(aten.empty_like.default)`), as
        # wrapper-tensor libraries write them: defs are statements, so expressions are never
        # entered on the way to them.
        for node in iter_statements(self.ctx.facts.module):
            if isinstance(node, cst.FunctionDef) and node.decorators:
                texts = [cst.Module([]).code_for_node(d.decorator) for d in node.decorators]
                ops = {op for text in texts if "aten" in text for op in _OP.findall(text)}
                if ops:
                    self._registered(node, ops)

    def _registered(self, handler: cst.FunctionDef, ops: set[str]) -> None:
        params = [p.name.value for p in (*handler.params.posonly_params, *handler.params.params)]
        if "args" not in params or "kwargs" not in params:
            # A decomposition registered for the op takes the op's own parameters
            # (`rand_like(x, dtype=None, device=None)`), not a dispatch handler's. The slicer
            # never parses those (slicing.registers_handler is this test's `ast` twin).
            return
        self._answers(handler.name.value, handler, handler.body, handler, ops, "args", "kwargs")

    def _hook(self, info: ClassInfo, hook: cst.FunctionDef) -> None:
        params = [p.name.value for p in (*hook.params.posonly_params, *hook.params.params)]
        if not any(dotted(d.decorator) == "staticmethod" for d in hook.decorators):
            params = params[1:]  # cls or self
        if len(params) < 4:
            return
        func, _types, args, kwargs = params[:4]
        reporter = self

        class _Branches(FastVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is hook  # nested helpers run when they are called

            def visit_If(self, node: cst.If) -> None:
                ops = _ops_tested(node.test, func)
                if ops:
                    reporter._branch(info, hook, node, ops, args, kwargs)

        _Branches().walk(hook)

    def _branch(
        self,
        info: ClassInfo,
        hook: cst.FunctionDef,
        branch: cst.If,
        ops: set[str],
        args: str,
        kwargs: str,
    ) -> None:
        self._answers(
            f"{info.name}.__torch_dispatch__", branch, branch.body, hook, ops, args, kwargs
        )

    def _answers(
        self,
        where: str,
        node: cst.CSTNode,
        body: cst.BaseSuite,
        hook: cst.FunctionDef,
        ops: set[str],
        args: str,
        kwargs: str,
    ) -> None:
        """Report when `body` answers one of `ops` without reading what the caller asked."""
        if not _returns_in(body):
            return  # falls through to code that may honour the request
        read = set(names_in(body))
        reads_kwargs = bool(read & _aliases(hook, kwargs, node))
        reads_size = _reads_past_self(body, args)
        for op in sorted(ops):
            ignored = []
            if not reads_kwargs:
                ignored.append("the requested dtype and device")
            if op in SIZED_OPS and not reads_size:
                ignored.append("the requested size")
            if ignored:
                anchor = node.test if isinstance(node, cst.If) else node.name  # type: ignore[union-attr]
                self.report(
                    "AGL306", node, anchor=anchor, hook=where, name=op, detail=" and ".join(ignored)
                )
                return


def _ops_tested(test: cst.BaseExpression, func: str) -> set[str]:
    """The factory/conversion ops an `if` on `func` selects (`func is aten.empty_like.default`,
    `func in (aten.new_zeros.default, ...)`, `func.overloadpacket == aten._to_copy`)."""
    if func not in names_in(test):
        return set()
    code = cst.Module([]).code_for_node(test)
    negated = re.search(r"\bnot\b|!=|is not", code) is not None
    return set() if negated else set(_OP.findall(code))


def _returns_in(body: cst.BaseSuite) -> list[cst.Return]:
    found: list[cst.Return] = []

    class _Returns(FastVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

    _Returns().walk(body)
    return found


def _aliases(hook: cst.FunctionDef, kwargs: str, branch: cst.CSTNode) -> set[str]:
    """`kwargs` and the names bound from it before the branch (`kw = dict(kwargs)`)."""
    names = {kwargs}

    class _Binds(FastVisitor):
        def visit_If(self, node: cst.If) -> bool:
            return node is not branch

        def visit_Assign(self, node: cst.Assign) -> None:
            if names & set(names_in(node.value)):
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        names.add(target.target.value)

    _Binds().walk(hook.body)
    return names


def _reads_past_self(body: cst.BaseSuite, args: str) -> bool:
    """Whether the branch reads `args` beyond `args[0]` (the size of `new_zeros(self, size)`)."""
    found = False

    class _Reads(FastVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> bool:
            nonlocal found
            if dotted(node.value) == args:
                element = node.slice[0].slice if len(node.slice) == 1 else None
                is_zero = (
                    isinstance(element, cst.Index)
                    and isinstance(element.value, cst.Integer)
                    and element.value.value == "0"
                )
                found = found or not is_zero
                return False
            return True

        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            if node.value == args:
                found = True  # `args` whole: `func(*args)`, `args[1:]` handled above

    _Reads().walk(body)
    return found
