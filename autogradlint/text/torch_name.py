"""Which name spells `torch` where a fix edits, and where a new `import torch` goes.

A fix that writes `torch.enable_grad()` must not write a name that means something else at that
point: `import torch as t` is useless in a function that binds its own `t` (the fix would raise
UnboundLocalError). A module alias is used only when every binding of it at module scope is an
import of torch (or the `torch = None` fallback of a guarded import) and no scope around the fix
binds it; an enclosing function's own `import torch` (a factory that imports torch lazily) is
used when it runs, unconditionally, before the nested scope is defined. Otherwise torch is
imported under a fresh name, right after the module's first unconditional import of torch, so
the module imports exactly when it did before; where there is no such import, a new one could
make the module fail to import without torch, and the fix that needs it is not safe
(`torch-in-scope`). Decided from CPython's `ast` of the whole file, once per fix pass and only
when a fix needs torch.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..model import LineEdit
from .splice import apply_line_edits, split_lines

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_FRESH = ("torch", "_torch", "torch_", "_agl_torch")


def parse(text: str) -> ast.Module | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes etc. are not our business here
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


def _torch_aliases(node: ast.Import) -> Iterator[str]:
    """Names an `import` statement binds to the torch module itself."""
    for alias in node.names:
        if alias.name == "torch" and alias.asname:
            yield alias.asname
        elif alias.asname is None and (alias.name == "torch" or alias.name.startswith("torch.")):
            yield "torch"


def _bound_names(node: ast.AST) -> Iterator[str]:
    """Names one node binds in the scope it appears in."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        yield node.id
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield alias.asname or alias.name.split(".", 1)[0]
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from node.names
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest


Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef


def _scope_bindings(scope: Scope) -> set[str]:
    """Every name bound directly in `scope` (comprehension targets included: conservative),
    without entering the bodies of nested functions, lambdas and classes."""
    out: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        for arg in ast.walk(scope.args):
            out.update(_bound_names(arg))
    stack: list[ast.AST] = list(
        scope.body if isinstance(scope.body, list) else [scope.body]  # a lambda's body
    )
    while stack:
        node = stack.pop()
        out.update(_bound_names(node))
        if isinstance(node, _SCOPES):
            # Their decorators, defaults and bases run here; their bodies do not.
            extra: list[ast.AST] = list(getattr(node, "decorator_list", []))
            if isinstance(node, ast.ClassDef):
                extra += node.bases + [k.value for k in node.keywords]
            else:
                extra += node.args.defaults + [d for d in node.args.kw_defaults if d]
            stack.extend(extra)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


@dataclass
class _ModuleNames:
    """What the module scope binds: torch aliases, and every other binding of a name."""

    torch_aliases: set[str] = field(default_factory=set)
    other: set[str] = field(default_factory=set)  # bound at module scope by something else
    declared_global: set[str] = field(default_factory=set)  # `global x` anywhere
    mentioned: set[str] = field(default_factory=set)  # every identifier in the file


