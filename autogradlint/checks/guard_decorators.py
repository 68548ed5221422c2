"""Decorators that make every tensor argument of a backward contiguous before it runs (liger's
`@ensure_contiguous`, fla's `@input_guard`), told by their source or named in the configuration:
under one, the gradient a backward receives is dense (AGL201, AGL204)."""

from __future__ import annotations

import ast
from collections.abc import Callable

import libcst as cst

from ..analysis.names import dotted
from ..text.ast_walk import ast_dotted
from ..text.ast_walk import walk as walk_ast
from .base import CheckContext
from .common import keyword


def makes_arguments_contiguous(
    decorator: ast.FunctionDef, helper_makes_contiguous: Callable[[str], bool] = lambda _: False
) -> bool:
    """Whether a decorator's wrapper makes the arguments contiguous before calling what it
    wraps: a nested def that calls `.contiguous()`, itself or through a helper of the
    decorator's file (`helper_makes_contiguous`: fla's `_contiguous_if_needed`), and then the
    decorator's parameter (the function), passing on what it built (`fn(ctx, *args, **kwargs)`
    after `args = [a.contiguous() ... for a in args]`)."""
    params = [a.arg for a in (*decorator.args.posonlyargs, *decorator.args.args)]
    if not params:
        return False
    wrapped = params[0]
    for inner in walk_ast(decorator):
        if not isinstance(inner, ast.FunctionDef) or inner is decorator:
            continue
        calls = [n for n in walk_ast(inner) if isinstance(n, ast.Call)]
        contiguous = any(
            (isinstance(c.func, ast.Attribute) and c.func.attr == "contiguous")
            or (isinstance(c.func, ast.Name) and helper_makes_contiguous(c.func.id))
            for c in calls
        )
        forwards = any(isinstance(c.func, ast.Name) and c.func.id == wrapped for c in calls)
        if contiguous and forwards:
            return True
    return False


def guarded_by_decorator(
    ctx: CheckContext, method: cst.FunctionDef, read_source: bool = True
) -> bool:
    """A decorator that makes every tensor argument contiguous: one whose wrapper calls
    `.contiguous()` and then the function it wraps (liger's `@ensure_contiguous`, fla's
    `@input_guard`, read from their source), or one the configuration names."""
    for decorator in method.decorators:
        expr = decorator.decorator
        call = expr if isinstance(expr, cst.Call) else None
        written = dotted(call.func if call else expr) or ""
        named = written.rsplit(".", 1)[-1] in ctx.settings.guard_decorators
        if not named and not (read_source and contiguous_wrapper(ctx, written)):
            continue
        opt_out = call is not None and keyword(call, "no_guard_contiguous")
        if not (isinstance(opt_out, cst.Name) and opt_out.value == "True"):
            return True
    return False


def contiguous_wrapper(
    ctx: CheckContext, written: str, path: str | None = None, hops: int = 0
) -> bool:
    """Whether the decorator `written` (in file `path`) is shown, by its source, to make
    the arguments contiguous: its own wrapper does, or it hands the function to one that
    does (fla's `contiguous(fn)` is `return input_guard(fn)`)."""
    if not written or written in ("staticmethod", "classmethod"):
        return False
    summaries = ctx.summaries
    found = summaries.function(written, path)
    if found is None:
        return False
    path = found[0]
    body = found[1].body
    params = [a.arg for a in (*found[1].args.posonlyargs, *found[1].args.args)]
    last = body[-1] if body else None
    if (
        hops < 3
        and isinstance(last, ast.Return)
        and isinstance(last.value, ast.Call)
        and [ast_dotted(a) for a in last.value.args] == params[:1]
    ):
        other = ast_dotted(last.value.func)  # `return input_guard(fn)`: an alias
        if other is not None and contiguous_wrapper(ctx, other, path, hops + 1):
            return True

    def helper_makes_contiguous(name: str) -> bool:
        helper = summaries.function(name, path)
        return helper is not None and any(
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "contiguous"
            for n in walk_ast(helper[1])
        )

    return makes_arguments_contiguous(found[1], helper_makes_contiguous)


def unless_guarded(ctx: CheckContext, method: cst.FunctionDef, check: Callable[[], None]) -> None:
    """Run `check` on a backward, and drop what it reported if a decorator makes every
    argument contiguous first. A decorator's source is read only when there is something it
    could answer for: resolving every decorator of every backward (often in other files)
    costs more."""
    if guarded_by_decorator(ctx, method, read_source=False):
        return  # one the configuration names
    reported = len(ctx.violations)
    check()
    if len(ctx.violations) > reported and guarded_by_decorator(ctx, method):
        del ctx.violations[reported:]
