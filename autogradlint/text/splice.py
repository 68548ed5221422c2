"""Carry the edits made to a parsed slice back into the whole file, line by line.

`check` parses only the lines a check may read (slicing.py); `fix` edits that same parsed slice,
so its cost follows the slice, not the file. The slice's line i is the original line
`line_map[i]`; a changed stretch of slice lines is written over the original lines it came from,
which must be consecutive there (they are: fixes edit inside one method or one statement, and
those are kept whole). Where a stretch cannot be placed unambiguously the caller falls back to
parsing the whole file, where the map is the identity. Lines outside the edits keep their bytes,
line endings included; new lines take the line ending of the place they are put.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from ..model import LineEdit

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_ENDING = re.compile(r"(?:\r\n|\r|\n)\Z")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, as Python's tokenizer counts them (not str.splitlines, which
    also breaks at form feeds and other separators)."""
    return _LINE.findall(text)


def line_edits(
    original: str, old_code: str, new_code: str, line_map: list[int] | None
) -> list[LineEdit] | None:
    """The edits that turn `original` into the file `new_code` stands for, given that
    `old_code` was made of the original lines `line_map` (1-based; None: all of them).
    None when a changed stretch does not map onto consecutive original lines."""
    old = split_lines(old_code)
    new = split_lines(new_code)
    originals = split_lines(original)
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(old), len(new)) - prefix
        and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]
    ):
        suffix += 1
    if prefix == len(old) == len(new):
        return []

    def where(index: int) -> int:
        return line_map[index] - 1 if line_map is not None else index

    matcher = SequenceMatcher(
        None, old[prefix : len(old) - suffix], new[prefix : len(new) - suffix], autojunk=False
    )
    edits: list[LineEdit] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        i1, i2, j1, j2 = i1 + prefix, i2 + prefix, j1 + prefix, j2 + prefix
        if i2 > i1:
            positions = [where(i) for i in range(i1, i2)]
            if any(b != a + 1 for a, b in zip(positions, positions[1:], strict=False)):
                return None  # the stretch spans lines the slice left out
            start, end = positions[0], positions[-1] + 1
        else:  # an insertion before slice line i1
            before = where(i1 - 1) + 1 if i1 > 0 else None
            after = where(i1) if i1 < len(old) else None
            if before is not None and after is not None and before != after:
                return None  # between two kept stretches: which side is not knowable
            start = end = after if after is not None else (before if before is not None else 0)
        if start > len(originals) or end > len(originals):
            return None
        ending = _ending_near(originals, start)
        lines = tuple(_with_ending(line, ending) for line in new[j1:j2])
        if lines and end == len(originals) and originals and not _ENDING.search(originals[-1]):
            lines = (*lines[:-1], _ENDING.sub("", lines[-1]))  # the file had no final newline
        edits.append(LineEdit(start, end, lines))
    return edits


def apply_line_edits(original: str, edits: list[LineEdit]) -> str:
    lines = split_lines(original)
    if lines and any(e.start >= len(lines) for e in edits) and not _ENDING.search(lines[-1]):
        lines[-1] += _newline(original)  # something is appended after an unterminated last line
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        lines[edit.start : edit.end] = list(edit.lines)
    return "".join(lines)


def _ending_near(lines: list[str], index: int) -> str:
    """The line ending used where an edit lands: that of the line it replaces, else the one
    before, else the file's first."""
    for candidate in (index, index - 1):
        if 0 <= candidate < len(lines):
            found = _ENDING.search(lines[candidate])
            if found:
                return found.group()
    return _newline("".join(lines))


def _with_ending(line: str, ending: str) -> str:
    return _ENDING.sub("", line) + ending


def _newline(text: str) -> str:
    match = re.search(r"\r\n|\r|\n", text)
    return match.group() if match else "\n"