def _module_names(tree: ast.Module) -> _ModuleNames:
    names = _ModuleNames()

    def module_scope(statements: list[ast.stmt], in_handler: bool) -> None:
        for stmt in statements:
            if isinstance(stmt, ast.Import):
                aliases = set(_torch_aliases(stmt))
                names.torch_aliases |= aliases
                names.other |= set(_bound_names(stmt)) - aliases
            elif in_handler and _is_fallback(stmt):
                pass  # `torch = None` where `import torch` failed
            else:
                for node in _own_nodes(stmt):
                    names.other.update(_bound_names(node))
            if isinstance(stmt, _SCOPES):
                continue
            for attr in ("body", "orelse", "finalbody"):
                module_scope(getattr(stmt, attr, None) or [], in_handler)
            for handler in getattr(stmt, "handlers", None) or []:
                if handler.name:
                    names.other.add(handler.name)
                module_scope(handler.body, True)
            for case in getattr(stmt, "cases", None) or []:
                for node in ast.walk(case.pattern):
                    names.other.update(_bound_names(node))
                module_scope(case.body, in_handler)

    module_scope(tree.body, False)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            names.declared_global.update(node.names)
        if isinstance(node, ast.Name):
            names.mentioned.add(node.id)
        else:
            names.mentioned.update(_bound_names(node))
    return names


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _own_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of one statement outside its statement blocks and nested scopes' bodies (a
    def or class contributes its name, decorators, defaults and bases)."""
    yield stmt
    stack: list[ast.AST] = []
    for name, value in ast.iter_fields(stmt):
        if name in _BLOCKS or (isinstance(stmt, _SCOPES) and name == "args"):
            continue
        stack.extend(value if isinstance(value, list) else [value])
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        stack.extend(stmt.args.defaults + [d for d in stmt.args.kw_defaults if d])
    while stack:
        node = stack.pop()
        if not isinstance(node, ast.AST):
            continue
        yield node
        if isinstance(node, ast.Lambda):
            stack.extend(node.args.defaults)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _is_fallback(stmt: ast.stmt) -> bool:
    """`name = None` (or False): the stand-in of an optional import in its `except` clause."""
    return (
        isinstance(stmt, ast.Assign)
        and all(isinstance(t, ast.Name) for t in stmt.targets)
        and isinstance(stmt.value, ast.Constant)
        and stmt.value.value in (None, False)
    )


def _enclosing_scopes(tree: ast.Module, line: int) -> list[Scope]:
    """The functions, lambdas and classes whose lines hold `line`, outermost first."""
    chain: list[Scope] = []
    nodes: list[ast.AST] = list(tree.body)
    while nodes:
        inner = [
            node
            for node in nodes
            if isinstance(node, _SCOPES) and node.lineno <= line <= (node.end_lineno or line)
        ]
        if inner:
            chain.append(inner[0])
            nodes = list(ast.iter_child_nodes(inner[0]))
            continue
        # Not a scope itself: look inside compound statements for one.
        nodes = [
            child
            for node in nodes
            if getattr(node, "lineno", 0) <= line <= (getattr(node, "end_lineno", 0) or 0)
            for child in ast.iter_child_nodes(node)
        ]
    return chain


def _imports_torch(stmt: ast.stmt) -> bool:
    """Whether a statement imports torch or one of its submodules (either binds torch in
    `sys.modules`: `import torch.nn`, `from torch.autograd import grad`)."""
    if isinstance(stmt, ast.Import):
        return any(a.name == "torch" or a.name.startswith("torch.") for a in stmt.names)
    if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
        return stmt.module == "torch" or stmt.module.startswith("torch.")
    return False


def _closure_aliases(chain: list[Scope], local: dict[int, set[str]]) -> set[str]:
    """Torch aliases an enclosing function binds for the innermost scope of `chain`: by an
    `import torch [as name]` that is a statement of its own body (not under an if, a try or a
    loop) before the statement that holds the nested scope, where nothing else in that
    function binds the name and no scope between binds it. Such an import has run whenever
    the nested code can run."""
    found: set[str] = set()
    shadowed: set[str] = set()
    # From the innermost scope outwards: the first function scope that binds a name decides.
    for depth in range(len(chain) - 1, -1, -1):
        scope = chain[depth]
        if isinstance(scope, ast.ClassDef) and depth != len(chain) - 1:
            continue  # a class body's names are not visible to the functions inside it
        names = local[id(scope)]
        if depth == len(chain) - 1 or not isinstance(
            scope, (ast.FunctionDef, ast.AsyncFunctionDef)
        ):
            shadowed |= names
            continue
        inner = chain[depth + 1]
        before: set[str] = set()
        for stmt in scope.body:
            if stmt.lineno >= inner.lineno:
                break
            if isinstance(stmt, ast.Import):
                before |= set(_torch_aliases(stmt))
        for alias in names - shadowed:
            if alias in before and _only_torch_imports(scope, alias):
                found.add(alias)
        shadowed |= names
    return found


def _only_torch_imports(scope: ast.FunctionDef | ast.AsyncFunctionDef, alias: str) -> bool:
    """Whether every binding of `alias` directly in `scope` is an import of torch as it."""
    if any(alias in set(_bound_names(node)) for node in ast.walk(scope.args)):
        return False
    stack: list[ast.AST] = list(scope.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            if alias in set(_bound_names(node)) and alias not in set(_torch_aliases(node)):
                return False
            continue
        if alias in set(_bound_names(node)):
            return False
        if isinstance(node, _SCOPES):
            # Their decorators, defaults and bases run here; their bodies do not.
            stack.extend(getattr(node, "decorator_list", []))
            if isinstance(node, ast.ClassDef):
                stack.extend(node.bases + [k.value for k in node.keywords])
            else:
                stack.extend(node.args.defaults + [d for d in node.args.kw_defaults if d])
            continue
        stack.extend(ast.iter_child_nodes(node))
    return True


class TorchNames:
    """Answers, per fix location, the spelling of torch (memoised per file text)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tree = parse(text)
        self.module = _module_names(self.tree) if self.tree is not None else None
        # The first module-level statement, run unconditionally, that imports torch: a new
        # `import torch` right after it changes nothing about whether the module imports.
        self.first_import: ast.stmt | None = None
        for stmt in self.tree.body if self.tree is not None else ():
            if _imports_torch(stmt):
                self.first_import = stmt
                break

    def function_line(self, owner: str | None, name: str) -> int | None:
        """A line inside the body of the one function `name` defined directly in a class
        `owner` (or, for None, outside any class); None when there is not exactly one."""
        if self.tree is None:
            return None
        found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        stack: list[tuple[ast.AST, ast.AST | None]] = [(self.tree, None)]
        while stack:
            node, parent = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                in_class = isinstance(parent, ast.ClassDef)
                if (owner is None and not in_class) or (
                    in_class and owner is not None and parent.name == owner  # type: ignore[union-attr]
                ):
                    found.append(node)
            scope = node if isinstance(node, _SCOPES) else parent
            stack.extend((child, scope) for child in ast.iter_child_nodes(node))
        return found[0].body[0].lineno if len(found) == 1 else None

    def at(self, line: int) -> tuple[str, bool]:
        """(name, whether `import torch [as name]` must be added) for code at `line`."""
        if self.tree is None or self.module is None:
            return "torch", False  # unparsable: the fix is refused later by verification
        chain = _enclosing_scopes(self.tree, line)
        # Methods do not see their class's names; code directly in a class body does.
        visible: list[Scope] = [s for s in chain if not isinstance(s, ast.ClassDef)]
        if chain and isinstance(chain[-1], ast.ClassDef):
            visible.append(chain[-1])
        bindings = {id(scope): _scope_bindings(scope) for scope in chain}
        local: set[str] = set()
        for scope in visible:
            local |= bindings[id(scope)]
        closure = _closure_aliases(chain, bindings)
        if closure:
            return sorted(closure, key=lambda alias: (alias != "torch", alias))[0], False
        module = self.module
        usable = sorted(
            (
                alias
                for alias in module.torch_aliases
                if alias not in module.other
                and alias not in module.declared_global
                and alias not in local
            ),
            key=lambda alias: (alias != "torch", alias),
        )
        if usable:
            return usable[0], False
        for fresh in _FRESH:
            taken = fresh in module.mentioned if fresh != "torch" else False
            bound = fresh in module.other or fresh in module.torch_aliases
            if (
                not taken
                and not bound
                and fresh not in local
                and fresh not in module.declared_global
            ):
                return fresh, True
        n = 2
        while f"_agl_torch{n}" in module.mentioned:
            n += 1
        return f"_agl_torch{n}", True


