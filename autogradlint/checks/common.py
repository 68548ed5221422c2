"""Small CST helpers shared by the checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from ..analysis.facts import FileFacts, op_subject
from ..analysis.names import dotted
from ..analysis.source_text import code_of
from ..analysis.walk import FastVisitor
from ..edits import Edits, Fix
from ..preconditions import Unproven, verdict


def positional(call: cst.Call, index: int, keyword: str | None = None) -> cst.BaseExpression | None:
    """The argument at a position, or passed by keyword."""
    if keyword is not None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg.value
    plain = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return plain[index].value if index < len(plain) else None


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def is_literal(expr: cst.BaseExpression | None, value: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == value


def string_value(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.SimpleString):
        evaluated = expr.evaluated_value
        return evaluated if isinstance(evaluated, str) else None
    return None


def source_of(module: cst.Module, node: cst.CSTNode, limit: int = 60) -> str:
    """Short source text of a node for messages (one line, truncated)."""
    text = " ".join(code_of(node, module).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class BackwardOf:
    """Whose backward a function is: a Function class's, or a `torch.library` custom op's
    (registered with `register_autograd`; it receives gradients the same way)."""

    name: str  # the class, or the op as the file names it
    node: cst.ClassDef | None  # the class (None for a custom op)

    @property
    def subject(self) -> cst.ClassDef | str | None:
        """What the confirmer imports: the class, or the op's name when this file binds it."""
        if self.node is not None:
            return self.node
        return op_subject(self.name)


def backward_methods(facts: FileFacts) -> list[tuple[BackwardOf, cst.FunctionDef]]:
    """Every backward of the file: Function classes' and custom ops' alike."""
    found: list[tuple[BackwardOf, cst.FunctionDef]] = [
        (BackwardOf(info.name, info.node), info.methods["backward"])
        for info in facts.function_classes
        if "backward" in info.methods
    ]
    found += [
        (BackwardOf(op.subject or op.op, None), op.backward)
        for op in facts.custom_ops
        if op.backward is not None
    ]
    return found


def _contains(node: cst.CSTNode, target: cst.CSTNode) -> bool:
    if node is target:
        return True
    found = False

    class _Find(FastVisitor):
        def on_visit(self, current: cst.CSTNode) -> bool:
            nonlocal found
            if found:
                return False
            if current is target:
                found = True
                return False
            return True

    _Find().walk(node)
    return found


def statement_in_block(
    function: cst.FunctionDef, target: cst.CSTNode
) -> tuple[cst.IndentedBlock, int] | None:
    """The innermost indented block of `function` and the index of its statement holding `target`."""
    block = function.body
    found: tuple[cst.IndentedBlock, int] | None = None
    while isinstance(block, cst.IndentedBlock):
        for index, stmt in enumerate(block.body):
            if _contains(stmt, target):
                found = (block, index)
                inner = _child_block(stmt, target)
                block = inner  # type: ignore[assignment]
                break
        else:
            return found
    return found


def _child_block(stmt: cst.CSTNode, target: cst.CSTNode) -> cst.IndentedBlock | None:
    """The suite directly under a compound statement that holds `target` (not nested defs)."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return None
    suites: list[cst.CSTNode] = []
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock):
        suites.append(body)
    for attr in ("orelse", "finalbody"):
        extra = getattr(stmt, attr, None)
        while isinstance(extra, cst.If):  # elif chains
            suites.append(extra.body)
            extra = extra.orelse
        if extra is not None and isinstance(getattr(extra, "body", None), cst.IndentedBlock):
            suites.append(extra.body)
    for handler in getattr(stmt, "handlers", ()):
        suites.append(handler.body)
    for suite in suites:
        if isinstance(suite, cst.IndentedBlock) and _contains(suite, target):
            return suite
    return None


def with_leading_lines_moved(
    stmts: list[cst.BaseStatement],
) -> tuple[list[cst.BaseStatement], tuple[cst.EmptyLine, ...]]:
    """Take the first statement's leading comments/blank lines so a wrapper can carry them."""
    first = stmts[0]
    leading = tuple(getattr(first, "leading_lines", ()))
    if leading:
        stmts = [first.with_changes(leading_lines=()), *stmts[1:]]
    return stmts, leading


def body_start(block: cst.IndentedBlock) -> int:
    """Index after a docstring, where code inserted at the top of a function belongs."""
    if block.body and isinstance(block.body[0], cst.SimpleStatementLine):
        first = block.body[0].body[0] if block.body[0].body else None
        if isinstance(first, cst.Expr) and isinstance(
            first.value, (cst.SimpleString, cst.ConcatenatedString)
        ):
            return 1
    return 0


def expression_statement(
    function: cst.FunctionDef, call: cst.Call
) -> tuple[cst.IndentedBlock, int, cst.Expr] | None:
    """(block, index, Expr) when `call` is a whole statement on its own line (result dropped)."""
    located = statement_in_block(function, call)
    if located is None:
        return None
    block, index = located
    stmt = block.body[index]
    if (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and stmt.body[0].value is call
    ):
        return block, index, stmt.body[0]
    return None


def add_decorator_fix(
    method: cst.FunctionDef, name: str, *, unproven: Sequence[Unproven | None] = ()
) -> Fix:
    """Put `@name` above the method's other decorators (safe, unless a precondition is
    `unproven`)."""

    def build(edits: Edits) -> None:
        def edit(updated: cst.CSTNode) -> cst.CSTNode:
            assert isinstance(updated, cst.FunctionDef)
            decorators = list(updated.decorators)
            # The comments and blank lines above the method go above the new first decorator.
            owner = decorators[0] if decorators else updated
            new = cst.Decorator(cst.Name(name), leading_lines=owner.leading_lines)
            if decorators:
                decorators[0] = decorators[0].with_changes(leading_lines=())
                return updated.with_changes(decorators=[new, *decorators])
            return updated.with_changes(decorators=[new], leading_lines=())

        edits.nodes[id(method)] = edit

    safety, note = verdict(unproven)
    return Fix(safety, method, build, f"add `@{name}`", note)


def super_calls(node: cst.CSTNode, method: str) -> list[cst.Call]:
    """Every `super().<method>(...)` (or `super(C, x).<method>(...)`) call below `node`."""
    found: list[cst.Call] = []

    class _Find(FastVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == method
                and isinstance(func.value, cst.Call)
                and dotted(func.value.func) == "super"
            ):
                found.append(call)

    _Find().walk(node)
    return found
