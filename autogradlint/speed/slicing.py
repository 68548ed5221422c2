"""Parse only what can hold a finding: the lines a check may read, chosen with CPython's `ast`.

libcst costs ~50 ms per file; `ast` is an order of magnitude cheaper. preselect.py first keeps,
from the text, the statements that can matter; `ast` parses just those and this module picks the
lines a check may read (classes of interest, loaders, direct calls, and the headers around them);
libcst parses only these lines, positions mapped back. Import bindings are read from the `ast`
tree, so import lines never reach libcst at all. A file with no class of interest is never
handed to libcst.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from itertools import compress

from ..checks.reads import Reads
from ..checks.registry import EVERY_CHECK_READS
from ..settings import DEFAULT_LOADERS, HELPER_DEPTH
from ..text.ast_walk import ast_dotted
from ..text.ast_walk import walk as walk_ast
from ..text.bindings import Binding, Bindings
from ..text.constants import positional_count, sequence_constants, starred_names
from ..text.functions import apply_binding, forward_parameters, may_name_function
from ..text.hierarchy import function_like
from ..text.marks import (
    alias_offsets,
    direct_call_offsets,
    holds_graph_call,
    instance_call_offsets,
)
from ..text.statements import blank_outside, chunk_starts
from .op_definitions import op_definition_spans
from .preselect import kept_ranges, triton_kernels


@dataclass
class Slice:
    source: str
    triton_kernels: set[str] = field(default_factory=set)
    # The `ast` tree and which original lines the slice kept: positions.Layout reads where
    # statements are from them, and only when a finding needs placing.
    tree: ast.Module | None = None
    kept: list[bool] = field(default_factory=list)
    # The slice holds only the kept lines; line_map[i] is the original number of its line i+1.
    line_map: list[int] = field(default_factory=list)
    # What the import statements bind, in source order (see import_bindings).
    imports: list[Binding] = field(default_factory=list)


HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})


def _function_like_names(
    tree: ast.Module,
    known: frozenset[str] = frozenset(),
    statements: list[ast.stmt] | None = None,
) -> set[str]:
    """Classes that may be autograd Functions: a base named *Function, or such a local class."""
    statements = statements if statements is not None else _statements(tree)
    classes = [n for n in statements if isinstance(n, ast.ClassDef)]
    seeds: set[str] = set(known)
    for node in statements:  # `from torch.autograd import Function as F` makes `F` one too
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if may_name_function(alias.name) and alias.asname:
                    seeds.add(alias.asname)
    return function_like(
        ((node.name, [_decorator_text(base) for base in node.bases]) for node in classes), seeds
    )


def _is_hook(stmt: ast.stmt) -> bool:
    """`def __torch_function__`/`__torch_dispatch__`, or `__torch_function__ = ...`."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return stmt.name in HOOKS
    return isinstance(stmt, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id in HOOKS for target in stmt.targets
    )


def _class_of_interest(node: ast.ClassDef, function_like: set[str], hooks: bool) -> bool:
    """An autograd Function (`function_like`: the checks that read them are enabled), or,
    when `hooks`, a class with a hook."""
    return node.name in function_like or (hooks and any(_is_hook(stmt) for stmt in node.body))


def _decorator_text(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    return ast_dotted(node) or ""


def _statements(node: ast.AST) -> list[ast.stmt]:
    """`node` and every statement nested in it; expressions are never entered (cheap)."""
    out: list[ast.stmt] = []
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.stmt):
            out.append(current)
        for attr in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(current, attr, None)
            if isinstance(children, list):
                stack.extend(children)
    return out


def _span(stmt: ast.stmt) -> tuple[int, int]:
    start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    return start, stmt.end_lineno or stmt.lineno


def _callee_text(expr: ast.expr) -> str:
    """`a.b.c`, with intermediate calls rendered `()` (`MoeLoader().load`), as facts renders it."""
    parts: list[str] = []
    while True:
        if isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        elif isinstance(expr, ast.Call):
            parts.append("()")
            expr = expr.func
        elif isinstance(expr, ast.Name):
            parts.append(expr.id)
            break
        else:
            return ""
    text = ""
    for part in reversed(parts):
        text = text + part if part == "()" or not text else f"{text}.{part}"
    return text


