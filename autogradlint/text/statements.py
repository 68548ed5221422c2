"""Top-level statements found from the text alone: a string- and comment-aware column-0 scan.

Building CPython's `ast` for a whole 5,000-line module costs ~40 ms; finding where its top-level
statements start costs ~1 ms with one regular expression. The slicer then hands `ast` only the
statements that can matter. The scan may err on the side of too few boundaries (a column-0 line
inside brackets is rare and merely splits a statement, which `ast` then rejects, and the caller
falls back to parsing the whole file); it never takes string contents for code.
"""

from __future__ import annotations

import ast
import functools
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from .ast_walk import parse_quietly

# Comments and string literals, consumed whole (so a quote, `#` or line start inside them is
# never seen). Prefixes (r, b, f, u) need no handling: a backslash escapes the next character
# for termination in raw strings too.
_STRINGS = r"""
      \"\"\"[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*\"\"\"
    | '''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''
    | "[^"\\\n]*(?:\\.[^"\\\n]*)*"
    | '[^'\\\n]*(?:\\.[^'\\\n]*)*'
"""
_STRINGS_AND_COMMENTS = r"\#[^\n]* |" + _STRINGS


@functools.lru_cache(maxsize=32)
def _scanner(indent: str) -> re.Pattern[str]:
    """One pass over the text: strings and comments are skipped, and every newline followed by
    `indent` and a character that can start a statement is reported. Every alternative starts
    with one of `#`, `"`, `'`, `\\n`, so `re` skips everything else at memory speed."""
    return re.compile(
        _STRINGS_AND_COMMENTS + "| \\n" + re.escape(indent) + r"(?=[^\s\#)\]}])",
        re.VERBOSE | re.DOTALL,
    )


_SCAN = _scanner("")
# Lines that continue the statement before them rather than start one.
_CLAUSE = re.compile(r"(?:else|elif|except|finally)\b")


def chunk_starts(text: str, indent: str = "", start: int = 0, end: int | None = None) -> list[int]:
    """Offsets where the statements at `indent` (with their decorators and clauses) start
    between `start` (the first, which holds any leading comments) and `end`; each later one
    is the beginning of a line. The list is shared: callers never change it."""
    whole = not indent and not start and end is None
    if whole:
        for seen, found in _WHOLE_TEXTS:
            if seen is text:  # the slicer, the file's methods and its summaries ask alike
                return found
    starts = _chunk_starts(text, indent, start, len(text) if end is None else end)
    if whole:
        _WHOLE_TEXTS.insert(0, (text, starts))
        del _WHOLE_TEXTS[4:]
    return starts


# The last texts scanned whole, by identity (one file's analysis asks for the same text's
# top-level statements three times).
_WHOLE_TEXTS: list[tuple[str, list[int]]] = []


def _chunk_starts(text: str, indent: str, start: int, end: int) -> list[int]:
    starts = [start]
    width = len(indent)
    decorated = text.startswith("@", start + width if start else 0)
    for match in _scanner(indent).finditer(text, start, end):
        if match.group()[:1] != "\n":
            continue
        offset = match.start() + 1  # the line start
        before = offset - 2 if text[offset - 2 : offset - 1] != "\r" else offset - 3
        if text[before : before + 1] == "\\":
            continue  # a backslash continuation line
        code = offset + width
        if decorated or _CLAUSE.match(text, code):
            decorated = text.startswith("@", code)
            continue  # a decorated def/class, or an else/except clause, continues the chunk
        decorated = text.startswith("@", code)
        starts.append(offset)
    return starts


# A statement that is one string literal (a docstring), with the blank and comment lines after
# it that its chunk holds. `f"{...}"` counts too: nothing in braces can bind a name. A comment
# runs to its line's end (only the last may end the text): one that could stop anywhere let a
# repetition try every split of `# # # ...`, exponentially, before a line that is not one.
_BARE_STRING = re.compile(
    r"[ \t]*[rRbBuUfF]{0,2}(?:" + _STRINGS + r")(?:\s|\#[^\n]*\n)*(?:\#[^\n]*)?",
    re.VERBOSE | re.DOTALL,
)


def is_bare_string(text: str, start: int, end: int) -> bool:
    """Whether the statement text[start:end] is a string literal alone (a docstring)."""
    return _BARE_STRING.fullmatch(text, start, end) is not None


_HEADER_TOKENS = re.compile(_STRINGS_AND_COMMENTS + r"| [()\[\]{}:\n]", re.VERBOSE | re.DOTALL)
_KEYWORD = re.compile(r"[ \t]*(?:async[ \t]+)?(?:def|class)\b")
_DECORATOR_OR_COMMENT = re.compile(r"[ \t]*(?:[@#]|\r?\n)")


