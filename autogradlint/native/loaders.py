"""Extensions the project's Python builds at run time: `torch.utils.cpp_extension.load(name=...,
sources=[...])`, called as it is or through a helper that hands it its own parameters. Once
loaded, the module is importable by that name (`import scaled_softmax_cuda`), so the name and
its sources are a build declaration like setup.py's."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator

from ..text.ast_walk import ast_dotted, parse_quietly
from ..text.bindings import Bindings

# torch's own loader: the only name taken as one (issue 31 §4: names are never evidence)
_LOAD = "torch.utils.cpp_extension.load"
_Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef


def loaded_extensions(paths: Iterable[str], suffixes: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """For each module the Python files `paths` load with literal names: the file names of the
    sources (those ending in `suffixes`) the load is given."""
    found: dict[str, frozenset[str]] = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read(2_000_000)
        except OSError:
            continue
        if "cpp_extension" not in text:
            continue  # no import of torch's loader: nothing to parse
        for module, files in loads_in(text, suffixes).items():
            found[module] = found.get(module, frozenset()) | files
    return found


def loads_in(text: str, suffixes: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """The modules one Python source loads (see `loaded_extensions`)."""
    tree = parse_quietly(text)
    if tree is None:
        return {}
    bindings = Bindings()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bindings.bind_import(alias.name, alias.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                bindings.bind_from("." * node.level + node.module, alias.name, alias.asname)
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS))]
    found: dict[str, frozenset[str]] = {}
    # A helper that hands its parameters to `load`: (name's index, sources' index or None)
    helpers: dict[str, tuple[int, int | None]] = {}
    for scope in scopes:
        params = _params(scope)
        for call in _calls(scope):
            if bindings.resolve_dotted(ast_dotted(call.func) or "") != _LOAD:
                continue
            name, sources = _argument(call, 0, "name"), _argument(call, 1, "sources")
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                _add(found, name.value, _files(sources, scope, call, suffixes))
            elif (
                isinstance(name, ast.Name)
                and name.id in params
                and not isinstance(scope, ast.Module)
            ):
                given = sources.id if isinstance(sources, ast.Name) else None
                helpers[scope.name] = (
                    params.index(name.id),
                    params.index(given) if given in params else None,
                )
    for scope in scopes:
        for call in _calls(scope):
            helper = helpers.get(ast_dotted(call.func) or "")
            if helper is None:
                continue
            name = _argument(call, helper[0], None)
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                continue
            sources = _argument(call, helper[1], None) if helper[1] is not None else None
            _add(found, name.value, _files(sources, scope, call, suffixes))
    return found


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _add(found: dict[str, frozenset[str]], module: str, files: frozenset[str]) -> None:
    found[module] = found.get(module, frozenset()) | files
    last = module.rsplit(".", 1)[-1]
    found[last] = found.get(last, frozenset()) | files


def _params(scope: _Scope) -> list[str]:
    if isinstance(scope, ast.Module):
        return []
    return [a.arg for a in (*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs)]


def _own(scope: _Scope) -> Iterator[ast.AST]:
    """The nodes of a scope's body, not those of the functions defined in it."""
    pending: list[ast.AST] = list(scope.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (*_FUNCTIONS, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))


def _calls(scope: _Scope) -> Iterator[ast.Call]:
    return (node for node in _own(scope) if isinstance(node, ast.Call))


def _argument(call: ast.Call, index: int, keyword: str | None) -> ast.expr | None:
    """The argument at `index` of a call (or the one named `keyword`)."""
    for given in call.keywords:
        if keyword is not None and given.arg == keyword:
            return given.value
    if index < len(call.args) and not any(
        isinstance(a, ast.Starred) for a in call.args[: index + 1]
    ):
        return call.args[index]
    return None


def _files(
    value: ast.expr | None, scope: _Scope, call: ast.Call, suffixes: tuple[str, ...]
) -> frozenset[str]:
    """The file names of the source literals a `sources` argument holds: written in the call
    (`[srcpath / "a.cu"]`), or bound to the name it passes by the scope's last assignment
    before the call (`sources = [...]`)."""
    if isinstance(value, ast.Name):
        bound = [
            node
            for node in _own(scope)
            if isinstance(node, ast.Assign)
            and node.lineno < call.lineno
            and any(isinstance(t, ast.Name) and t.id == value.id for t in node.targets)
        ]
        value = max(bound, key=lambda node: node.lineno).value if bound else None
    if value is None:
        return frozenset()
    return frozenset(
        os.path.basename(node.value)
        for node in ast.walk(value)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.endswith(suffixes)
    )
