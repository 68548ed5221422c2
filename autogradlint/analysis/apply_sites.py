"""What the `Fn.apply(...)` calls of a file hand a Function, input by input: read with `ast`
from the file's full text (the module classes that call `apply` are not in the slice libcst
parsed), only when a check asks.

An argument is one of:
- `frozen`: a tensor that never requires grad: a `requires_grad=False` `nn.Parameter` or a
  buffer the calling class registers (`self.codebook`);
- `parameter`: an `nn.Parameter`, a leaf (a parameter annotated so, or one the class holds);
- `tensor`: a parameter of the calling function annotated `Tensor` (or `Optional` of one);
- `other`: anything else, or anything not known.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from collections.abc import Iterator

from ..text.statements import parse_holding

FROZEN, PARAMETER, TENSOR, OTHER = "frozen", "parameter", "tensor", "other"
_PARAMETER_NAMES = frozenset({"Parameter", "nn.Parameter", "torch.nn.Parameter"})
_TENSOR_NAMES = frozenset({"Tensor", "torch.Tensor"})
# `Optional[Tensor]`, `Tensor | None`, `torch.Tensor | None`, as ast.unparse writes them
_OPTIONAL = re.compile(
    r"^(?:(?:typing\.)?Optional\[(?P<inner>[\w.]+)\]|(?P<left>[\w.]+) \| None|None \| (?P<right>[\w.]+))$"
)


class ApplySites:
    """The `apply` calls of one file, parsed when first asked."""

    def __init__(self, source: str) -> None:
        self.source = source
        # by the class called, read with whole classes around the calls (False: with only
        # the members of a class that call apply, enough to count arguments)
        self._by_class: dict[bool, dict[str, list[_Site]]] = {}

    def passed(self, cls: str, slot: int) -> list[str] | None:
        """What each `cls.apply(...)` call of the file passes as input `slot` (forward's
        inputs after ctx, from 0); None when the file has no such call or cannot be read."""
        found = [
            _argument(call, slot, owner, function)
            for call, owner, function in self._calls(cls, whole=True)
        ]
        return found or None

    def handed(
        self, cls: str, slot: int
    ) -> list[tuple[ast.expr, ast.ClassDef | None, _Function | None]]:
        """The expression each `cls.apply(...)` call of the file passes as input `slot`, with
        the class and the function the call is in (calls that unpack before it are left out:
        what they pass there is not known)."""
        found: list[tuple[ast.expr, ast.ClassDef | None, _Function | None]] = []
        for call, owner, function in self._calls(cls, whole=True):
            args = call.args[: slot + 1]
            if len(args) > slot and not any(isinstance(a, ast.Starred) for a in args):
                found.append((call.args[slot], owner, function))
        return found

    def count(self, cls: str) -> int | None:
        """How many arguments every `cls.apply(...)` call of the file passes, when they all
        pass the same number, positionally and without unpacking (None otherwise)."""
        counts = {
            len(call.args)
            if not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)
            else None
            for call, _owner, _function in self._calls(cls, whole=False)
        }
        return counts.pop() if len(counts) == 1 else None

    def _calls(self, cls: str, whole: bool) -> list[_Site]:
        """The `cls.apply(...)` calls: the file is walked once, for every class a check asks
        about (a walk per class was the costliest step of a cold check on torch's tree).
        With `whole`, each call's class is read whole (what it holds as `self.x`)."""
        if whole not in self._by_class:
            found: dict[str, list[_Site]] = {}
            self._by_class[whole] = found
            if ".apply" not in self.source:  # a file that calls no apply: no parse, no walk
                return []
            tree, lines = parse_holding(self.source, _APPLY, members=not whole)
            for site in _calls(tree, lines) if tree is not None else ():
                func = site[0].func
                assert isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                found.setdefault(func.value.id, []).append(site)
        return self._by_class[whole].get(cls, [])


# The word every `X.apply(...)` call holds, however it is spaced (`(Fn).apply`, `Fn.\n apply`):
# its statements are the only ones parsed and walked. The matches of `\bapply\b`, led by the
# word so that `re` skips ahead to it (a leading `\b` is tried at every character: 20x slower
# over torch's text), its start checked after it by a lookbehind.
_APPLY = re.compile(r"apply\b(?<!\wapply)")


_Function = ast.FunctionDef | ast.AsyncFunctionDef
_Site = tuple[ast.Call, ast.ClassDef | None, _Function | None]


def _calls(tree: ast.Module, lines: list[int] | None) -> Iterator[_Site]:
    """Every `X.apply(...)` call, with the class and the function around it, in source order;
    statements on no line of `lines` (those holding the word) are skipped. A stack, not a
    generator per node: a file's tree has tens of thousands of nodes."""
    stack: list[tuple[ast.AST, ast.ClassDef | None, _Function | None]] = [(tree, None, None)]
    while stack:
        node, owner, function = stack.pop()
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "apply"
            and isinstance(node.func.value, ast.Name)
        ):
            yield node, owner, function
        children: list[tuple[ast.AST, ast.ClassDef | None, _Function | None]] = []
        for child in ast.iter_child_nodes(node):
            if lines is not None and isinstance(child, ast.stmt) and not _spans(child, lines):
                continue
            if isinstance(child, ast.ClassDef):
                children.append((child, child, None))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                children.append((child, owner, child))
            else:
                children.append((child, owner, function))
        stack += reversed(children)


