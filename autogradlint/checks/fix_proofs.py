"""Proofs of the fix preconditions the checks share (preconditions.py): each answers why a
precondition could not be proven, or None when it holds. Conservative: what cannot be read
(a decorator from outside the project, a class the project index does not know) is unproven.
"""

from __future__ import annotations

import ast
import os
import re

import libcst as cst

from ..analysis.names import dotted
from ..analysis.walk import FastVisitor
from ..text.ast_walk import ast_dotted, parse_quietly
from ..view import instance_uses
from .base import CheckContext
from .common import super_calls

# Decorators of torch that run the function they wrap without catching what it raises
# (torch/autograd/function.py, torch/amp/autocast_mode.py: a `with` of grad mode or autocast).
_TRANSPARENT = frozenset(
    {
        "staticmethod",
        "classmethod",
        "torch.autograd.function.once_differentiable",
        "torch.amp.custom_bwd",
        "torch.amp.autocast_mode.custom_bwd",
        "torch.cuda.amp.custom_bwd",
        "torch.cuda.amp.autocast_mode.custom_bwd",
    }
)
# Context managers that never suppress an exception: grad mode and autocast.
_NON_SUPPRESSING = frozenset(
    {
        "torch.no_grad",
        "torch.enable_grad",
        "torch.set_grad_enabled",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.enable_grad",
        "torch.autograd.set_grad_enabled",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.enable_grad",
        "torch.autograd.grad_mode.set_grad_enabled",
        "torch.autocast",
        "torch.amp.autocast",
        "torch.cuda.amp.autocast",
        "torch.cpu.amp.autocast",
    }
)
# `try` statements (`try ... except*` is a node of its own from Python 3.11).
_TRIES: tuple[type[ast.AST], ...] = tuple(
    t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None
)
# What hands a function on without calling it: functools' copying of its name and docs.
_WRAPS = frozenset({"functools.wraps", "functools.update_wrapper", "wraps", "update_wrapper"})


# --- nothing-catches: the decorators of backward, and direct callers ---------------------------
def decorator_may_catch(ctx: CheckContext, method: cst.FunctionDef) -> str | None:
    """Why a decorator of `method` may catch what the method raises (None: none can): each
    decorator is torch's own transparent one, or a project function whose source is read."""
    for decorator in method.decorators:
        expr = decorator.decorator
        call = expr if isinstance(expr, cst.Call) else None
        target = call.func if call is not None else expr
        written = dotted(target)
        if written is None:
            return "a decorator of backward is an expression whose source cannot be followed"
        resolved = ctx.facts.imports.resolve(target) or written
        if resolved in _TRANSPARENT or written in _TRANSPARENT or resolved in _NON_SUPPRESSING:
            continue  # torch's own, or a grad-mode manager used as a decorator
        found = ctx.summaries.function(written)
        if found is None:
            return f"the source of the decorator `@{written}` is not in the project"
        path, function = found
        why = _wrapper_may_catch(function, call is not None, ctx.summaries.files.bindings(path))
        if why is not None:
            return f"the decorator `@{written}` ({os.path.basename(path)}:{function.lineno}) {why}"
    return None


def _wrapper_may_catch(function: ast.FunctionDef, factory: bool, bindings: object) -> str | None:
    """Why a decorator's source may catch an exception of the function it wraps: a `try`, a
    context manager that may suppress, or the wrapped function (or the wrapper) handed to
    other code instead of being called or returned."""
    resolve = getattr(bindings, "resolve_dotted", lambda text: text)
    for node in ast.walk(function):
        if isinstance(node, _TRIES):
            return f"holds a `try` (line {getattr(node, 'lineno', '?')}) that may catch the error and fall back"
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                manager = item.context_expr
                name = ast_dotted(manager.func if isinstance(manager, ast.Call) else manager)
                if name is None or resolve(name) not in _NON_SUPPRESSING:
                    return (
                        f"enters a context manager (line {node.lineno}) that may suppress the error"
                    )
    # The function it wraps: the decorator's first parameter, or for a factory (`@deco(...)`)
    # the first parameter of each function it defines. The functions it defines: the wrappers.
    nested = [n for n in function.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    layers = nested if factory else [function]
    wrapped = {_first_parameter(f) for f in layers} - {None}
    defined = {n.name for n in ast.walk(function) if isinstance(n, ast.FunctionDef)} - {
        function.name
    }
    parents = {id(c): p for p in ast.walk(function) for c in ast.iter_child_nodes(p)}
    for node in ast.walk(function):
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
            continue
        if node.id not in wrapped and node.id not in defined:
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is node and node.id in wrapped:
            continue  # called: what it raises goes through, as nothing above catches it
        if isinstance(parent, (ast.Return, ast.Attribute)):
            continue  # returned as it is, or `fn.__name__`
        if isinstance(parent, ast.Call) and resolve(ast_dotted(parent.func) or "") in _WRAPS:
            continue
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Call):
            if resolve(ast_dotted(parent.func.func) or "") in _WRAPS:
                continue  # `functools.wraps(fn)(wrapper)`
        return f"hands `{node.id}` to other code (line {node.lineno}), which may catch its error"
    return None