@dataclass
class _Selector:
    """Decides which lines of each statement a check may read (see select)."""

    function_like: set[str]  # the Function classes kept whole (none unless they are read)
    loaders: tuple[str, ...]  # extension loaders (read with the Functions)
    module_aliases: dict[str, str]  # module-scope import bindings: local name -> qualified
    call_lines: set[int]  # lines with a direct call the checks read (`Fn.forward(`)
    reads: Reads

    def is_loader(self, call: ast.Call) -> bool:
        """`ext = load(...)` with a configured loader; a name bound at module scope must
        resolve to one (`tl.load` is triton.language.load, `torch.load` is not a loader)."""
        text = _callee_text(call.func)
        last = text.rsplit(".", 1)[-1]
        if not any(fnmatchcase(last, p.rsplit(".", 1)[-1]) for p in self.loaders):
            return False
        head, dot, rest = text.partition(".")
        target = self.module_aliases.get(head)
        if target is None:
            return True  # a local name or a function-local import: let facts decide
        resolved = f"{target}{dot}{rest}"
        return any(fnmatchcase(resolved, pattern) for pattern in self.loaders)

    def select(self, stmt: ast.stmt, keep: list[tuple[int, int]]) -> bool:
        """Add the line ranges of `stmt` that a check may read to `keep`; True if any.

        Classes of interest (minus methods no check reads), extension loads and direct
        Function calls are kept; imports are not (see import_bindings). A def, class or
        compound statement that merely contains them keeps only its own header lines and,
        in each clause, what is selected (or its smallest statement, so the clause stays
        valid): a Function defined inside a 3,000-line test class or `if HAS_TRITON:` block
        costs its own lines, not the block's.
        """
        start, end = _span(stmt)
        if isinstance(stmt, _DEFS) and registers_handler(stmt, self.reads.handler_ops):
            keep.append((start, end))  # a dispatch handler registered for an op
            return True
        if isinstance(stmt, ast.ClassDef) and stmt.name in self.function_like:
            keep.append((start, end))
            return True
        if isinstance(stmt, ast.ClassDef) and _class_of_interest(
            stmt, self.function_like, self.reads.overrides
        ):
            # A class with a hook: the checks read its bases and the hook methods only.
            keep.append((start, max(start, _span(stmt.body[0])[0] - 1)))
            for member in stmt.body:
                if _is_hook(member):
                    keep.append(_span(member))
                else:
                    self.select(member, keep)
            return True
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner: list[tuple[int, int]] = []
            if not any([self.select(child, inner) for child in stmt.body]):
                return False
            keep.append((start, max(start, _span(stmt.body[0])[0] - 1)))
            keep.extend(inner)
            return True
        blocks = _blocks(stmt)
        if not blocks:  # a simple statement
            if (
                self.reads.functions
                and isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, ast.Call)
                and self.is_loader(stmt.value)
            ) or any(start <= line <= end for line in self.call_lines):
                keep.append((start, end))
                return True
            return False
        inner = []
        chosen = [any([self.select(child, inner) for child in block]) for block in blocks]
        if not any(chosen):
            return False
        inside: set[int] = set()
        for block in blocks:
            for child in block:
                first, last = _span(child)
                inside.update(range(first, last + 1))
        # The statement's own lines (`if ...:`, `else:`, `except ...:`), then each clause.
        keep.extend((line, line) for line in range(start, end + 1) if line not in inside)
        keep.extend(inner)
        for block, selected in zip(blocks, chosen, strict=True):
            if not selected:
                keep.append(_span(min(block, key=lambda c: _span(c)[1] - _span(c)[0])))
        return True


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists of a compound statement's clauses (none for a simple statement)."""
    blocks: list[list[ast.stmt]] = []
    for attr in ("body", "handlers", "orelse", "finalbody", "cases"):
        value = getattr(stmt, attr, None)
        if not value:
            continue
        if attr in ("handlers", "cases"):  # except handlers and match cases hold a body each
            blocks.extend(clause.body for clause in value if clause.body)
        else:
            blocks.append(value)
    return blocks


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def ctx_step_spans(statements: list[ast.stmt]) -> list[tuple[int, int]]:
    """Module-level defs whose first parameter is annotated `...FunctionCtx` and that read
    `ctx.saved_tensors`: backward steps written apart, which family A reads as backwards
    (reentrant.ctx_backward_step decides; preselect's `_ctx_step_chunks` is the text twin)."""
    spans = []
    for stmt in statements:
        if not isinstance(stmt, _DEFS):
            continue
        params = [*stmt.args.posonlyargs, *stmt.args.args]
        if not params or params[0].annotation is None:
            continue
        if not ast.unparse(params[0].annotation).endswith(("FunctionCtx", "BackwardCFunction")):
            continue
        ctx = params[0].arg
        if any(
            isinstance(sub, ast.Attribute)
            and sub.attr == "saved_tensors"
            and isinstance(sub.value, ast.Name)
            and sub.value.id == ctx
            for sub in walk_ast(stmt)
        ):
            spans.append(_span(stmt))
    return spans