def _spans(statement: ast.stmt, lines: list[int]) -> bool:
    """Whether one of the sorted `lines` is a line of the statement (its decorators too)."""
    first = statement.lineno
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        first = min([first, *(d.lineno for d in statement.decorator_list)])
    at = bisect_left(lines, first)
    return at < len(lines) and lines[at] <= (statement.end_lineno or first)


def _argument(
    call: ast.Call,
    slot: int,
    owner: ast.ClassDef | None,
    function: ast.FunctionDef | ast.AsyncFunctionDef | None,
) -> str:
    for arg in call.args[:slot]:
        if isinstance(arg, ast.Starred):
            return OTHER  # positions unknowable
    if slot >= len(call.args) or isinstance(call.args[slot], ast.Starred):
        return OTHER
    value = call.args[slot]
    if (
        isinstance(value, ast.Attribute)
        and isinstance(value.value, ast.Name)
        and value.value.id == "self"
        and owner is not None
    ):
        return _held(owner, value.attr)
    if isinstance(value, ast.Name) and function is not None:
        for param in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs):
            if param.arg == value.id and param.annotation is not None:
                written = ast.unparse(param.annotation)
                if written in _PARAMETER_NAMES:
                    return PARAMETER
                optional = _OPTIONAL.match(written)
                if optional is not None:
                    written = next(g for g in optional.groups() if g is not None)
                if written in _TENSOR_NAMES:
                    return TENSOR
    return OTHER


def _held(owner: ast.ClassDef, attr: str) -> str:
    """What the class keeps as `self.<attr>`: every assignment of it, and buffer
    registrations, must agree."""
    kinds: set[str] = set()
    for node in ast.walk(owner):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == attr
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    kinds.add(_made(node.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register_buffer"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == attr
        ):
            kinds.add(FROZEN)  # a buffer never requires grad
    if len(kinds) == 1:
        return kinds.pop()
    return OTHER


def _made(value: ast.expr) -> str:
    if isinstance(value, ast.Call) and ast.unparse(value.func) in _PARAMETER_NAMES:
        for keyword in value.keywords:
            if keyword.arg == "requires_grad":
                frozen = isinstance(keyword.value, ast.Constant) and keyword.value.value is False
                return FROZEN if frozen else OTHER
        if len(value.args) > 1:
            second = value.args[1]
            if isinstance(second, ast.Constant) and second.value is False:
                return FROZEN
            return OTHER
        return PARAMETER
    return OTHER
