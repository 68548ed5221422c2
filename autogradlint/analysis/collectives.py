"""`torch.distributed` collectives that write their result into a tensor they are handed, and
the project functions that hand one of their parameters to such a collective.

`dist.all_reduce(g)` reduces into `g` itself; `all_gather_into_tensor(out, inp)` writes `out`
and only reads `inp` (semantics B2.4-B2.7). The out-of-place spellings
(`torch.distributed.nn.all_reduce`, `torch.distributed._functional_collectives.*`) return a
new tensor and are not listed. The same calls refuse a non-contiguous tensor on NCCL, as input
or output, and point-to-point `send`/`recv` on gloo (`CONTIGUOUS`, semantics B2.10-B2.11), which `HelperWrites(..., contiguous=True)`
follows instead. A helper is read with `ast` (the same or another project
file, through `Summaries.function`), following its own calls one level deeper.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import libcst as cst

from ..settings import HELPER_DEPTH
from ..text.ast_walk import ast_dotted
from .aliasing import ALIASING_METHODS
from .summaries import Summaries, gated_calls, may_pass

A = TypeVar("A")

# short name -> (position, keywords, whether it takes a list of tensors) of the written argument
WRITTEN: dict[str, tuple[int, tuple[str, ...], bool]] = {
    "all_reduce": (0, ("tensor",), False),
    "broadcast": (0, ("tensor",), False),
    "reduce": (0, ("tensor",), False),
    "reduce_scatter": (0, ("output",), False),
    "reduce_scatter_tensor": (0, ("output", "output_tensor"), False),
    "_reduce_scatter_base": (0, ("output", "output_tensor"), False),
    "all_gather": (0, ("tensor_list",), True),
    "all_gather_into_tensor": (0, ("output_tensor",), False),
    "_all_gather_base": (0, ("output_tensor",), False),
    "all_to_all_single": (0, ("output",), False),
}
# short name -> the (position, keywords) of every single-tensor argument NCCL's
# `check_gpu_single_tensor` refuses when not contiguous (B2.11), or gloo's point-to-point
# calls do (B2.10): a list argument is not included
CONTIGUOUS: dict[str, tuple[tuple[int, tuple[str, ...]], ...]] = {
    "all_reduce": ((0, ("tensor",)),),
    "broadcast": ((0, ("tensor",)),),
    "reduce": ((0, ("tensor",)),),
    "all_gather": ((1, ("tensor",)),),
    "all_gather_into_tensor": ((0, ("output_tensor",)), (1, ("input_tensor",))),
    "_all_gather_base": ((0, ("output_tensor",)), (1, ("input_tensor",))),
    "reduce_scatter": ((0, ("output",)),),
    "reduce_scatter_tensor": ((0, ("output", "output_tensor")), (1, ("input", "input_tensor"))),
    "_reduce_scatter_base": ((0, ("output", "output_tensor")), (1, ("input", "input_tensor"))),
    "all_to_all_single": ((0, ("output",)), (1, ("input",))),
    # point-to-point: gloo raises `input tensor has to be contiguous` (B2.10), NCCL only warns
    "send": ((0, ("tensor",)),),
    "isend": ((0, ("tensor",)),),
    "recv": ((0, ("tensor",)),),
    "irecv": ((0, ("tensor",)),),
}
# ... of which those gloo refuses (the CPU backend) where NCCL only warns (B2.10-B2.11)
POINT_TO_POINT = frozenset({"send", "isend", "recv", "irecv"})
# torch's, and DeepSpeed's drop-in `deepspeed.comm` (`from deepspeed import comm as dist`), whose
# functions hand the same arguments to torch's through a backend object no summary can follow.
_MODULES = (
    "torch.distributed.",
    "torch.distributed.distributed_c10d.",
    "deepspeed.comm.",
    "deepspeed.comm.comm.",
)
# Methods whose result shares storage with their receiver (as the contract checks read them).
VIEWS = ALIASING_METHODS | {"contiguous"}
VIEW_ATTRIBUTES = frozenset({"data", "T", "mT", "H", "mH"})
# ... and whose result is a sequence of views of it (an `all_gather` output list).
SPLITS = frozenset({"chunk", "split", "unbind", "tensor_split", "split_with_sizes", "hsplit"})


def collective(resolved: str, known: Mapping[str, object] = WRITTEN) -> str | None:
    """The collective's short name when `resolved` (a qualified callee) is one of `known`
    (by default: one that writes an argument)."""
    for module in _MODULES:
        if resolved.startswith(module):
            short = resolved[len(module) :]
            return short if short in known else None
    return None


def passed_argument(
    position: int,
    keywords: tuple[str, ...],
    positional: Sequence[A],
    named: Iterable[tuple[str | None, A]],
    starred: Callable[[A], bool],
) -> A | None:
    """What a collective's parameter receives: the argument given by one of its `keywords`,
    else the one at its `position` (None: not passed, or after an unpacked `*args`, which
    hides where it lands). One rule for both trees: `ast` in helpers, libcst in backward."""
    for key, value in named:
        if key in keywords:
            return value
    if any(starred(arg) for arg in positional[: position + 1]):
        return None
    return positional[position] if position < len(positional) else None


def ast_argument(call: ast.Call, position: int, keywords: tuple[str, ...]) -> ast.expr | None:
    """`passed_argument` of an `ast` call."""
    named = [(k.arg, k.value) for k in call.keywords]
    return passed_argument(
        position, keywords, call.args, named, lambda a: isinstance(a, ast.Starred)
    )


def cst_argument(call: cst.Call, position: int, keywords: tuple[str, ...]) -> cst.Arg | None:
    """`passed_argument` of a libcst call (the `Arg`, so a finding can point at it)."""
    positional = [arg for arg in call.args if arg.keyword is None]
    named = [(arg.keyword.value, arg) for arg in call.args if arg.keyword is not None]
    return passed_argument(position, keywords, positional, named, lambda a: bool(a.star))


def contiguous_arguments(call: ast.Call, short: str) -> list[ast.expr]:
    """The arguments of a `CONTIGUOUS` collective's call that NCCL refuses non-contiguous."""
    found = (ast_argument(call, position, keywords) for position, keywords in CONTIGUOUS[short])
    return [arg for arg in found if arg is not None]


