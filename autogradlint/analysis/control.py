"""Control-flow facts a fix must prove before it may call itself safe.

A rewrite that only changes paths which already raised is safe; proving that needs to know
whether a call is always reached once a block is entered, and whether its exception can be
swallowed on the way out. These helpers answer from the CST alone, conservatively: when unsure,
they say no.
"""

from __future__ import annotations

import libcst as cst

from .walk import children

# Expressions that may skip evaluating some of their children.
_CONDITIONAL = (
    cst.IfExp,
    cst.BooleanOperation,
    cst.Lambda,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
)
_NESTED_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_EXITS = (cst.Return, cst.Break, cst.Continue, cst.Yield, cst.Await)


def path_to(root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes from `root` down to `target` (both included), or None if it is not below."""
    stack: list[tuple[cst.CSTNode, int]] = [(root, 0)]
    path: list[cst.CSTNode] = []
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        if node is target:
            return path
        stack.extend((child, depth + 1) for child in reversed(children(node)))
    return None


def always_evaluated(statement: cst.CSTNode, target: cst.CSTNode) -> bool:
    """Whether executing the simple `statement` always evaluates `target` (when nothing before
    it in the statement raised): no conditional expression, short-circuit, lambda or
    comprehension lies between them, and the statement is not compound."""
    if isinstance(statement, cst.BaseCompoundStatement):
        return False
    path = path_to(statement, target)
    if path is None:
        return False
    for node, child in zip(path, path[1:], strict=False):
        if isinstance(node, _CONDITIONAL):
            if isinstance(node, cst.IfExp) and child is node.test:
                continue
            if isinstance(node, cst.BooleanOperation) and child is node.left:
                continue
            return False
    return True


def may_leave_early(statements: list[cst.BaseStatement]) -> bool:
    """Whether any of these statements can leave the enclosing block without raising
    (`return`, `break`, `continue`, `yield`, `await`), outside nested functions."""
    stack: list[cst.CSTNode] = list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, _EXITS):
            return True
        if isinstance(node, _NESTED_SCOPES):
            continue
        stack.extend(children(node))
    return False


def catches_between(
    function: cst.FunctionDef,
    target: cst.CSTNode,
    allowed_withs: set[int] = frozenset(),  # type: ignore[assignment]
) -> bool:
    """Whether an exception raised at `target` can be caught or swallowed before it leaves
    `function`: a `try` around it, or a `with` (a context manager may suppress it) other than
    those in `allowed_withs` (grad-mode managers, which never do)."""
    path = path_to(function.body, target)
    if path is None:
        return True
    for node in path[:-1]:
        if isinstance(node, (cst.Try, cst.TryStar)):
            return True
        if isinstance(node, cst.With) and id(node) not in allowed_withs:
            return True
        if isinstance(node, _NESTED_SCOPES):
            return True  # the target runs when the nested function is called: unknown
    return False


def mentions(node: cst.CSTNode, name: str) -> bool:
    """Whether `name` appears as a variable anywhere in `node` (attributes excluded)."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name) and current.value == name:
            return True
        if isinstance(current, cst.Attribute):
            stack.append(current.value)  # `x.g` does not read a variable `g`
            continue
        if isinstance(current, cst.Arg):
            stack.append(current.value)  # nor does the keyword of `f(g=1)`
            continue
        stack.extend(children(current))
    return False
