"""Methods and functions of a file, found by name in its full text: the helpers a backward
reaches through an object rather than a class (`block.backward_pass(y, dy)` on the blocks of a
reversible network, held on ctx), and the module-level helper a dispatch handler hands the
caller's request to.

The slice libcst parsed holds the Function classes, not the module classes whose methods they
call; the class that defines the method is read from the text only when backward calls a method
of that name, and parsed alone.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from ..text.marks import holds_graph_call
from ..text.statements import chunk_starts, class_body, class_members
from .names import dotted
from .parsing import parse_module


@dataclass(frozen=True)
class Method:
    """One method of a top-level class of the file."""

    owner: str  # the class
    node: cst.FunctionDef
    binds_receiver: bool  # its first parameter receives the object it was called on


class FileMethods:
    """The methods of one file's top-level classes, parsed class by class when first asked."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._bounds: list[int] | None = None
        self._found: dict[str, list[Method]] = {}
        self._functions: dict[str, cst.FunctionDef | None] = {}
        self._constants: dict[str, cst.BaseExpression | None] = {}
        self._modules: dict[int, cst.Module | None] = {}

    def graph_helpers(self, name: str) -> list[Method]:
        """The methods called `name` in classes whose text can hold a graph call (the others
        are not parsed): what family A follows from backward."""
        if name not in self._found:
            self._found[name] = self._find(name, holds_graph_call)
        return self._found[name]

    def of_class(self, owner: str, name: str) -> list[Method]:
        """The methods called `name` of the top-level class `owner`, from that class's
        statement alone (memoised)."""
        key = f"{owner}\0{name}"
        if key not in self._found:
            self._found[key] = self._find(name, None, owner)
        return self._found[key]

    def function(self, name: str) -> cst.FunctionDef | None:
        """The module-level `def name(...)`, when the file defines exactly one (parsed alone)."""
        if name not in self._functions:
            self._functions[name] = self._function(name)
        return self._functions[name]

    def _function(self, name: str) -> cst.FunctionDef | None:
        found = [at for at in _defs_of(self.text, name) if _at_module_scope(self.text, at)]
        if len(found) != 1:
            return None  # none, or redefined (@overload, a branch): not one answer
        module = self._statement_at(found[0])
        if module is None:
            return None
        defs = [s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == name]
        return defs[0] if len(defs) == 1 else None

    def constant(self, name: str) -> cst.BaseExpression | None:
        """The value of `name = ...` at module scope, when the file binds it exactly once
        there (parsed alone): `TARGET = torch.device("meta")`."""
        if name not in self._constants:
            self._constants[name] = self._constant(name)
        return self._constants[name]

    def _constant(self, name: str) -> cst.BaseExpression | None:
        found = [m.start() for m in _assign_pattern(name).finditer(self.text)]
        if len(found) != 1:
            return None  # unbound, or rebound at module scope: not one answer
        module = self._statement_at(found[0])
        if module is None:
            return None
        for stmt in module.body:
            if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
                continue
            small = stmt.body[0]
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target: cst.BaseExpression = small.targets[0].target
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                target = small.target
            else:
                continue
            if isinstance(target, cst.Name) and target.value == name:
                return small.value
        return None

    def _statement_at(self, offset: int) -> cst.Module | None:
        """The top-level statement holding `offset`, parsed alone (None if libcst refuses it)."""
        return self._chunk(_chunk_of(self._chunk_bounds(), offset))

    def _chunk_bounds(self) -> list[int]:
        if self._bounds is None:
            self._bounds = [*chunk_starts(self.text), len(self.text)]
        return self._bounds

    def _find(
        self, name: str, holding: Callable[[str], bool] | None, owner: str | None = None
    ) -> list[Method]:
        found = _defs_of(self.text, name)
        if not found:
            return []
        bounds = self._chunk_bounds()
        chunks = sorted({_chunk_of(bounds, offset) for offset in found})
        # A class's statement says `class <owner>` (no comment can come between the two).
        header = None if owner is None else re.compile(rf"class[\s\\]+{re.escape(owner)}\b")
        out: list[Method] = []
        for index in chunks:
            chunk = self.text[bounds[index] : bounds[index + 1]]
            if holding is not None and not holding(chunk):
                continue
            if header is not None and header.search(chunk) is None:
                continue
            module = self._chunk(index) if owner is None else self._members(index, name)
            for stmt in module.body if module is not None else ():
                if isinstance(stmt, cst.ClassDef) and owner in (None, stmt.name.value):
                    out.extend(_methods_of(stmt, name))
        return out

    def _members(self, index: int, name: str) -> cst.Module | None:
        """Top-level statement `index`, when it is a class, parsed with only its header and
        the members that may be `def name` (the others are not read: a 2,000-line tensor
        subclass is not parsed for its `__init__`); otherwise, or when that does not parse,
        the whole statement."""
        bounds = self._chunk_bounds()
        start, end = bounds[index], bounds[index + 1]
        body = class_body(self.text, start, end)
        if body is None:
            return self._chunk(index)
        offset, indent = body
        members = class_members(self.text, offset, end, indent)
        kept = [self.text[a:b] for a, b, defined in members if defined in (None, name)]
        if not kept:
            return self._chunk(index)
        try:
            return parse_module(self.text[start:offset] + "".join(kept))
        except Exception:  # noqa: BLE001 - libcst raises bare exceptions on odd input
            return self._chunk(index)

    def _chunk(self, index: int) -> cst.Module | None:
        """Top-level statement `index`, parsed once however many names are asked of it."""
        if index not in self._modules:
            bounds = self._chunk_bounds()
            try:
                self._modules[index] = parse_module(self.text[bounds[index] : bounds[index + 1]])
            except Exception:  # noqa: BLE001 - libcst raises bare exceptions on odd input
                self._modules[index] = None
        return self._modules[index]


def _defs_of(text: str, name: str) -> list[int]:
    """Offsets of every `def name(` in the text, `def` a whole word. The pattern starts with
    its literal so `re` skips ahead at memory speed (a leading `\\b` or `^` makes it try every
    position: ~3% of a run's analysis); the word boundary is checked by hand."""
    return [
        match.start()
        for match in _def_pattern(name).finditer(text)
        if not _WORD_END.match(text[max(0, match.start() - 1) : match.start()])
    ]


@functools.lru_cache(maxsize=256)
def _def_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"def[ \t]+{re.escape(name)}[ \t]*\(")


@functools.lru_cache(maxsize=256)
def _assign_pattern(name: str) -> re.Pattern[str]:
    """`name = ...` / `name: T = ...` starting a line (not `name == ...`)."""
    return re.compile(rf"^{re.escape(name)}[ \t]*(?::[^=\n]*)?=(?!=)", re.MULTILINE)


_WORD_END = re.compile(r"\w")
_ASYNC = re.compile(r"async[ \t]+")


def _at_module_scope(text: str, at: int) -> bool:
    """Whether the `def` at `at` starts its line, or follows only `async ` there."""
    line_start = text.rfind("\n", 0, at) + 1
    return line_start == at or _ASYNC.fullmatch(text, line_start, at) is not None


def _chunk_of(bounds: list[int], offset: int) -> int:
    return bisect_right(bounds, offset) - 1


def _methods_of(cls: cst.ClassDef, name: str) -> list[Method]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    out = []
    for stmt in body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            decorators = {dotted(d.decorator) for d in stmt.decorators}
            # A staticmethod called on an object gets no receiver; a classmethod gets the
            # class, which no argument at the call stands for either.
            plain = not decorators & {"staticmethod", "classmethod"}
            out.append(Method(cls.name.value, stmt, plain))
    return out