@dataclass(frozen=True)
class CollectiveWrite:
    """A parameter of a helper that a collective writes into (or, for `contiguous=True`,
    hands on without `.contiguous()`)."""

    collective: str  # its short name
    callee: str  # as resolved (`torch.distributed.all_reduce`)
    via: tuple[str, ...]  # the helpers on the way, outermost first
    # for `contiguous=True`: it runs only when the caller passes this parameter (`if p is not
    # None:`, `p` defaulting to None or False), else ""
    when: str = ""


class HelperWrites:
    """Which parameters of a project function reach the written argument of a collective
    (memoised per function; what the helpers of one linted file share)."""

    def __init__(self, summaries: Summaries, contiguous: bool = False) -> None:
        self.summaries = summaries
        # For NCCL's contiguity check a `.contiguous()` on the way is the guard, not a view
        self.contiguous = contiguous
        self.views = VIEWS - {"contiguous"} if contiguous else VIEWS
        self._memo: dict[tuple[str, int], dict[int, CollectiveWrite]] = {}

    def of_call(self, written: str) -> tuple[tuple[str, ...], dict[int, CollectiveWrite]] | None:
        """(the function's parameter names, its writes) for a call of the linted file whose
        callee reads `written`, when that is a project function."""
        found = self.summaries.function(written)
        if found is None:
            return None
        path, function = found
        return _param_names(function), self.writes(path, function)

    def writes(
        self, path: str, function: ast.FunctionDef, depth: int = 0
    ) -> dict[int, CollectiveWrite]:
        key = (path, function.lineno)
        if key not in self._memo:
            self._memo[key] = {}  # recursion ends here
            self._memo[key] = self._read(path, function, depth)
        return self._memo[key]

    def _read(self, path: str, function: ast.FunctionDef, depth: int) -> dict[int, CollectiveWrite]:
        params = _param_names(function)
        aliases = _Aliases({name: index for index, name in enumerate(params)}, self.views)
        bindings = self.summaries.files.bindings(path)
        found: dict[int, CollectiveWrite] = {}
        gated = gated_calls(function) if self.contiguous else {}
        for node in _in_order(function):
            if isinstance(node, ast.Assign):
                aliases.bind(node.targets, node.value)
                continue
            written = ast_dotted(node.func)
            if written is None:
                continue
            resolved = bindings.resolve_dotted(written)
            short = collective(resolved, CONTIGUOUS if self.contiguous else WRITTEN)
            if short is not None:
                if self.contiguous:
                    sources: set[int] = set()
                    for argument in contiguous_arguments(node, short):
                        sources |= aliases.sources(argument, False)
                else:
                    sources = aliases.sources(written_argument(node, short), WRITTEN[short][2])
                when = gated.get(id(node), "")
                for index in sources:
                    found.setdefault(
                        index, CollectiveWrite(short, resolved, (function.name,), when)
                    )
                continue
            if depth + 1 >= HELPER_DEPTH:
                continue
            passed = {
                i: aliases.sources(a, False)
                for i, a in enumerate(node.args)
                if not isinstance(a, ast.Starred)
            }
            named = {k.arg: aliases.sources(k.value, False) for k in node.keywords if k.arg}
            if not any(passed.values()) and not any(named.values()):
                continue
            callee = self.summaries.function(written, path)
            if callee is None:
                continue
            inner_params = _param_names(callee[1])
            for slot, write in self.writes(callee[0], callee[1], depth + 1).items():
                if write.when and not _passes(node, write.when, inner_params):
                    continue  # the branch that reaches it is off for this call
                name = inner_params[slot] if slot < len(inner_params) else None
                for index in passed.get(slot, set()) | named.get(name or "", set()):
                    found.setdefault(
                        index,
                        CollectiveWrite(
                            write.collective,
                            write.callee,
                            (function.name, *write.via),
                            gated.get(id(node), ""),
                        ),
                    )
        return found


