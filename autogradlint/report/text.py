"""Human output: `path:line:col: AGL201 message`, a code frame, and a summary line (or ruff's
`full` layout: the code and message first, the location below, each fix as a diff).

Each line is built as styled segments. A terminal gets them through rich (colour, bold); a pipe
or a file gets the same characters written directly, since rich would only drop the styles
there, and importing it costs a run ~35 ms after the analysis is done."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from ..model import FileError, FileResult, Finding, FixSuggestion, printable
from .escape import TAB, cells, escaped, shown
from .paths import relative, relative_in
from .summary import applicable, summary_lines

if TYPE_CHECKING:
    from rich.console import Console

Segment = tuple[str, str]  # text, and a rich style ("" for none)
_STYLE = {"error": "bold red", "warning": "bold yellow"}
# What rich's Text removes from every string it is given (bell, backspace, vertical tab, form
# feed, carriage return): the plain writer removes the same.
_CONTROL = dict.fromkeys((7, 8, 11, 12, 13))


class Lines:
    """Where the styled lines go."""

    def line(self, *segments: Segment) -> None:
        raise NotImplementedError


class PlainLines(Lines):
    """The characters only, for a stream that is not a terminal."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write

    def line(self, *segments: Segment) -> None:
        text = "".join(text for text, _style in segments).translate(_CONTROL)
        self.write(_expand_tabs(text) if "\t" in text else text)


def _expand_tabs(line: str) -> str:
    """Tabs to spaces at every 8th cell, as rich does (a wide character takes two cells)."""
    if line.isascii():
        return line.expandtabs(TAB)
    out: list[str] = []
    taken = 0
    for char in line:
        if char == "\t":
            spaces = TAB - taken % TAB
            out.append(" " * spaces)
            taken += spaces
            continue
        out.append(char)
        taken += cells(char)
    return "".join(out)


class RichLines(Lines):
    """Styled through a rich console."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def line(self, *segments: Segment) -> None:
        from rich.text import Text

        self.console.print(Text.assemble(*segments), soft_wrap=True, highlight=False)


def plain_stream(stream: TextIO, color: str) -> bool:
    """Whether rich would treat `stream` as no terminal (so styles would be dropped anyway):
    rich's own rules, `--color=always`, FORCE_COLOR and TTY_COMPATIBLE=1 say otherwise."""
    if color == "always" or os.environ.get("FORCE_COLOR"):
        return False
    if os.environ.get("TTY_COMPATIBLE") == "1":
        return False
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return False  # a closed or odd stream: let rich decide


def frame(
    lines: list[str], f: Finding, context: int = 1, label: bool = True
) -> list[tuple[Segment, ...]]:
    """The finding's line with `context` lines around it, each as a terminal is to show it
    (escape.shown), and carets over the cells its span takes there (followed by the code with
    `label`, as the text format does; ruff's full format has none)."""
    out: list[tuple[Segment, ...]] = []
    first = max(1, f.line - context)
    last = min(len(lines), f.line + context)
    width = len(str(last))
    gutter = (f"{' ' * width} |", "blue")
    out.append((gutter,))
    for number in range(first, last + 1):
        text = lines[number - 1].rstrip("\r\n")
        display, starts = shown(text)
        out.append(((f"{number:>{width}} |", "blue"), (f" {display}", "")))
        if number == f.line:
            end = f.end_col if f.end_line == f.line else len(text)
            start = starts[min(f.col, len(text))]
            carets = "^" * max(1, starts[min(max(end, f.col), len(text))] - start)
            tail = f"{carets} {f.rule_id}" if label else carets
            out.append((gutter, (f" {' ' * start}", ""), (tail, _STYLE[f.severity])))
    out.append((gutter,))
    return out