def custom_op_spans(statements: list[ast.stmt]) -> list[tuple[int, int]]:
    """A torch.library custom op's autograd, at module level: each `register_autograd(...)`
    call, the functions it names (backward, setup_context) and the op's own definition
    (named by the call's receiver, or by its `"ns::op"` string). preselect's
    `_custom_op_chunks` is the text twin."""
    calls = [
        stmt
        for stmt in statements
        if isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and _callee_text(stmt.value.func).rsplit(".", 1)[-1] == "register_autograd"
    ]
    if not calls:
        return _handed_class_spans(statements)
    names: set[str] = set()
    for call in calls:
        for sub in walk_ast(call):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
            elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                names.add(sub.value)
    spans = [_span(call) for call in calls]
    for stmt in statements:
        if not isinstance(stmt, _DEFS):
            continue
        literals = {
            sub.value
            for decorator in stmt.decorator_list
            for sub in walk_ast(decorator)
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str)
        }
        if stmt.name in names or literals & names:
            spans.append(_span(stmt))
    return spans + _handed_class_spans(statements)


def _handed_class_spans(statements: list[ast.stmt]) -> list[tuple[int, int]]:
    """gsplat's registrar: a module-level def whose `register_autograd(..., P.backward, ...)`
    takes the backward from its parameter P; the defs that call it, and the classes of the
    file they hand it at P's position (and their bases here), whose `backward` and
    `setup_context` it registers. facts' `_handed_class_autograd` reads them."""
    registrars: dict[str, int] = {}  # def name -> P's position
    for stmt in statements:
        if not isinstance(stmt, _DEFS):
            continue
        params = [a.arg for a in (*stmt.args.posonlyargs, *stmt.args.args)]
        for sub in walk_ast(stmt):
            if not (
                isinstance(sub, ast.Call)
                and _callee_text(sub.func).rsplit(".", 1)[-1] == "register_autograd"
            ):
                continue
            for arg in (*sub.args, *(k.value for k in sub.keywords)):
                if (
                    isinstance(arg, ast.Attribute)
                    and arg.attr == "backward"
                    and isinstance(arg.value, ast.Name)
                    and arg.value.id in params
                ):
                    registrars[stmt.name] = params.index(arg.value.id)
    if not registrars:
        return []
    spans: list[tuple[int, int]] = []
    handed: set[str] = set()
    for stmt in statements:
        if isinstance(stmt, _DEFS) and stmt.name in registrars:
            spans.append(_span(stmt))
            continue
        calls = False
        for sub in walk_ast(stmt):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                position = registrars.get(sub.func.id)
                if position is not None and position < len(sub.args):
                    given = sub.args[position]
                    if isinstance(given, ast.Name):
                        handed.add(given.id)
                        calls = True
        if calls:
            spans.append(_span(stmt))
    classes = {stmt.name: stmt for stmt in statements if isinstance(stmt, ast.ClassDef)}
    frontier = handed & classes.keys()
    reached: set[str] = set()
    while frontier:  # a hook class may inherit its backward from a base of the file
        reached |= frontier
        frontier = {
            base.id
            for name in frontier
            for base in classes[name].bases
            if isinstance(base, ast.Name) and base.id in classes
        } - reached
    return spans + [_span(classes[name]) for name in sorted(reached)]


