"""libcst's own nodes for the nodes of a rebuilt tree, parsing only the statements that hold them.

The checks run on a tree rebuilt from `ast` (rebuild.py), which has no formatting. A finding's
message quotes code as written and its position is counted on libcst's tree, so the nodes a
check reports or quotes need their libcst twins. Rather than parse the whole slice and run every
check again, the statement holding such a node is parsed alone from the slice's own lines and
walked beside its rebuilt copy, which holds the same nodes in the same order
(tests/test_rebuild.py): each node meets its twin. That statement is the method holding the
node (parsed under a stand-in `class _:` header, so its blocks are laid out as in its class),
else the top-level statement (the class's own nodes, a method's own text, a module-level def).

A statement parsed alone is the statement parsed in its file, but for what libcst infers from
the file as a whole: the default indentation (from its first indented block) and line ending
(its first). Those are worked out from the slice and compared; where they differ, or a pairing
fails, `NeedsParse` sends the file to libcst's whole parse, as before. Parsed alone, a statement
also lacks the comment and blank lines above it, so its own text is never taken from there.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize
from bisect import bisect_left
from collections.abc import Sequence
from typing import TypeVar

import libcst as cst

from ..analysis.parsing import parse_module
from ..analysis.source_text import NeedsParse
from ..analysis.walk import children
from .rebuild import first_line, kept_statements

_Node = TypeVar("_Node", bound=cst.CSTNode)
_TopLevel = cst.SimpleStatementLine | cst.BaseCompoundStatement  # what Module.body holds

_LINE_END = re.compile(r"\r\n|\n|\r")


class Twins:
    """The twins of one rebuilt module's nodes, parsed on demand (one instance per analysis)."""

    def __init__(
        self,
        rebuilt: cst.Module,
        tree: ast.Module,
        keep: Sequence[bool] | None,
        source: str,
        line_map: list[int] | None,
    ) -> None:
        """`rebuilt` is `rebuild_module(tree, ..., keep)`; `source` the text libcst would parse
        (the slice), whose line i+1 is original line `line_map[i]`."""
        self.rebuilt = rebuilt
        self.keep = keep
        self.source = source
        self.line_map = line_map
        self._items = kept_statements(tree.body, keep)  # the `ast` of each top-level statement
        if len(self._items) != len(rebuilt.body):
            raise NeedsParse
        self._offsets = [0, *(m.end() for m in _LINE_END.finditer(source))]
        # The slice's line where each top-level statement starts, then its end.
        self._bounds = [self._slice_line(_first(item)) for item in self._items]
        self._bounds.append(len(self._offsets) + 1)
        # id(node) -> (index in rebuilt.body, index in its class's body or -1)
        self._where: dict[int, tuple[int, int]] | None = None
        # The statements parsed alone (top-level ones, methods): their own text lacks what is
        # above them.
        self._roots: set[int] = set()
        self._member_roots: set[int] = set()
        self._twins: dict[int, cst.CSTNode] = {}
        self._parsed: dict[int, _TopLevel] = {}  # top-level statements parsed whole
        self._members: dict[tuple[int, int], cst.BaseStatement] = {}  # class members alone
        self._shared: set[int] = set()  # nodes seen twice in the rebuilt tree: no one twin
        self._config: tuple[str, str] | None = None

    def _slice_line(self, line: int) -> int:
        if not self.line_map:
            return line
        at = bisect_left(self.line_map, line)
        if at == len(self.line_map) or self.line_map[at] != line:
            raise NeedsParse
        return at + 1

    def twin(self, node: cst.CSTNode) -> cst.CSTNode:
        """libcst's own node for `node` of the rebuilt tree."""
        key = id(node)
        found = self._twins.get(key)
        if found is not None and key not in self._shared:
            return found
        where = self._places().get(key)
        if where is None or key in self._shared:
            raise NeedsParse  # built by a check, or shared by two places in the tree
        index, member = where
        if index in self._parsed:
            raise NeedsParse
        # A method's twin comes from the method parsed alone (most findings are in one);
        # the class's own nodes from the whole class.
        if member < 0 or (index, member) in self._members or not self._pair_member(index, member):
            self._pair(index)
        found = self._twins.get(key)
        if found is None:
            raise NeedsParse
        return found

    def code(self, node: cst.CSTNode, with_module: bool) -> str:
        """The code of `node` as `code_of(node, module)` gives it on libcst's whole parse."""
        twin = self.twin(node)
        key = id(node)
        if key in self._roots:
            # Parsed alone, a top-level statement lacks the comments and blank lines above it.
            raise NeedsParse
        if key in self._member_roots:  # so does a method: its class, parsed whole, has them
            index = self._places()[key][0]
            if index not in self._parsed:
                self._pair(index)
            twin = self._twins[key]
        if not with_module:
            return cst.Module([]).code_for_node(twin)
        indent, newline = self._file_config()  # every statement parsed alone was laid out so
        return cst.Module([], default_indent=indent, default_newline=newline).code_for_node(twin)

    def module(self) -> cst.Module:
        """The rebuilt module with every statement parsed so far swapped for its twin, laid out
        as the whole file would be: positions.py places the twins' nodes in it."""
        indent, newline = self._file_config()
        body: list[_TopLevel] = list(self.rebuilt.body)
        members: dict[int, dict[int, cst.BaseStatement]] = {}
        for (index, member), parsed in self._members.items():
            members.setdefault(index, {})[member] = parsed
        for index, swapped in members.items():
            if index not in self._parsed:
                body[index] = _with_members(body[index], swapped)
        for index, parsed in self._parsed.items():
            body[index] = parsed
        return cst.Module(body=body, default_indent=indent, default_newline=newline)

    # --- pairing ----------------------------------------------------------------------------
    def _places(self) -> dict[int, tuple[int, int]]:
        if self._where is None:
            where: dict[int, tuple[int, int]] = {}
            shared = self._shared
            for index, statement in enumerate(self.rebuilt.body):
                members = {id(m): at for at, m in enumerate(_class_members(statement))}
                stack: list[tuple[cst.CSTNode, int]] = [(statement, -1)]
                while stack:
                    node, member = stack.pop()
                    key = id(node)
                    if key in where:
                        shared.add(key)
                    if member < 0:
                        member = members.get(key, -1)
                    where[key] = (index, member)
                    stack.extend((child, member) for child in children(node))
            self._where = where
        return self._where

    def _text(self, start: int, end: int) -> str:
        offsets = self._offsets
        return self.source[offsets[start - 1] : offsets[end - 1] if end <= len(offsets) else None]

    def _parse_alone(self, text: str) -> cst.Module:
        try:
            parsed = parse_module(text)
        except Exception as exc:  # noqa: BLE001 - the whole parse reports it properly
            raise NeedsParse from exc
        if (parsed.default_indent, parsed.default_newline) != self._file_config():
            raise NeedsParse
        if len(parsed.body) != 1:
            raise NeedsParse
        return parsed

    def _pair(self, index: int) -> None:
        parsed = self._parse_alone(self._text(self._bounds[index], self._bounds[index + 1]))
        statement = parsed.body[0]
        self._walk_pairs(self.rebuilt.body[index], statement)
        self._parsed[index] = statement
        self._roots.add(id(self.rebuilt.body[index]))

    def _pair_member(self, index: int, member: int) -> bool:
        """Pair one statement of a top-level class's body, parsed alone inside a stand-in
        class header; False when that cannot be laid out as the file is."""
        item = self._items[index]
        if not isinstance(item, ast.ClassDef):
            return False
        body = kept_statements(item.body, self.keep)
        mine = _class_members(self.rebuilt.body[index])
        if len(body) != len(mine):
            return False
        start = self._slice_line(_first(body[member]))
        end = (
            self._slice_line(_first(body[member + 1]))
            if member + 1 < len(body)
            else self._bounds[index + 1]
        )
        _, newline = self._file_config()
        try:
            parsed = self._parse_alone(f"class _:{newline}" + self._text(start, end))
        except NeedsParse:
            return False  # indented otherwise than the file's first block, say
        holder = parsed.body[0]
        if not isinstance(holder, cst.ClassDef) or not isinstance(holder.body, cst.IndentedBlock):
            return False
        if len(holder.body.body) != 1:
            return False
        statement = holder.body.body[0]
        self._walk_pairs(mine[member], statement)
        self._members[(index, member)] = statement
        self._member_roots.add(id(mine[member]))
        return True

    def _walk_pairs(self, mine: cst.CSTNode, theirs: cst.CSTNode) -> None:
        twins = self._twins
        stack: list[tuple[cst.CSTNode, cst.CSTNode]] = [(mine, theirs)]
        while stack:
            mine, theirs = stack.pop()
            if type(mine) is not type(theirs):
                raise NeedsParse
            twins[id(mine)] = theirs
            mine_children, their_children = children(mine), children(theirs)
            if len(mine_children) != len(their_children):
                raise NeedsParse
            stack.extend(zip(mine_children, their_children, strict=True))

    # --- what libcst infers from the whole file ---------------------------------------------
    def _file_config(self) -> tuple[str, str]:
        if self._config is None:
            self._config = (first_indent(self.source), first_line_end(self.source))
        return self._config