def fix_block(
    lines: list[str], fix: FixSuggestion, width: int, prefix: str
) -> list[tuple[Segment, ...]]:
    """A fix as ruff shows one: its title, then each edit as removed (`-`) and added (`+`)
    lines between a line of context on each side, numbered as in the fixed file; then a note
    when the fix is unsafe."""
    title = fix.title + (f" ({fix.note})" if fix.note else "")
    out: list[tuple[Segment, ...]] = [(*prefix_segments(prefix, "fix"), (f": {title}", ""))]
    rows: list[tuple[int | None, str, str]] = []  # (new line number, mark, text)
    shift = 0
    shown_up_to = -1  # the last original line shown (0-based)
    for edit in sorted(fix.edits, key=lambda e: e.start):
        before = edit.start - 1
        if before > shown_up_to + 1 and rows:
            rows.append((None, ":", ""))  # lines between two edits, not shown
        if before >= 0 and before > shown_up_to:
            rows.append((before + shift + 1, "|", lines[before]))
        rows += [(None, "-", lines[i]) for i in range(edit.start, min(edit.end, len(lines)))]
        rows += [(edit.start + shift + i + 1, "+", text) for i, text in enumerate(edit.lines)]
        shift += len(edit.lines) - (edit.end - edit.start)
        shown_up_to = edit.end - 1
        if edit.end < len(lines):
            rows.append((edit.end + shift + 1, "|", lines[edit.end]))
            shown_up_to = edit.end
    width = max([width, *(len(str(n)) for n, _, _ in rows if n is not None)])
    gutter = (f"{' ' * width} |", "blue")
    out.append((gutter,))
    mark_style = {"|": "blue", ":": "blue", "-": "red", "+": "green"}
    for number, mark, text in rows:
        numbered = " " * width if number is None else f"{number:>{width}}"
        body = shown(text.rstrip("\r\n"))[0]
        style = "" if mark in "|:" else mark_style[mark]
        out.append(
            ((f"{numbered} ", "blue"), (mark, mark_style[mark]), (f" {body}".rstrip(), style))
        )
    out.append((gutter,))
    if fix.safety == "unsafe":
        out.append(
            (
                *prefix_segments(prefix, "note"),
                (": an unsafe fix: it changes what the code computes (`--unsafe-fixes`)", ""),
            )
        )
    return out


def prefix_segments(prefix: str, word: str) -> tuple[Segment, ...]:
    """`help` after the text format's `   = ` prefix, or alone at the start (ruff's full)."""
    if not prefix:
        return ((word, "bold"),)
    return ((prefix, ""), ("=", "blue"), (" ", ""), (word, "bold"))


def fix_of(result: FileResult, finding: Finding) -> FixSuggestion | None:
    key = (finding.rule_id, finding.line, finding.col)
    return next((x for x in result.fixes if (x.rule_id, x.line, x.col) == key), None)


FULL_CONTEXT = 2  # lines shown around a finding in ruff's full format (the text format: 1)


def render_text(
    out: Lines,
    results: Sequence[FileResult],
    errors: Sequence[FileError],
    sources: dict[str, list[str]],
    *,
    quiet: bool = False,
    unsafe: bool = False,
    show_fixes: bool = False,
    full: bool = False,
) -> None:
    """The findings with code frames (and, with `show_fixes`, each one's fix), then (unless
    `quiet`) the summary. `full` is ruff's full format: each finding headed by its code and
    message, its location on the next line, two lines of context, carets without the code,
    and its fix always shown."""
    for result in results:
        for f in result.findings:
            marker: tuple[Segment, ...] = (
                ((" ", ""), ("[*]", "cyan")) if applicable(f, unsafe) else ()
            )
            where = f"{printable(relative(f.path))}:{f.line}:{f.col + 1}"
            lines = sources.get(f.path)
            context = FULL_CONTEXT if full else 1
            width = len(str(min(len(lines), f.line + context))) if lines else 1
            prefix = "" if full else " " * width + " "
            if full:
                message = escaped(f.message)
                out.line((f.rule_id, _STYLE[f.severity]), *marker, (f" {message}", "bold"))
                out.line((f"{' ' * width}--> ", "blue"), (where, ""))
            else:
                out.line(
                    (printable(relative(f.path)), "bold"),
                    (f":{f.line}:{f.col + 1}: ", ""),
                    (f.rule_id, _STYLE[f.severity]),
                    *marker,
                    (f" {escaped(f.message)}", ""),
                )
            if lines:
                for segments in frame(lines, f, context, label=not full):
                    out.line(*segments)
            if f.help:
                help_text = escaped(relative_in(f.help))
                out.line(*prefix_segments(prefix, "help"), (f": {help_text}", ""))
            fix = fix_of(result, f) if (show_fixes or full) and lines else None
            if fix is not None and lines:
                for segments in fix_block(lines, fix, width, prefix):
                    out.line(*segments)
            out.line()
    if quiet:
        return
    for line in summary_lines(results, errors, unsafe=unsafe):
        out.line((line, ""))
