"""The rows of docs/semantics.md: what PyTorch does, which each rule cites (pure parsing).

The document ships inside the wheel (`_docs/semantics.md`) so `autogradlint rule` can show a
rule's evidence wherever it is installed."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

# `| A2.1 | situation | observed |`: a row of one of the document's tables.
_ROW = re.compile(r"^\|\s*((?:[A-D]\d+\.\d+[a-z]?|FIX-[A-D]\d+))\s*\|(.+)\|\s*$")


@dataclass(frozen=True)
class Row:
    id: str
    cells: tuple[str, ...]  # the other columns: the situation, then what was observed
    section: str = ""  # the heading the row's table sits under (its setting)

    def describe(self) -> str:
        text = " -> ".join(self.cells)
        return f"{text} [{self.section}]" if self.section else text


def parse_rows(text: str) -> dict[str, Row]:
    """Every table row of the document, by id."""
    rows: dict[str, Row] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("#"):
            section = line.lstrip("#").strip()
            continue
        match = _ROW.match(line)
        if match is not None:
            cells = tuple(cell.strip() for cell in _split_cells(match.group(2)))
            rows[match.group(1)] = Row(match.group(1), cells, section)
    return rows


def _split_cells(text: str) -> list[str]:
    """Split on `|` outside backquotes (an error text may contain one)."""
    cells: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == "`":
            quoted = not quoted
        if char == "|" and not quoted:
            cells.append("".join(current))
            current = []
        else:
            current.append(char)
    cells.append("".join(current))
    return cells


def document_path() -> Path:
    """Inside the wheel (`_docs`), else the source checkout's `docs/`."""
    here = Path(__file__).resolve().parent
    packaged = here / "_docs" / "semantics.md"
    return packaged if packaged.is_file() else here.parent / "docs" / "semantics.md"


@functools.cache
def semantics_rows() -> dict[str, Row]:
    path = document_path()
    return parse_rows(path.read_text(encoding="utf-8")) if path.is_file() else {}
