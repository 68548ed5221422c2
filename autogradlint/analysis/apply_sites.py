"""What the `Fn.apply(...)` calls of a file hand a Function, input by input: read with `ast`
from the file's full text (the module classes that call `apply` are not in the slice libcst
parsed), only when a check asks.

An argument is one of:
- `frozen`: a tensor that never requires grad: a `requires_grad=False` `nn.Parameter` or a
  buffer the calling class registers (`self.codebook`);
- `parameter`: an `nn.Parameter`, a leaf (a parameter annotated so, or one the class holds);
- `other`: anything else, or anything not known.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..text.ast_walk import parse_quietly

FROZEN, PARAMETER, OTHER = "frozen", "parameter", "other"
_PARAMETER_NAMES = frozenset({"Parameter", "nn.Parameter", "torch.nn.Parameter"})


class ApplySites:
    """The `apply` calls of one file, parsed when first asked."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._tree: ast.Module | None = None
        self._parsed = False
        self._by_class: dict[str, list[_Site]] | None = None

    def passed(self, cls: str, slot: int) -> list[str] | None:
        """What each `cls.apply(...)` call of the file passes as input `slot` (forward's
        inputs after ctx, from 0); None when the file has no such call or cannot be read."""
        found = [
            _argument(call, slot, owner, function) for call, owner, function in self._calls(cls)
        ]
        return found or None

    def count(self, cls: str) -> int | None:
        """How many arguments every `cls.apply(...)` call of the file passes, when they all
        pass the same number, positionally and without unpacking (None otherwise)."""
        counts = {
            len(call.args)
            if not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)
            else None
            for call, _owner, _function in self._calls(cls)
        }
        return counts.pop() if len(counts) == 1 else None

    def _parse(self) -> ast.Module | None:
        if not self._parsed:
            self._parsed = True
            self._tree = parse_quietly(self.source)
        return self._tree

    def _calls(self, cls: str) -> list[_Site]:
        """The `cls.apply(...)` calls: the file is walked once, for every class a check asks
        about (a walk per class was the costliest step of a cold check on torch's tree)."""
        if self._by_class is None:
            if ".apply" not in self.source:  # a file that calls no apply: no parse, no walk
                return []
            tree = self._parse()
            self._by_class = {}
            for site in _calls(tree) if tree is not None else ():
                func = site[0].func
                assert isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                self._by_class.setdefault(func.value.id, []).append(site)
        return self._by_class.get(cls, [])


_Site = tuple[ast.Call, ast.ClassDef | None, ast.FunctionDef | ast.AsyncFunctionDef | None]


def _calls(tree: ast.Module) -> Iterator[_Site]:
    """Every `X.apply(...)` call, with the class and the function around it."""

    def walk(
        node: ast.AST,
        owner: ast.ClassDef | None,
        function: ast.FunctionDef | ast.AsyncFunctionDef | None,
    ) -> Iterator[_Site]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from walk(child, child, None)
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(child, owner, child)
                continue
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr == "apply"
                and isinstance(child.func.value, ast.Name)
            ):
                yield child, owner, function
            yield from walk(child, owner, function)

    yield from walk(tree, None, None)


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
                if ast.unparse(param.annotation) in _PARAMETER_NAMES:
                    return PARAMETER
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
