"""Plain result types that cross the engine, runner, reporters and process boundaries."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # libcst is only needed by the engine: keep `check`'s warm path light
    import libcst as cst

    from .edits import Fix


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\udc80-\udcff]")


def printable(text: str) -> str:
    """`text` with what a terminal or an XML document cannot show written as escapes: control
    characters (an ESC in a file name must not restyle the terminal, a newline must not start a
    new record) and the undecodable bytes of a non-UTF-8 file name (`\\xff`)."""
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00 if code >= 0xDC80 else code:02x}"


@dataclass(frozen=True)
class Violation:
    """A finding inside one engine call: still points at its CST node (never pickled)."""

    rule_id: str
    message: str
    node: cst.CSTNode
    # Where a finding should be placed when the node spans many lines (e.g. a call's `func`).
    anchor: cst.CSTNode | None = None
    fix: Fix | None = None
    subject: str | None = None  # the class it is about
    help: str = ""  # the detail under the headline
    severity: str | None = None  # when the evidence sets it (else the rule's)


@dataclass(frozen=True)
class Finding:
    """A located finding: picklable, JSON-able; what the CLI, LSP and cache exchange."""

    path: str
    rule_id: str
    name: str
    family: str
    severity: str
    message: str
    line: int  # 1-based
    col: int  # 0-based, code points
    end_line: int
    end_col: int
    fix_safety: str = "none"  # safe | unsafe | none: what the rule offers
    fixable: str | None = None  # safe | unsafe when this very finding has a fix
    subject: str | None = None  # the class the finding is about (for the runtime confirmer)
    help: str = ""  # the detail under the one-line message: why, and what to do

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.col, self.rule_id)


@dataclass(frozen=True)
class FileError:
    """A file that could not be analysed: unreadable, undecodable or unparsable."""

    path: str
    message: str
    line: int | None = None
    col: int | None = None

    def describe(self) -> str:
        path = printable(self.path)
        where = path if self.line is None else f"{path}:{self.line}:{(self.col or 0) + 1}"
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class LineEdit:
    """Original lines [start, end) (0-based) replaced by `lines` (each with its ending)."""

    start: int
    end: int
    lines: tuple[str, ...]


@dataclass(frozen=True)
class FixSuggestion:
    """One finding's fix on its own, as edits of the file (ruff's JSON `fix`, SARIF `fixes`)."""

    rule_id: str
    line: int
    col: int
    title: str
    safety: str  # safe | unsafe
    note: str
    edits: tuple[LineEdit, ...]


@dataclass(frozen=True)
class ClassSummary:
    """A class the confirmer can execute, and the probe that fits it (A, B or C)."""

    name: str
    line: int
    probe: str


@dataclass
class FileResult:
    """Everything the engine learned about one file."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    error: FileError | None = None
    parsed: bool = False  # False when the byte prefilter proved the file cannot hold a finding
    fixes: list[FixSuggestion] = field(default_factory=list)  # when asked for (json, sarif)
    classes: list[ClassSummary] = field(default_factory=list)  # when asked for (confirm)
    # What the result depends on beyond the file (analysis/dependencies.py): the project's C/C++
    # sources and other Python files the checks read; a cached result is valid while they hold.
    depends: str = ""