def import_statement(alias: str) -> str:
    return "import torch" if alias == "torch" else f"import torch as {alias}"


def import_edit(text: str, aliases: set[str], tree: ast.Module | None = None) -> LineEdit | None:
    """The insertion of `import torch [as alias]` lines after the module docstring and every
    `__future__` import (including one that shares a line with another statement), or after
    the leading comments (shebang, coding cookie) when there is neither."""
    if not aliases:
        return None
    tree = tree if tree is not None else parse(text)
    newline = _newline(text)
    block = tuple(import_statement(alias) + newline for alias in sorted(aliases))
    lines = split_lines(text)
    loaded = next((s for s in tree.body if _imports_torch(s)), None) if tree is not None else None
    if loaded is not None:
        # After the first unconditional import of torch: torch is loaded by then, so the new
        # line only binds a name (placed above it, it could run before code that decides
        # whether, or how, torch loads: `os.environ[...] = ...`, `sys.path.insert(...)`).
        end = min(loaded.end_lineno or loaded.lineno, len(lines))
        return LineEdit(end, end, block)
    if tree is None or not tree.body:
        header = 0
        for index, line in enumerate(lines):
            if line.strip() and not line.lstrip().startswith("#"):
                break
            header = index + 1
        return LineEdit(header, header, block)
    body = tree.body
    last = -1
    for index, stmt in enumerate(body):
        is_doc = (
            index == 0
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        )
        is_future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if not (is_doc or is_future):
            break
        last = index
    if last == -1:
        first = _first_line(body[0])
    else:
        end = body[last].end_lineno or body[last].lineno
        following = body[last + 1] if last + 1 < len(body) else None
        if following is not None and _first_line(following) > end:
            first = _first_line(following)  # right above it: after its comments, in its block
        else:
            first = end + 1
    at = min(first - 1, len(lines))
    return LineEdit(at, at, block)


def add_imports(text: str, aliases: set[str], tree: ast.Module | None = None) -> str:
    edit = import_edit(text, aliases, tree)
    return text if edit is None else apply_line_edits(text, [edit])


def _first_line(stmt: ast.stmt) -> int:
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])


def _newline(text: str) -> str:
    match = re.search(r"\r\n|\r|\n", text)
    return match.group() if match else "\n"
