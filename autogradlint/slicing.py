"""Parse only what can hold a finding: locate classes of interest with the C `ast` parser.

libcst costs ~50 ms per file; CPython's `ast` is an order of magnitude cheaper. We use `ast` to
find the top-level statements that matter (imports, classes with autograd/override methods,
extension loaders) and blank every other line, so libcst parses a much smaller text with the same
line and column numbers. A file with no class of interest is never handed to libcst at all.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field

# Every current check starts from one of these methods; a class without them cannot hold a finding.
INTEREST_METHODS = frozenset({"backward", "__torch_function__", "__torch_dispatch__"})
_LOADER_HINTS = ("load",)


@dataclass
class Slice:
    source: str
    triton_kernels: set[str] = field(default_factory=set)
    # First line of each top-level statement libcst will see, for the sliced and the full text:
    # the engine places findings from these without a whole-module PositionProvider pass.
    kept_starts: list[int] = field(default_factory=list)
    all_starts: list[int] = field(default_factory=list)
    # The slice holds only the kept lines; line_map[i] is the original number of its line i+1.
    line_map: list[int] = field(default_factory=list)


HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})


def _function_like_names(
    tree: ast.Module,
    known: frozenset[str] = frozenset(),
    statements: list[ast.stmt] | None = None,
) -> set[str]:
    """Classes that may be autograd Functions: a base named *Function, or such a local class."""
    statements = statements if statements is not None else _statements(tree)
    classes = [n for n in statements if isinstance(n, ast.ClassDef)]
    names: set[str] = set(known)
    for node in statements:  # `from torch.autograd import Function as F` makes `F` one too
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if "Function" in alias.name and alias.asname:
                    names.add(alias.asname)
    changed = True
    while changed:
        changed = False
        for node in classes:
            if node.name in names:
                continue
            for base in node.bases:
                text = _decorator_text(base)
                last = text.rsplit(".", 1)[-1]
                if "Function" in last or last in names:
                    names.add(node.name)
                    changed = True
                    break
    return names


def _class_of_interest(node: ast.ClassDef, function_like: set[str] | None = None) -> bool:
    if function_like is not None and node.name in function_like:
        return True  # every autograd.Function is read by the contract checks
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if stmt.name in HOOKS:
                return True
            if stmt.name == "backward" and (function_like is None or node.name in function_like):
                return True
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name) and target.id == "__torch_function__":
                    return True
    return False


def _decorator_text(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


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


def _select(stmt: ast.stmt, function_like: set[str], keep: list[tuple[int, int]]) -> bool:
    """Add the line ranges of `stmt` that a check may read to `keep`; True if any.

    Imports, classes of interest (minus methods no check reads) and extension loads are kept.
    A def or class that merely contains them keeps only its header, so a Function defined inside
    a 3,000-line test class costs its own lines, not the class's.
    """
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        keep.append(_span(stmt))
        return True
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
        func = _decorator_text(stmt.value.func)
        if any(hint in func.rsplit(".", 1)[-1] for hint in _LOADER_HINTS):
            keep.append(_span(stmt))
            return True
        return False
    if isinstance(stmt, ast.ClassDef) and stmt.name in function_like:
        keep.append(_span(stmt))
        return True
    if isinstance(stmt, ast.ClassDef) and _class_of_interest(stmt, function_like):
        start, end = _span(stmt)
        cursor = start
        for member in stmt.body:
            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                member.name not in INTEREST_METHODS
            ):
                m_start, m_end = _span(member)
                if m_start > cursor:
                    keep.append((cursor, m_start - 1))
                cursor = m_end + 1
        if cursor <= end:
            keep.append((cursor, end))
        return True
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        inner: list[tuple[int, int]] = []
        if not any([_select(child, function_like, inner) for child in stmt.body]):
            return False
        start, end = _span(stmt)
        body_start = stmt.body[0].lineno
        keep.append((start, max(start, body_start - 1)))
        keep.extend(inner)
        return True
    probe: list[tuple[int, int]] = []
    children: list[ast.stmt] = []
    for attr in ("body", "orelse", "finalbody", "handlers", "cases"):
        value = getattr(stmt, attr, None)
        if isinstance(value, list):
            for child in value:
                # except handlers and match cases hold statements one level further down
                children.extend(
                    child.body
                    if hasattr(child, "body") and not isinstance(child, ast.stmt)
                    else [child]
                )
    if any([_select(child, function_like, probe) for child in children]):
        keep.append(_span(stmt))  # if/try/with/for: keep whole, its clauses must stay valid
        return True
    return False


def _helper_classes(tree: ast.Module, function_like: set[str]) -> set[str]:
    """Top-level classes whose static helpers a Function calls (`Helpers.prepare(x)`)."""
    top = {s.name for s in tree.body if isinstance(s, ast.ClassDef)} - function_like
    if not top:
        return set()
    used: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name in function_like:
            for node in ast.walk(stmt):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in top
                ):
                    used.add(node.value.id)
    return used


def _direct_call_lines(text: str, function_like: set[str]) -> set[int]:
    """Lines calling `Fn.forward(` or `Fn()(` on a Function class (AGL407 reads those)."""
    names = sorted(n for n in function_like if n.isidentifier())
    if not names:
        return set()
    pattern = re.compile(rf"\b(?:{'|'.join(names)})(?:\.forward\(|\(\)\()")
    return {text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)}


def slice_source(text: str, known_functions: frozenset[str] = frozenset()) -> Slice | None:
    """The text with irrelevant top-level statements blanked; None when nothing can be found.

    Raises SyntaxError/ValueError when `ast` cannot parse the text (the caller then lets libcst
    parse the whole file, which gives the user-facing error or handles newer syntax).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences etc. are not our findings
        tree = ast.parse(text)
    statements = _statements(tree)
    function_like = _function_like_names(tree, known_functions, statements)
    if not any(
        isinstance(n, ast.ClassDef) and _class_of_interest(n, function_like) for n in statements
    ):
        return None
    lines = text.splitlines(keepends=True)
    keep = [False] * (len(lines) + 1)
    triton: set[str] = set()
    calls = _direct_call_lines(text, function_like)
    helpers = _helper_classes(tree, function_like)
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name in helpers:
            for number in range(_span(stmt)[0], (stmt.end_lineno or stmt.lineno) + 1):
                keep[number] = True
        if calls and any(stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno) for line in calls):
            for number in range(_span(stmt)[0], (stmt.end_lineno or stmt.lineno) + 1):
                keep[number] = True
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in stmt.decorator_list:
                if _decorator_text(decorator).startswith("triton."):
                    triton.add(stmt.name)
        ranges: list[tuple[int, int]] = []
        if _select(stmt, function_like, ranges):
            for start, end in ranges:
                for number in range(start, end + 1):
                    keep[number] = True
    # Dropped lines are left out entirely (libcst tokenises blank lines too: a 5 MB file would
    # cost seconds); positions are mapped back through line_map / the statement starts.
    out: list[str] = []
    line_map: list[int] = []
    for number, line in enumerate(lines, start=1):
        if keep[number]:
            out.append(line if line.endswith(("\n", "\r")) else line + "\n")
            line_map.append(number)
    starts = sorted({_span(stmt)[0] for stmt in tree.body})
    kept = [start for start in starts if keep[start]]
    return Slice("".join(out), triton, kept, starts, line_map)
