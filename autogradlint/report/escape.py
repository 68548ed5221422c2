"""Text from a checked file, made safe for a terminal: control characters as escapes.

A source line quoted in a report is the file's, not ours: an ESC in it would restyle or clear
the terminal (erasing the finding and the summary), a carriage return overwrite the line, and a
bidirectional override reorder what is shown. Each becomes a visible escape (`\\x1b`, `\\u202e`),
as file names already do (model.printable). Tabs stay: they are expanded to the cells a
terminal gives them, and the caret line under a quoted line is laid out over the same cells.
"""

from __future__ import annotations

import re
import unicodedata

# C0 controls but the tab, DEL, C1 controls, bidirectional embeddings, overrides and isolates,
# and the lone surrogates that stand for undecodable bytes.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")
TAB = 8  # cells between tab stops, as rich and most terminals have them


def escaped(text: str) -> str:
    """`text` with every control character written as an escape (tabs kept)."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as surrogateescape keeps it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def cells(char: str) -> int:
    """The terminal cells a printable character takes (a wide one two, a combining one none)."""
    if char.isascii():
        return 1
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def shown(line: str) -> tuple[str, list[int]]:
    """The line as a terminal is to show it (control characters escaped, tabs expanded from
    the line's start), and for each character of `line` the cell it starts at, then the cell
    after the last: the columns a caret line needs."""
    if line.isascii() and "\t" not in line and not _CONTROL.search(line):
        return line, list(range(len(line) + 1))
    out: list[str] = []
    starts: list[int] = []
    cell = 0
    for char in line:
        starts.append(cell)
        if char == "\t":
            width = TAB - cell % TAB
            out.append(" " * width)
            cell += width
            continue
        text = escaped(char)
        out.append(text)
        cell += sum(cells(c) for c in text)
    starts.append(cell)
    return "".join(out), starts
