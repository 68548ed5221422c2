"""Where findings are: line and column of CST nodes, generating as little code as possible.

libcst's PositionProvider generates the code of whatever it is given; on a whole file that is
most of the cost of a lint with findings. CPython's `ast` already knows where every statement
starts, so a node is placed by generating only the innermost statement around it (a compound
statement without its body when the node is in its header), inside a block indented like the
original (libcst writes continuation lines relative to their block), and shifting lines.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..analysis.names import iter_statements
from ..analysis.walk import children

Span = tuple[int, int, int, int]  # line, column, end line, end column (original text)
# One statement as `ast` saw it: node kind (without "Async"), original line of its keyword (the
# `def` line of a decorated def), column.
StatementAt = tuple[str, int, int]
_STATEMENT = (cst.BaseSmallStatement, cst.BaseCompoundStatement)


class _StatementTypes(dict[type, bool]):
    """`_IS_STATEMENT[type]`: isinstance against libcst's abstract classes goes through ABCMeta
    (slow, and asked of every node a placement walks): each type is asked once."""

    def __missing__(self, kind: type) -> bool:
        flag = self[kind] = issubclass(kind, _STATEMENT)
        return flag


_IS_STATEMENT = _StatementTypes()
# Compound statements whose header can be generated without their body.
_HEADED = (cst.If, cst.For, cst.While, cst.With, cst.FunctionDef, cst.ClassDef)
_PASS_BLOCK = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Pass()])])


@dataclass
class Layout:
    """How the parsed module sits in the original text (all lines 1-based)."""

    line_map: list[int] | None = None  # parsed line i+1 -> original line (sliced modules)
    # CPython's tree of the text and, for a slice, which original lines libcst was given.
    tree: ast.Module | None = None
    kept: list[bool] | None = None
    _statements: list[StatementAt] | None = field(default=None, repr=False)

    @property
    def statements(self) -> list[StatementAt] | None:
        """Every statement the module holds, in iter_statements order (computed on demand:
        only files with findings need it)."""
        if self._statements is None and self.tree is not None:
            kept = self.kept
            self._statements = [
                seen for seen in statement_layout(self.tree) if kept is None or kept[seen[1]]
            ]
        return self._statements


# ast kinds libcst spells differently (async variants are flags there).
_CST_KIND = {
    "AsyncFunctionDef": "FunctionDef",
    "AsyncFor": "For",
    "AsyncWith": "With",
    "Delete": "Del",
}


def statement_layout(tree: ast.Module) -> list[StatementAt]:
    """Every statement as (libcst kind, keyword line, column), in the order libcst's
    iter_statements meets them (pre-order; clauses as body, else, finally, handlers, cases)."""
    out: list[StatementAt] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            kind = type(node).__name__
            out.append((_CST_KIND.get(kind, kind), node.lineno, node.col_offset))
            for attr in ("body", "orelse", "finalbody"):
                visit(getattr(node, attr, None) or [])
            for clause in (getattr(node, "handlers", None) or []) + (
                getattr(node, "cases", None) or []
            ):
                visit(clause.body)

    visit(tree.body)
    return out


def node_positions(
    module: cst.Module, nodes: Iterable[cst.CSTNode], layout: Layout, text: str
) -> dict[int, Span]:
    """Spans of `nodes` in the original text, by node id."""
    wanted = {id(node): node for node in nodes}
    placed = statement_positions(module, wanted, layout, text)
    return placed if placed is not None else _whole_module(module, wanted, layout.line_map)


def statement_positions(
    module: cst.Module, wanted: dict[int, cst.CSTNode], layout: Layout, text: str
) -> dict[int, Span] | None:
    """Spans of the `wanted` nodes (by id), each generated within its innermost statement
    only; None when `ast`'s statements and the module's do not line up."""
    index = _statement_index(module, layout.statements)
    if index is None:
        return None
    owners = _innermost_statements(module, set(wanted))
    groups: dict[int, list[int]] = {}
    for key in wanted:
        owner = owners.get(key)
        if owner is None:
            return None
        groups.setdefault(id(owner), []).append(key)
    out: dict[int, Span] = {}
    lines = _Lines(text)
    for keys in groups.values():
        statement = owners[keys[0]]
        kind, line, byte_column = index[id(statement)]
        content = lines.line(line)
        placed = None
        if content is not None:
            # ast counts columns in UTF-8 bytes, libcst in characters.
            column = len(content.encode("utf-8")[:byte_column].decode("utf-8", "replace"))
            indent = content[: len(content) - len(content.lstrip())]
            if len(indent) <= column:
                # An `elif` is an If of its own, which libcst writes as `if`: two columns short.
                extra = 2 if content[column : column + 4] == "elif" else 0
                seen = (kind, line, column)
                placed = _in_statement(
                    module, statement, {k: wanted[k] for k in keys}, seen, layout, indent, extra
                )
        if placed is None:
            return None
        out.update(placed)
    return out


def _original(line: int, line_map: list[int] | None) -> int:
    return line_map[line - 1] if line_map and 0 < line <= len(line_map) else line


def _whole_module(
    module: cst.Module, wanted: dict[int, cst.CSTNode], line_map: list[int] | None
) -> dict[int, Span]:
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    out: dict[int, Span] = {}
    for key, node in wanted.items():
        where = positions[node]
        out[key] = (
            _original(where.start.line, line_map),
            where.start.column,
            _original(where.end.line, line_map),
            where.end.column,
        )
    return out


def _statement_index(
    module: cst.Module, statements: list[StatementAt] | None
) -> dict[int, StatementAt] | None:
    """id(statement node) -> where `ast` saw it; None unless both walks agree node for node."""
    if statements is None:
        return None
    nodes = [node for node in iter_statements(module) if isinstance(node, _STATEMENT)]
    if len(nodes) != len(statements):
        return None
    index: dict[int, StatementAt] = {}
    for node, seen in zip(nodes, statements, strict=True):
        if type(node).__name__ != seen[0]:
            return None
        index[id(node)] = seen
    return index


def _innermost_statements(module: cst.Module, wanted: set[int]) -> dict[int, cst.CSTNode]:
    """For each wanted node id, the innermost statement holding it (itself, if a statement)."""
    found: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = []

    def visit(node: cst.CSTNode) -> None:
        statement = _IS_STATEMENT[type(node)]
        if statement:
            stack.append(node)
        if id(node) in wanted and stack:
            found[id(node)] = stack[-1]
        if len(found) < len(wanted):
            for child in children(node):
                visit(child)
        if statement:
            stack.pop()

    for top in module.body:
        visit(top)
        if len(found) == len(wanted):
            break
    return found


def _in_statement(
    module: cst.Module,
    statement: cst.CSTNode,
    wanted: dict[int, cst.CSTNode],
    seen: StatementAt,
    layout: Layout,
    indent: str,
    extra: int = 0,
) -> dict[int, Span] | None:
    """Generate `statement` (just its header when that holds every wanted node) inside a block
    indented like the original (libcst re-indents continuation lines relative to the block)."""
    _, keyword_line, column = seen
    generated = statement
    if isinstance(statement, cst.BaseSmallStatement):
        body: cst.SimpleStatementLine | cst.BaseCompoundStatement = cst.SimpleStatementLine(
            body=[statement]
        )
    else:
        assert isinstance(statement, cst.BaseCompoundStatement)
        changes: dict[str, object] = {"leading_lines": ()}
        if isinstance(statement, _HEADED) and id(statement) not in wanted:
            changes["body"] = _PASS_BLOCK
            if isinstance(statement, (cst.If, cst.For, cst.While)):
                changes["orelse"] = None
        body = generated = statement.with_changes(**changes)
    if indent:
        body = cst.If(test=cst.Name("_"), body=cst.IndentedBlock(body=[body], indent=indent))
    # Blocks without their own indentation use the module's default: keep the original's.
    generated_module = cst.Module(
        body=[body],
        default_indent=module.default_indent,
        default_newline=module.default_newline,
    )
    positions = MetadataWrapper(generated_module, unsafe_skip_copy=True).resolve(PositionProvider)
    line_map = layout.line_map
    # The line of the statement's keyword, generated and parsed (slice coordinates).
    if isinstance(generated, (cst.FunctionDef, cst.ClassDef)):
        generated_line = positions[generated.name].start.line
    else:
        generated_line = positions[generated].start.line
    parsed_line = bisect_left(line_map, keyword_line) + 1 if line_map else keyword_line
    if line_map and (parsed_line > len(line_map) or line_map[parsed_line - 1] != keyword_line):
        return None
    shift = parsed_line - generated_line
    # `a = 1; b = f(x)`: b starts mid-line; an `elif` is written as `if`.
    first_line = column - len(indent) + extra

    def place(line: int, col: int) -> tuple[int, int]:
        return (
            _original(line + shift, line_map),
            col + (first_line if line == generated_line else 0),
        )

    out: dict[int, Span] = {}
    for key, target in wanted.items():
        where = positions.get(generated if target is statement else target)
        if where is None:
            return None
        line, col = place(where.start.line, where.start.column)
        if target is statement:
            col -= extra  # the elif statement itself starts at its `elif`
        out[key] = (line, col, *place(where.end.line, where.end.column))
    return out


_BREAK = re.compile(r"\r\n|\r|\n")


class _Lines:
    """Lines of the original text, counting line breaks as Python does."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts: list[int] | None = None

    def line(self, number: int) -> str | None:
        if self.starts is None:
            self.starts = [0, *(m.end() for m in _BREAK.finditer(self.text))]
        if not 0 < number <= len(self.starts):
            return None
        start = self.starts[number - 1]
        end = self.starts[number] if number < len(self.starts) else len(self.text)
        return self.text[start:end]
