"""What makes a class an autograd Function, from names and `ast` alone: torch's Function base
classes, and the shape of a Function's `forward` as `apply` hands it its inputs."""

from __future__ import annotations

import ast
from typing import NamedTuple

FUNCTION_BASES = frozenset(
    {
        "torch.autograd.Function",
        "torch.autograd.function.Function",
        "torch.autograd.function.InplaceFunction",
        "torch.autograd.function._SingleLevelFunction",
        "torch.autograd.function.NestedIOFunction",
        "torch.autograd.function.FunctionBase",
    }
)
# The names torch's Function classes go by (last component): where the filter starts.
TORCH_FUNCTIONS = frozenset(name.rsplit(".", 1)[-1] for name in FUNCTION_BASES)
# `from torch.autograd import Function as F`: a name that may be a Function, imported as
# another (the group). Starts with a literal, so `re` skips ahead at memory speed.
FUNCTION_ALIAS = r"Function\w*\s+as\s+(\w+)"


def may_name_function(base: str) -> bool:
    """The one text-level rule for "may this base (or import) be an autograd Function": its
    text holds `Function`, as each of torch's names does (`Function`, `InplaceFunction`,
    `FunctionBase`, ...; FUNCTION_BASES) and so does a project's `MyFunction`. An
    over-approximation every byte and text filter shares (the gates, the slicer, the index's
    reader, the incremental split); what is a Function is decided by resolving imports
    against FUNCTION_BASES (analysis/facts.py, view.py)."""
    return "Function" in base


class ForwardParameters(NamedTuple):
    """forward's inputs as `apply` hands them over: after ctx, or all of them in the
    setup_context style."""

    names: tuple[str, ...]
    required: int  # how many have no default
    star: bool  # forward takes *args
    setup_context: bool
    keyword_only: bool  # forward also takes keyword-only parameters
    kwargs: bool = False  # forward takes **kwargs


def forward_parameters(node: ast.ClassDef) -> ForwardParameters | None:
    """The inputs of a class's own forward (the index's signatures and the slicer's apply
    check read them from here)."""
    methods = {
        s.name: s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    forward = methods.get("forward")
    if forward is None:
        return None
    return parameters(forward, "setup_context" in methods)


def parameters(
    forward: ast.FunctionDef | ast.AsyncFunctionDef, setup_context: bool
) -> ForwardParameters:
    args = forward.args
    positional = [*args.posonlyargs, *args.args]
    if any(isinstance(d, ast.Name) and d.id == "classmethod" for d in forward.decorator_list):
        positional = positional[1:]  # `cls`: bound by Python, never passed to `apply`
    if not setup_context:
        positional = positional[1:]  # ctx
    required = len(positional) - len(args.defaults)
    return ForwardParameters(
        tuple(a.arg for a in positional),
        max(required, 0),
        args.vararg is not None,
        setup_context,
        bool(args.kwonlyargs),
        args.kwarg is not None,
    )


class ApplyBinding(NamedTuple):
    """How `Fn.apply(...)` binds to forward's inputs: apply takes positional arguments and
    keywords naming forward's positional inputs, so each of these raises TypeError at the first
    call (semantics D10)."""

    missing: list[str]  # required inputs neither given positionally nor by keyword
    too_many: bool  # more positional arguments than forward has inputs, and no *args
    unknown: list[str]  # keywords that name no positional input (keyword-only ones too)

    @property
    def fails(self) -> bool:
        return bool(self.missing or self.too_many or self.unknown)


def apply_binding(
    names: tuple[str, ...] | list[str], required: int, star: bool, given: int, keywords: list[str]
) -> ApplyBinding:
    """The one test of an `apply` call against forward's inputs (`names`, the first `required`
    without a default, `star` for *args), shared by AGL410 and the slicer's pre-test. A name
    the caller does not know is "" (a Function of another file): it is never a keyword."""
    return ApplyBinding(
        [n for n in names[given:required] if n not in keywords],
        given > len(names) and not star,
        [k for k in keywords if k not in names],
    )