def registers_handler(node: ast.FunctionDef | ast.AsyncFunctionDef, ops: frozenset[str]) -> bool:
    """`@implements(aten.empty_like.default)` and the like: a decorator naming one of the
    `aten` ops a check reads handlers of (`Reads.handler_ops`; preselect's `_handler` is the
    text twin), on a def that takes `args` and `kwargs` as a dispatch handler does (or packed
    in `*args`). The check
    reads only those: a decomposition or lowering registered for the op (`@register_lowering(
    aten.empty_like)` takes the op's own parameters) is never parsed."""
    if not ops:
        return False
    named = {arg.arg for arg in (*node.args.posonlyargs, *node.args.args)}
    # `def _to_copy(func, *args, **kwargs)`: args and kwargs packed (the check reads where
    # the file's __torch_dispatch__ passes them)
    if ("args" not in named or "kwargs" not in named) and node.args.vararg is None:
        return False
    for decorator in node.decorator_list:
        for sub in walk_ast(decorator):
            if (
                isinstance(sub, ast.Attribute)
                and sub.attr in ops
                and _callee_text(sub.value).rsplit(".", 1)[-1] == "aten"
            ):
                return True
    return False


def _function_uses(
    tree: ast.Module, function_like: set[str], lines: list[str]
) -> tuple[dict[str, set[str]], set[str]]:
    """What the Function classes reach, in one walk: the top-level classes whose static helpers
    they call (`Helpers.prepare(x)`) with the names they call, and the module-level functions
    they call by name, followed HELPER_DEPTH calls deep (`_recompute(fn, x, g)` in backward):
    the checks follow those calls, so the functions are kept whole."""
    classes = {s.name for s in tree.body if isinstance(s, ast.ClassDef)} - function_like
    defs: dict[str, list[ast.stmt]] = {}  # a name may be defined more than once (@overload)
    for stmt in tree.body:
        if isinstance(stmt, _DEFS):
            defs.setdefault(stmt.name, []).append(stmt)
    owners: dict[str, set[str]] = {}
    functions: set[str] = set()
    if not classes and not defs:
        return owners, functions
    frontier: list[ast.stmt] = [
        s for s in tree.body if isinstance(s, ast.ClassDef) and s.name in function_like
    ]
    calls: dict[str, set[str]] = {}  # helper -> the helpers it calls
    for depth in range(HELPER_DEPTH):
        called: set[str] = set()
        for stmt in frontier:
            mine: set[str] = set()
            for node in walk_ast(stmt):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    mine.add(node.func.id)
                elif depth == 0 and isinstance(node, ast.Attribute):
                    owner = node.value
                    if isinstance(owner, ast.Name) and owner.id in classes:
                        owners.setdefault(owner.id, set()).add(node.attr)
            called |= mine
            if isinstance(stmt, _DEFS):
                calls.setdefault(stmt.name, set()).update(mine)
        fresh = (called & defs.keys()) - functions
        functions |= fresh
        frontier = [stmt for name in fresh for stmt in defs[name]]
    # Only helpers that hold a graph call, or call one that does (preselect's twin).
    kept = {name for name in functions if any(_holds_graph_call(lines, s) for s in defs[name])}
    kept |= {name for name in functions - kept if calls.get(name, set()) & kept}
    return owners, kept


def _holds_graph_call(lines: list[str], stmt: ast.stmt) -> bool:
    start, end = _span(stmt)
    return holds_graph_call("\n".join(lines[start - 1 : end]))


def _helper_ranges(stmt: ast.ClassDef, names: set[str]) -> list[tuple[int, int]]:
    """The header and the named static methods of a helper class (all the contract check
    summarises); nothing when none of the names is one."""
    methods = [
        _span(member)
        for member in stmt.body
        if isinstance(member, ast.FunctionDef)
        and member.name in names
        and any(_decorator_text(d) == "staticmethod" for d in member.decorator_list)
    ]
    if not methods:
        return []
    start = _span(stmt)[0]
    return [(start, max(start, _span(stmt.body[0])[0] - 1)), *methods]


