"""The Function classes of other files that this file's classes derive from, as the contract
checks read them: a child's `backward` is held to the `forward` it inherits, whichever file
defines it (issue 32).

The project index says where each base is defined (`FileView.inherited`); the class statement
is read from that file and parsed alone with libcst when a check first asks, with that file's
own imports for resolving its names. Nothing is reported on these nodes: they are read only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import libcst as cst

from ..text.outline import module_imports
from ..text.statements import chunk_starts
from ..view import FileView
from .facts import ClassInfo
from .names import ImportTable, dotted
from .parsing import parse_module
from .summaries import PythonFiles


@dataclass
class ForeignClass:
    """A class of another file: its methods, and the imports its names resolve through."""

    info: ClassInfo
    imports: ImportTable
    path: str


@dataclass
class Inherited:
    """What this file's classes inherit from other files, read when first asked."""

    view: FileView
    files: PythonFiles
    consulted: set[str] = field(default_factory=set)  # the files read (what results depend on)
    # Every node of the classes read: they have no position in this file, so no finding may
    # sit on one (`Check.report` drops those).
    nodes: set[int] = field(default_factory=set)
    _classes: dict[tuple[str, str], ForeignClass | None] = field(default_factory=dict)

    def lineage(self, base: str) -> list[ForeignClass]:
        """The classes a base expression of this file (`BaseFn`, `ops.BaseFn`) stands for, and
        their ancestors in the project, in the order a method is looked up."""
        found: list[ForeignClass] = []
        for text, chain in self.view.inherited:
            if text != base:
                continue
            for path, name in chain:
                foreign = self._class(path, name)
                if foreign is not None:
                    found.append(foreign)
        return found

    def method(self, base: str, name: str) -> tuple[cst.FunctionDef, ForeignClass] | None:
        """`name` as the class named by `base` resolves it, with the class defining it."""
        for foreign in self.lineage(base):
            method = foreign.info.methods.get(name)
            if method is not None:
                return method, foreign
        return None

    def _class(self, path: str, name: str) -> ForeignClass | None:
        key = (path, name)
        if key not in self._classes:
            self._classes[key] = self._read(path, name)
        return self._classes[key]

    def _read(self, path: str, name: str) -> ForeignClass | None:
        if not os.path.isfile(path):
            return None
        self.consulted.add(path)
        text = self.files.text(path)
        chunk = _class_statement(text, name)
        if chunk is None:
            return None
        try:
            module = parse_module(chunk)
        except Exception:  # noqa: BLE001 - libcst raises bare exceptions on odd input
            return None
        node = next(
            (s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == name),
            None,
        )
        if node is None:
            return None
        imports = ImportTable(module_imports(text.encode("utf-8", "surrogatepass")))
        bases = [dotted(arg.value) or "" for arg in node.bases if arg.keyword is None]
        info = ClassInfo(
            node=node,
            name=name,
            kinds={"function"},
            base_names=[imports.resolve_dotted(b) if b else "" for b in bases],
        )
        self.nodes.update(_node_ids(node))
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                info.methods[stmt.name.value] = stmt
        return ForeignClass(info, imports, path)


def _class_statement(text: str, name: str) -> str | None:
    """The text of the top-level `class <name>` statement (with its decorators)."""
    pattern = re.compile(rf"^(?:@[^\n]*\n)*class[ \t]+{re.escape(name)}\b", re.M)
    starts = chunk_starts(text)
    bounds = [*starts, len(text)]
    found = None
    for index, start in enumerate(starts):
        if pattern.search(text, start, bounds[index + 1]):
            found = text[start : bounds[index + 1]]  # the last definition wins, as at run time
    if found is None:
        return None
    return found if found.endswith("\n") else found + "\n"


def _node_ids(root: cst.CSTNode) -> set[int]:
    """The ids of a tree's nodes (iteratively: a deep expression must not exhaust the stack)."""
    found: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        found.add(id(node))
        stack.extend(node.children)
    return found
