"""libcst's own nodes for the nodes of a rebuilt tree, parsing only the statements that hold them.

The checks run on a tree rebuilt from `ast` (rebuild.py), which has no formatting. A finding's
message quotes code as written and its position is counted on libcst's tree, so the nodes a
check reports or quotes need their libcst twins. Rather than parse the whole slice and run every
check again, the top-level statement holding such a node (the class, the def, ...) is parsed
alone from the slice's own lines and walked beside its rebuilt copy, which holds the same nodes
in the same order (tests/test_rebuild.py): each node meets its twin.

A statement parsed alone is the statement parsed in its file, but for what libcst infers from
the file as a whole: the default indentation (from its first indented block) and line ending
(its first). Those are worked out from the slice and compared; where they differ, or a pairing
fails, `NeedsParse` sends the file to libcst's whole parse, as before.
"""

from __future__ import annotations

import io
import re
import tokenize
from bisect import bisect_left

import libcst as cst

from ..analysis.source_text import NeedsParse
from ..analysis.walk import children
from .parsing import parse_module

_LINE_END = re.compile(r"\r\n|\n|\r")


class Twins:
    """The twins of one rebuilt module's nodes, parsed on demand (one instance per analysis)."""

    def __init__(
        self, rebuilt: cst.Module, starts: list[int], source: str, line_map: list[int] | None
    ) -> None:
        """`starts`: the first original line of each statement of `rebuilt.body`
        (rebuild.top_level_lines); `source`: the text libcst would parse (the slice), whose
        line i+1 is original line `line_map[i]`."""
        if len(starts) != len(rebuilt.body):
            raise NeedsParse
        self.rebuilt = rebuilt
        self.source = source
        self._offsets = [0, *(m.end() for m in _LINE_END.finditer(source))]
        # The slice's line where each top-level statement starts, then its end.
        self._bounds = [self._slice_line(line, line_map) for line in starts]
        self._bounds.append(len(self._offsets) + 1)
        self._unit_of: dict[int, int] | None = None  # id(node) -> index in rebuilt.body
        self._twins: dict[int, cst.CSTNode] = {}
        self._parsed: dict[int, cst.Module] = {}  # index in rebuilt.body -> parsed alone
        self._shared: set[int] = set()  # nodes seen twice in the rebuilt tree: no one twin
        self._config: tuple[str, str] | None = None

    def _slice_line(self, line: int, line_map: list[int] | None) -> int:
        if not line_map:
            return line
        at = bisect_left(line_map, line)
        if at == len(line_map) or line_map[at] != line:
            raise NeedsParse
        return at + 1

    def twin(self, node: cst.CSTNode) -> cst.CSTNode:
        """libcst's own node for `node` of the rebuilt tree."""
        key = id(node)
        found = self._twins.get(key)
        if found is not None and key not in self._shared:
            return found
        index = self._units().get(key)
        if index is None or index in self._parsed or key in self._shared:
            raise NeedsParse  # built by a check, or shared by two places in the tree
        self._pair(index)
        found = self._twins.get(id(node))
        if found is None:
            raise NeedsParse
        return found

    def code(self, node: cst.CSTNode, with_module: bool) -> str:
        """The code of `node` as `code_of(node, module)` gives it on libcst's whole parse."""
        if any(node is statement for statement in self.rebuilt.body):
            # Parsed alone, a top-level statement lacks the comments and blank lines above it.
            raise NeedsParse
        twin = self.twin(node)
        if not with_module:
            return cst.Module([]).code_for_node(twin)
        return self._parsed[self._units()[id(node)]].code_for_node(twin)

    def module(self) -> cst.Module:
        """The rebuilt module with every statement parsed so far swapped for its twin, laid out
        as the whole file would be: positions.py places the twins' nodes in it."""
        indent, newline = self._file_config()
        body = list(self.rebuilt.body)
        for index, parsed in self._parsed.items():
            body[index] = parsed.body[0]
        return cst.Module(body=body, default_indent=indent, default_newline=newline)

    # --- pairing ----------------------------------------------------------------------------
    def _units(self) -> dict[int, int]:
        if self._unit_of is None:
            unit_of: dict[int, int] = {}
            shared = self._shared
            for index, statement in enumerate(self.rebuilt.body):
                stack: list[cst.CSTNode] = [statement]
                while stack:
                    node = stack.pop()
                    key = id(node)
                    if key in unit_of:
                        shared.add(key)
                    unit_of[key] = index
                    stack.extend(children(node))
            self._unit_of = unit_of
        return self._unit_of

    def _pair(self, index: int) -> None:
        start, end = self._bounds[index], self._bounds[index + 1]
        offsets = self._offsets
        text = self.source[offsets[start - 1] : offsets[end - 1] if end <= len(offsets) else None]
        try:
            parsed = parse_module(text)
        except Exception as exc:  # noqa: BLE001 - the whole parse reports it properly
            raise NeedsParse from exc
        if (parsed.default_indent, parsed.default_newline) != self._file_config():
            raise NeedsParse
        if len(parsed.body) != 1:
            raise NeedsParse
        twins = self._twins
        stack: list[tuple[cst.CSTNode, cst.CSTNode]] = [(self.rebuilt.body[index], parsed.body[0])]
        while stack:
            mine, theirs = stack.pop()
            if type(mine) is not type(theirs):
                raise NeedsParse
            twins[id(mine)] = theirs
            mine_children, their_children = children(mine), children(theirs)
            if len(mine_children) != len(their_children):
                raise NeedsParse
            stack.extend(zip(mine_children, their_children, strict=True))
        self._parsed[index] = parsed

    # --- what libcst infers from the whole file ---------------------------------------------
    def _file_config(self) -> tuple[str, str]:
        if self._config is None:
            self._config = (first_indent(self.source), first_line_end(self.source))
        return self._config


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
