"""Human output: `path:line:col: AGL201 message`, a code frame, and a summary line.

Each line is built as styled segments. A terminal gets them through rich (colour, bold); a pipe
or a file gets the same characters written directly, since rich would only drop the styles
there, and importing it costs a run ~35 ms after the analysis is done."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from ..model import FileError, FileResult, Finding, printable
from .escape import TAB, cells, escaped, shown

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


def _frame(lines: list[str], f: Finding) -> list[tuple[Segment, ...]]:
    """The lines around the finding, each as a terminal is to show it (escape.shown), and
    under the finding's line carets over the cells its columns take there."""
    out: list[tuple[Segment, ...]] = []
    first = max(1, f.line - 1)
    last = min(len(lines), f.line + 1)
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
            out.append(
                (gutter, (f" {' ' * start}", ""), (f"{carets} {f.rule_id}", _STYLE[f.severity]))
            )
    out.append((gutter,))
    return out


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def render_text(
    out: Lines,
    results: Sequence[FileResult],
    errors: Sequence[FileError],
    sources: dict[str, list[str]],
    *,
    quiet: bool = False,
) -> None:
    """The findings with code frames, then (unless `quiet`) the summary."""
    findings = [f for r in results for f in r.findings]
    for f in findings:
        marker: tuple[Segment, ...] = ((" ", ""), ("[*]", "cyan")) if f.fixable == "safe" else ()
        out.line(
            (printable(f.path), "bold"),
            (f":{f.line}:{f.col + 1}: ", ""),
            (f.rule_id, _STYLE[f.severity]),
            *marker,
            (f" {escaped(f.message)}", ""),
        )
        lines = sources.get(f.path)
        if lines:
            for segments in _frame(lines, f):
                out.line(*segments)
        if f.help:
            pad = " " * (len(str(min(len(lines), f.line + 1))) if lines else 1)
            out.line(
                (f"{pad} ", ""),
                ("=", "blue"),
                (" ", ""),
                ("help", "bold"),
                (f": {escaped(f.help)}", ""),
            )
        out.line()
    if quiet:
        return
    errors_found = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors_found
    files = len({f.path for f in findings})
    checked = _plural(len(results), "file")
    if findings:
        out.line(
            (
                f"Found {_plural(len(findings), 'problem')} ({_plural(errors_found, 'error')}, "
                f"{_plural(warnings, 'warning')}) in {_plural(files, 'file')}; {checked} checked.",
                "",
            )
        )
        safe = sum(1 for f in findings if f.fixable == "safe")
        unsafe = sum(1 for f in findings if f.fixable == "unsafe")
        if safe or unsafe:
            more = f" ({unsafe} more with `--unsafe-fixes`)" if unsafe else ""
            out.line((f"[*] {safe} fixable with `autogradlint fix --apply`{more}.", ""))
    elif not errors:
        out.line((f"All checks passed! ({checked} checked)", ""))
    else:
        out.line(
            (
                f"No problems found in {checked} checked, but {len(errors)} could not be "
                "checked (see the errors below).",
                "",
            )
        )