def _passes(call: ast.Call, name: str, params: tuple[str, ...]) -> bool:
    """`may_pass` of an `ast` call."""
    unpacks = any(isinstance(arg, ast.Starred) for arg in call.args)
    keywords = [k.arg for k in call.keywords]
    return may_pass(name, params, len(call.args), keywords, unpacks)


def written_argument(call: ast.Call, short: str) -> ast.expr | None:
    """The argument the collective `short` writes into."""
    position, keywords, _ = WRITTEN[short]
    return ast_argument(call, position, keywords)


class _Aliases:
    """Local names bound to a parameter or a view of one (source order, last binding wins),
    and names bound to a list of views of one."""

    def __init__(self, params: dict[str, int], views: frozenset[str] = VIEWS) -> None:
        self.views = views
        self.tensors: dict[str, set[int]] = {name: {index} for name, index in params.items()}
        self.lists: dict[str, set[int]] = {}

    def bind(self, targets: list[ast.expr], value: ast.expr) -> None:
        tensor = self.sources(value, False)
        listed = self._list_sources(value)
        for target in targets:
            if not isinstance(target, ast.Name):
                continue
            self.tensors.pop(target.id, None)
            self.lists.pop(target.id, None)
            if tensor:
                self.tensors[target.id] = tensor
            elif listed:
                self.lists[target.id] = listed

    def sources(self, expr: ast.expr | None, as_list: bool) -> set[int]:
        """The parameters whose storage `expr` shares (a list's elements, when `as_list`)."""
        if expr is None:
            return set()
        if as_list:
            return self._list_sources(expr)
        if isinstance(expr, ast.Name):
            return set(self.tensors.get(expr.id, ()))
        if isinstance(expr, ast.Subscript):
            inner = expr.value
            if isinstance(inner, ast.Name) and inner.id in self.lists:
                return set(self.lists[inner.id])  # an element of a list of views
            if isinstance(inner, ast.Call) and _split_of(inner) is not None:
                return self.sources(_split_of(inner), False)
            return self.sources(inner, False)
        if isinstance(expr, ast.Attribute) and expr.attr in VIEW_ATTRIBUTES:
            return self.sources(expr.value, False)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            if expr.func.attr in self.views:
                return self.sources(expr.func.value, False)
        return set()

    def _list_sources(self, expr: ast.expr) -> set[int]:
        if isinstance(expr, ast.Name):
            return set(self.lists.get(expr.id, ()))
        if isinstance(expr, (ast.List, ast.Tuple)):
            out: set[int] = set()
            for element in expr.elts:
                out |= self.sources(element, False)
            return out
        if isinstance(expr, ast.Call):
            if isinstance(expr.func, ast.Name) and expr.func.id in ("list", "tuple") and expr.args:
                return self._list_sources(expr.args[0])
            base = _split_of(expr)
            if base is not None:
                return self.sources(base, False)
        return set()


def _split_of(call: ast.Call) -> ast.expr | None:
    """`g` of `g.chunk(n)`, `torch.split(g, k)` (the tensor a list of views is taken of)."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in SPLITS:
        owner = ast_dotted(func.value)
        if owner in ("torch", "th") and call.args:
            return call.args[0]
        return func.value
    return None


def _param_names(function: ast.FunctionDef) -> tuple[str, ...]:
    args = function.args
    return tuple(a.arg for a in (*args.posonlyargs, *args.args))


def _in_order(function: ast.FunctionDef) -> list[ast.Assign | ast.Call]:
    """The function's assignments and calls in source order (nested scopes left out)."""
    out: list[ast.Assign | ast.Call] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            visit(child)
            if isinstance(child, (ast.Assign, ast.Call)):
                out.append(child)

    visit(function)
    return out