def _direct_call_lines(
    text: str, function_like: set[str], statements: list[ast.stmt], reads: Reads
) -> set[int]:
    """Lines with a direct call on a Function the checks read (`reads.call_tails`: `Fn.forward(`,
    `Fn()(`), and, for `reads.apply_arity`, the `Fn.apply(` calls whose argument count forward
    may not take: the many that fit a forward of this file are decided here, from `ast`, and
    never reach libcst. Only the statements on those lines are walked."""
    offsets = direct_call_offsets(text, function_like, reads.call_tails) if reads.call_tails else []
    if "()(" in reads.call_tails:  # the legacy `Fn(k)(x)`, `f = Fn(k); f(x)`
        offsets += instance_call_offsets(text, function_like)
    if reads.call_tails or reads.apply_arity:
        # `op = Fn.apply` / `f = Fn.forward` and every call through the name
        offsets += alias_offsets(text, function_like)
    lines = {text.count("\n", 0, offset) + 1 for offset in offsets}
    if lines and "is_grad_enabled" in text:
        # `if torch.is_grad_enabled(): return Fn.apply(x)` before `Fn.forward(None, x)`: the
        # test says grad mode is off after it (the check reads it). Only a test in the function
        # that makes the call counts: the text scan keeps that function, and nothing else, so
        # the whole-file and the pre-sliced selections stay the same.
        defs = [_span(stmt) for stmt in statements if isinstance(stmt, _DEFS)]

        def scope(line: int) -> tuple[int, int]:
            around = [span for span in defs if span[0] <= line <= span[1]]
            return max(around, default=(0, 0))  # the innermost: it starts last

        scopes = {scope(line) for line in lines}
        for stmt in statements:
            if (
                isinstance(stmt, ast.If)
                and "is_grad_enabled" in ast.dump(stmt.test)
                and scope(stmt.lineno) in scopes
            ):
                lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    applies = {
        text.count("\n", 0, offset) + 1
        for offset in direct_call_offsets(
            text, function_like, (".apply(",) if reads.apply_arity else ()
        )
    }
    if not applies:
        return lines
    shapes = _forward_shapes(statements, function_like)
    for line in applies:
        for node in _expressions_at(statements, line):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "apply"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in function_like
                and _apply_may_fail(node, shapes.get(node.func.value.id, _UNKNOWN), text)
            ):
                lines.add(node.lineno)
    return lines


_BLOCK_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


def _expressions_at(statements: list[ast.stmt], line: int) -> list[ast.AST]:
    """The expression nodes of the innermost statement holding `line` (a compound statement
    gives its header only: its blocks hold statements of their own)."""
    holders = [s for s in statements if s.lineno <= line <= (s.end_lineno or s.lineno)]
    if not holders:
        return []
    stmt = min(holders, key=lambda s: (s.end_lineno or s.lineno) - s.lineno)
    out: list[ast.AST] = []
    for name, value in ast.iter_fields(stmt):
        if name in _BLOCK_FIELDS:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ast.AST):
                out.extend(walk_ast(item))
    return out


_UNKNOWN = None  # a Function of another file, or one this file defines more than once
Shape = tuple[list[str], int, bool] | None  # forward's inputs, how many required, *args


def _forward_shapes(statements: list[ast.stmt], function_like: set[str]) -> dict[str, Shape]:
    """forward's inputs (after ctx) for each Function class of the file that defines it once."""
    shapes: dict[str, Shape] = {}
    seen: set[str] = set()
    for node in statements:
        if not isinstance(node, ast.ClassDef) or node.name not in function_like:
            continue
        if node.name in seen:
            shapes[node.name] = _UNKNOWN  # several local classes of one name: the check decides
            continue
        seen.add(node.name)
        found = forward_parameters(node)
        if found is None or found.keyword_only:
            shapes[node.name] = _UNKNOWN
            continue
        shapes[node.name] = (list(found.names), found.required, found.star)
    return shapes


def _apply_may_fail(call: ast.Call, shape: Shape, text: str) -> bool:
    """Whether the check must look at this `apply` call (the same test as its own). `text` is
    the whole file: `*ARGS` counts when ARGS is a module constant of it (text/constants.py)."""
    if shape is _UNKNOWN:
        return True
    if any(k.arg is None for k in call.keywords):
        return False  # `**kwargs`: the check skips these too
    unpacked = starred_names(call.args)
    constants = sequence_constants(text, unpacked) if unpacked else {}
    given = positional_count(call.args, constants)
    if given is None:
        return False  # unpacking of unknown length: the check skips these too
    names, required, star = shape
    keywords = [k.arg for k in call.keywords if k.arg is not None]
    return apply_binding(names, required, star, given, keywords).fails