def keyword_line(text: str, start: int, end: int) -> int | None:
    """Where the `def` or `class` line of the statement text[start:end] starts, past its
    decorators and comments (each on one line); None for any other statement."""
    keyword = start
    while not _KEYWORD.match(text, keyword):
        if not _DECORATOR_OR_COMMENT.match(text, keyword):
            return None  # an if, a for, an assignment...
        keyword = text.find("\n", keyword, end) + 1
        if keyword <= 0:
            return None
    return keyword


def def_name(text: str, start: int, end: int, indent: str) -> str | None:
    """The name of the def that the statement text[start:end], at `indent` in a class body,
    is; "" when it is no def; None when its decorators or comments are not plain single
    lines at that indentation (the text then leaves doubt: read it with `ast`)."""
    while start < end:  # line by line, only as far as the def line
        line_end = text.find("\n", start, end)
        line_end = end if line_end == -1 else line_end
        line, start = text[start:line_end], line_end + 1
        code = line.strip()
        if not code or code.startswith("#"):
            continue
        if not line.startswith(indent) or line[len(indent)] in " \t":
            return None  # a deeper line before the def: a decorator over several lines
        if code.startswith("@"):
            if any(c in code for c in "\"'#\\") or sum(map(code.count, "([{")) != sum(
                map(code.count, ")]}")
            ):
                return None
            continue
        method = _DEF_NAME.match(code)
        return method.group(1) if method is not None else ""
    return ""


_DEF_NAME = re.compile(r"(?:async[ \t]+)?def[ \t]+(\w+)")


def class_members(
    text: str, offset: int, end: int, indent: str
) -> list[tuple[int, int, str | None]]:
    """The statements of a class body that starts at `offset` with `indent` (body_start):
    each one's start, end and def_name."""
    starts = chunk_starts(text, indent, offset, end)
    bounds = [*starts, end]
    return [
        (start, bounds[index + 1], def_name(text, start, bounds[index + 1], indent))
        for index, start in enumerate(starts)
    ]


def body_start(text: str, start: int, end: int) -> tuple[int, str] | None:
    """For the def or class (with any decorators) in text[start:end]: the offset of the line
    where its indented body starts, and that body's indentation; None for anything else (a
    one-line body, an `if`, code that does not parse)."""
    keyword = keyword_line(text, start, end)
    if keyword is None:
        return None
    depth = 0
    for token in _HEADER_TOKENS.finditer(text, keyword, end):
        char = token.group()
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == ":" and depth == 0:
            line_end = text.find("\n", token.end(), end)
            rest = text[token.end() : line_end if line_end != -1 else end]
            if rest.strip() and not rest.strip().startswith("#"):
                return None  # `class A: pass`
            indented = _INDENT.match(text, keyword)
            assert indented is not None  # `[ \t]*` matches everywhere
            own = indented.end() - keyword  # the statement's indentation
            return _first_body_line(text, line_end + 1, end, own)
    return None


_INDENT = re.compile(r"[ \t]*")


def _first_body_line(text: str, offset: int, end: int, own: int) -> tuple[int, str] | None:
    while 0 < offset < end:
        line_end = text.find("\n", offset, end)
        line = text[offset : line_end if line_end != -1 else end]
        stripped = line.lstrip(" \t")
        if stripped.strip() and not stripped.startswith("#"):
            indent = line[: len(line) - len(stripped)]
            return (offset, indent) if len(indent) > own else None
        if line_end == -1:
            return None
        offset = line_end + 1
    return None


class Comment(NamedTuple):
    line: int  # 1-based, counting \r\n, \r and \n like Python's tokenizer
    column: int
    text: str
    alone: bool  # nothing but whitespace before it on its line


def comments(text: str) -> Iterator[Comment]:
    """Every comment, strings skipped: tokenize's COMMENT tokens at a fraction of the cost."""
    line, cursor = 1, 0
    for match in _SCAN.finditer(text):
        if match.group()[:1] != "#":
            continue
        start = match.start()
        line += line_breaks(text[cursor:start])
        cursor = start
        line_start = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) + 1
        before = text[line_start:start]
        yield Comment(line, start - line_start, match.group(), not before.strip())


_JOINED = re.compile(_STRINGS_AND_COMMENTS + r"| \\\r?\n", re.VERBOSE | re.DOTALL)


