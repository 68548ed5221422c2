"""ruff's `full` format: each finding headed by its code and message, its location on the next
line, two lines of context around carets, the help, and the fix as a diff when it has one."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import FileError, FileResult, printable
from .paths import relative, relative_in
from .summary import applicable, summary_lines
from .text import _STYLE, Lines, Segment, fix_block, fix_of, frame, prefix_segments

CONTEXT = 2  # lines shown before and after the finding's line, as ruff shows them


def render_full(
    out: Lines,
    results: Sequence[FileResult],
    errors: Sequence[FileError],
    sources: dict[str, list[str]],
    *,
    quiet: bool = False,
    unsafe: bool = False,
) -> None:
    for result in results:
        for f in result.findings:
            marker: tuple[Segment, ...] = (
                ((" ", ""), ("[*]", "cyan")) if applicable(f, unsafe) else ()
            )
            out.line((f.rule_id, _STYLE[f.severity]), *marker, (f" {f.message}", "bold"))
            lines = sources.get(f.path)
            width = len(str(min(len(lines), f.line + CONTEXT))) if lines else 1
            where = f"{printable(relative(f.path))}:{f.line}:{f.col + 1}"
            out.line((f"{' ' * width}--> ", "blue"), (where, ""))
            if lines:
                for segments in frame(lines, f, CONTEXT, label=False):
                    out.line(*segments)
            if f.help:
                out.line(*prefix_segments("", "help"), (f": {relative_in(f.help)}", ""))
            fix = fix_of(result, f)
            if fix is not None and lines:
                for segments in fix_block(lines, fix, width, ""):
                    out.line(*segments)
            out.line()
    if quiet:
        return
    for line in summary_lines(results, errors, unsafe=unsafe):
        out.line((line, ""))