def _parse(text: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences etc. are not our findings
        return ast.parse(text)


def import_bindings(tree: ast.Module, keep: list[bool] | None = None) -> list[Binding]:
    """What import statements bind for the checks, in source order: module-scope imports
    (inside top-level if/try too), and imports in the scope of each kept def or class
    (`from torch.autograd import grad` in a backward, or in a function that defines a
    Function). Imports local to other functions bind nothing the checked code can see.
    `keep=None` lists module-scope imports only."""
    out: list[Binding] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                out.extend(("import", alias.name, alias.asname) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                out.extend(
                    ("from", base, alias.name, alias.asname)
                    for alias in node.names
                    if alias.name != "*"
                )
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if keep is not None and keep[_span(node)[0]]:
                    visit(node.body)
            else:
                for block in _blocks(node):
                    visit(block)

    visit(tree.body)
    return out


def slice_source(
    text: str,
    known_functions: frozenset[str] = frozenset(),
    *,
    loaders: tuple[str, ...] = DEFAULT_LOADERS,
    whole: bool = False,
    reads: Reads | None = None,
) -> Slice | None:
    """The lines of `text` the enabled checks read (`reads`, checks/reads.py; None: what every
    check reads); None when nothing can be found.

    `whole=True` has `ast` parse the whole text (fixes rewrite the whole file). Raises SyntaxError/ValueError when `ast` cannot parse the
    text (the caller then lets libcst parse the whole file, which gives the user-facing error
    or handles newer syntax).
    """
    reads = EVERY_CHECK_READS if reads is None else reads
    tree: ast.Module | None = None
    starts = chunk_starts(text)
    blanked: list[int] = []  # stretches of lines `ast` did not see (see blank_outside)
    if not whole:
        spans = kept_ranges(text, starts, known_functions, loaders, reads)
        if spans is None:
            return None
        visible, blanked = blank_outside(text, spans)
        try:
            tree = _parse(visible)
        except (SyntaxError, ValueError):
            tree = None  # a column-0 line inside brackets split a statement: parse it all
            blanked = []
    if tree is None:
        tree = _parse(text)
    statements = _statements(tree)
    function_like: set[str] = set()
    if reads.function_names:
        function_like = _function_like_names(tree, known_functions, statements)
    call_lines = _direct_call_lines(text, function_like, statements, reads)
    kept_functions = function_like if reads.functions else set()
    custom_ops: list[tuple[int, int]] = []
    if reads.custom_ops:
        custom_ops += custom_op_spans(tree.body)
    if reads.op_definitions:
        custom_ops += op_definition_spans(tree.body)
    if reads.functions:
        custom_ops += ctx_step_spans(tree.body)  # backward steps written apart
    if (
        not call_lines
        and not custom_ops
        and not any(
            (isinstance(n, ast.ClassDef) and _class_of_interest(n, kept_functions, reads.overrides))
            or (isinstance(n, _DEFS) and registers_handler(n, reads.handler_ops))
            for n in statements
        )
    ):
        return None
    # Lines as Python counts them; without \r, a plain split is the same and far cheaper.
    lines = _LINE.findall(text) if "\r" in text else text.split("\n")
    keep = [False] * (len(lines) + 1)
    selector = _Selector(
        kept_functions,
        loaders,
        Bindings(import_bindings(tree)).aliases,
        call_lines,
        reads,
    )
    helpers, helper_functions = _function_uses(tree, kept_functions, lines)
    for stmt in tree.body:
        ranges: list[tuple[int, int]] = []
        if isinstance(stmt, ast.ClassDef) and stmt.name in helpers:
            ranges.extend(_helper_ranges(stmt, helpers[stmt.name]))
        elif isinstance(stmt, _DEFS) and stmt.name in helper_functions:
            ranges.append(_span(stmt))
        selector.select(stmt, ranges)
        for start, end in ranges:
            keep[start : end + 1] = [True] * (end + 1 - start)
    for start, end in custom_ops:
        keep[start : end + 1] = [True] * (end + 1 - start)
    # A line `ast` did not see is never kept, even inside a kept range: the gap between a
    # class header and its first kept statement was, in the whole file, other statements.
    for first, after in zip(blanked[::2], blanked[1::2], strict=True):
        after = min(after, len(keep))
        keep[first:after] = [False] * (after - first)
    # Dropped lines are left out entirely (libcst tokenises blank lines too: a 5 MB file would
    # cost seconds); positions are mapped back through line_map.
    line_map = list(compress(range(1, len(keep)), keep[1:]))
    out = [
        line if line.endswith(("\n", "\r")) else line + "\n"
        for line in (lines[number - 1] for number in line_map)
    ]
    return Slice(
        source="".join(out),
        triton_kernels=triton_kernels(text, starts),
        tree=tree,
        kept=keep,
        line_map=line_map,
        imports=import_bindings(tree, keep),
    )


# Lines as Python's tokenizer counts them (str.splitlines also breaks at form feeds and other
# separators, which would shift every line after them).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