def _first(item: ast.stmt | list[ast.stmt]) -> int:
    return first_line(item if isinstance(item, ast.stmt) else item[0])


def _class_members(statement: cst.CSTNode) -> Sequence[cst.BaseStatement]:
    """The statements of a class's indented body (none for anything else)."""
    if isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
        return statement.body.body
    return ()


def _with_members(statement: _TopLevel, swapped: dict[int, cst.BaseStatement]) -> _TopLevel:
    """A copy of a rebuilt class with some body statements swapped for their twins (without
    libcst's constructors, which would validate the rebuilt nodes' shared formatting)."""
    assert isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock)
    members = [swapped.get(at, m) for at, m in enumerate(statement.body.body)]
    return _copy(statement, body=_copy(statement.body, body=members))


def _copy(node: _Node, **changes: object) -> _Node:
    copy = object.__new__(type(node))
    for field in dataclasses.fields(node):
        object.__setattr__(copy, field.name, changes.get(field.name, getattr(node, field.name)))
    return copy


def first_line_end(source: str) -> str:
    """The line ending libcst takes as a module's default: its first."""
    found = _LINE_END.search(source)
    return found.group() if found else "\n"


def first_indent(source: str) -> str:
    """The indentation libcst takes as a module's default: that of its first indented block
    (four spaces when there is none)."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.INDENT:
                return token.string
    except (tokenize.TokenError, SyntaxError) as exc:
        raise NeedsParse from exc
    return "    "