def joined_lines(text: str) -> dict[int, int]:
    """For every line that a backslash continuation or a multi-line string joins to the lines
    after it, the last line of the group (1-based): where a comment about it can go, since a
    comment after a `\\` is a syntax error and one inside a string is text."""
    groups: list[list[int]] = []
    line, cursor = 1, 0
    for match in _JOINED.finditer(text):
        token = match.group()
        if token.startswith("#"):
            continue
        breaks = line_breaks(token)
        if not breaks:
            continue
        line += line_breaks(text[cursor : match.start()])
        cursor = match.end()
        first, last = line, line + breaks
        line = last
        if groups and groups[-1][1] >= first:
            groups[-1][1] = max(groups[-1][1], last)  # a string that continues a continuation
        else:
            groups.append([first, last])
    return {number: last for first, last in groups for number in range(first, last)}


def chunk_of(starts: list[int], offsets: Iterable[int]) -> set[int]:
    """Indexes of the chunks holding these offsets."""
    return {bisect_right(starts, offset) - 1 for offset in offsets}


def blank_outside(text: str, ranges: list[tuple[int, int]]) -> tuple[str, list[int]]:
    """`text` with everything outside the sorted `ranges` (which start and end at line starts)
    replaced by as many empty lines as it spans, so line numbers and the columns of what is
    kept stay those of the original; and the first line of each blanked stretch followed by
    the first line after it, alternately (1-based)."""
    parts: list[str] = []
    blanked: list[int] = []
    cursor = 0
    line = 1
    # Without a \r a line break is a \n: counted in place, the gaps (most of a large file)
    # are never copied.
    plain = "\r" not in text
    for start, end in [*ranges, (len(text), len(text))]:
        if start > cursor:
            gap = text.count("\n", cursor, start) if plain else line_breaks(text[cursor:start])
            parts.append("\n" * gap)
            blanked += [line, line + gap]
            line += gap
        kept = text[start:end]
        parts.append(kept)
        line += kept.count("\n") if plain else line_breaks(kept)
        cursor = end
    return "".join(parts), blanked


def parse_holding(
    text: str, word: re.Pattern[str], members: bool = False
) -> tuple[ast.Module | None, list[int]]:
    """`ast` of the top-level statements whose text holds a match of `word`, at their lines
    in the file (the others blanked), and the lines of the matches: most of a large file
    never names what a question is about. With `members`, a top-level class keeps only its
    header and the members that hold a match (its other members blanked too: the class is
    then not whole), unless none does. The whole file when that does not parse (the scan
    split a statement at a line it took for a start). Python reads identifiers after NFKC
    normalisation (`ａpply` is `apply`), so a character outside ASCII counts as a match.
    Line numbers are the tokenizer's (`\\r` ends a line too)."""
    offsets = [match.start() for match in word.finditer(text)]
    if not text.isascii():
        offsets = sorted({*offsets, *(m.start() for m in _NOT_ASCII.finditer(text))})
    plain = "\r" not in text
    lines: list[int] = []
    line, cursor = 1, 0
    for offset in offsets:
        line += text.count("\n", cursor, offset) if plain else line_breaks(text[cursor:offset])
        cursor = offset
        lines.append(line)
    starts = chunk_starts(text)
    bounds = [*starts, len(text)]
    ranges: list[tuple[int, int]] = []
    for index in sorted(chunk_of(starts, offsets)):
        start, end = bounds[index], bounds[index + 1]
        ranges += _members_holding(text, start, end, offsets) if members else [(start, end)]
    kept, _blanked = blank_outside(text, ranges)
    return parse_quietly(kept) or parse_quietly(text), lines


_NOT_ASCII = re.compile(r"[^\x00-\x7f]+")


def _members_holding(text: str, start: int, end: int, offsets: list[int]) -> list[tuple[int, int]]:
    """The ranges of a statement to keep: a class's header and its members that hold one of
    `offsets` (a member class kept the same way); the whole statement when it is no class
    with a body of its own lines, or when no member holds one (the match is in its header)."""
    body = class_body(text, start, end)
    if body is None:
        return [(start, end)]
    offset, indent = body
    member_starts = chunk_starts(text, indent, offset, end)
    member_bounds = [*member_starts, end]
    held = sorted(chunk_of(member_starts, (o for o in offsets if offset <= o < end)))
    if not held:
        return [(start, end)]
    ranges = [(start, offset)]
    for index in held:
        ranges += _members_holding(text, member_bounds[index], member_bounds[index + 1], offsets)
    return ranges


def class_body(text: str, start: int, end: int) -> tuple[int, str] | None:
    """`body_start` of the statement text[start:end] when it is a class (None for a def)."""
    keyword = keyword_line(text, start, end)
    if keyword is None or not _CLASS.match(text, keyword):
        return None
    return body_start(text, start, end)


_CLASS = re.compile(r"[ \t]*class\b")


def line_breaks(text: str) -> int:
    """Line breaks as Python's tokenizer counts them: \\r\\n, \\r and \\n (not form feeds)."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")