def _first_parameter(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    params = [*function.args.posonlyargs, *function.args.args]
    return params[0].arg if params else None


def backward_called_directly(ctx: CheckContext, cls: str) -> str | None:
    """Why a caller other than autograd's engine may catch what `cls.backward` raises: the
    file calls it by name (`Fn.backward(ctx, g)`), or a subclass of it here calls
    `super().backward(...)`. (The engine lets it propagate to `.backward()`'s caller.)"""
    text = ctx.facts.source
    found = re.search(rf"(?<![\w.]){re.escape(cls)}\s*\.\s*backward\s*\(", text)
    if found is not None:
        line = text.count("\n", 0, found.start()) + 1
        return f"`{cls}.backward` is called directly at line {line}, by a caller that may catch"
    family = {cls}
    changed = True
    while changed:
        changed = False
        for info in ctx.facts.classes:
            if info.name not in family and any(
                b.rsplit(".", 1)[-1] in family for b in info.base_names
            ):
                family.add(info.name)
                changed = True
    for info in ctx.facts.classes:
        if info.name != cls and info.name in family and super_calls(info.node, "backward"):
            return f"the subclass `{info.name}` calls `super().backward(...)`, and may catch"
    return None


# --- locals-not-introspected -------------------------------------------------------------------
_INTROSPECTION = frozenset(
    {"locals", "vars", "eval", "exec", "_getframe", "currentframe", "getouterframes", "stack"}
)
_FRAME_ATTRIBUTES = frozenset({"f_locals", "f_back", "tb_frame", "gi_frame", "cr_frame"})


def introspects_locals(function: cst.FunctionDef) -> str | None:
    """Why `function` may read its local variables other than by name (None: it cannot):
    `locals()`, `vars()`, `eval`/`exec`, or its frame (`sys._getframe()`,
    `inspect.currentframe()`, `.f_locals`). Rebinding a local then shows through them."""
    found: list[str] = []

    class _Find(FastVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            name = dotted(call.func) or ""
            last = name.rsplit(".", 1)[-1]
            if last in _INTROSPECTION and (last != "stack" or name == "inspect.stack"):
                found.append(f"`{name}()`")

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if node.attr.value in _FRAME_ATTRIBUTES:
                found.append(f"`.{node.attr.value}`")

    _Find().walk(function)
    if not found:
        return None
    return f"backward reads its own variables through {found[0]}, which would see the copy"


# --- torch-in-scope ----------------------------------------------------------------------------
def torch_unreachable(
    ctx: CheckContext, owner: str | None, function: cst.FunctionDef
) -> str | None:
    """Why writing `torch.<...>` in `function` (a method of class `owner`, or a function) may
    change what the module does: torch is not bound there, and a new module-level `import
    torch` could make the module fail to import where it did not (the fix loop places it
    after the module's first unconditional import of torch, when there is one)."""
    names = ctx.torch_names
    line = names.function_line(owner, function.name.value)
    if line is None:
        return "the function cannot be told apart from another of its name in the file"
    _name, needs_import = names.at(line)
    if needs_import and names.first_import is None:
        return (
            "torch is not bound there and the module imports it only inside a function or "
            "under a guard: a module-level `import torch` could make it fail to import"
        )
    return None


# --- no-instance -------------------------------------------------------------------------------
def instances_of(ctx: CheckContext, cls: str) -> str | None:
    """Why an instance of `cls` (or of a subclass) may exist in the project (None: none can):
    a call of it in this file, or the class passed on as a value, read from `ast`; in the
    project's other files, what the project index found (FileView.uses). A class the index
    did not look at (a file linted without its project) is not proven free of them."""
    tree = parse_quietly(ctx.facts.source)
    if tree is None:
        return "the file does not parse as a whole"
    family = {cls}
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name not in family:
                if any((ast_dotted(b) or "").rsplit(".", 1)[-1] in family for b in node.bases):
                    family.add(node.name)
                    changed = True
    here = instance_uses(tree, family, "this file")
    if here:
        return here
    known = {name: where for name, _sub, where in ctx.facts.project.uses}
    if cls not in known:
        return "the project was not indexed for it (a file checked on its own, or a class the index cannot resolve)"
    elsewhere = known[cls]
    if elsewhere is None:
        return "the project index did not look for its instances"
    return elsewhere or None


def subclassed_elsewhere(ctx: CheckContext, cls: str) -> str | None:
    """Where another file of the project subclasses `cls` (None: nowhere, per the index)."""
    known = {name: sub for name, sub, _where in ctx.facts.project.uses}
    if cls not in known:
        return "the project was not indexed for it"
    return f"it is subclassed in another file ({known[cls]})" if known[cls] else None
