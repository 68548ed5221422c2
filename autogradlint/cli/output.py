"""`check`'s report in the format asked for, written where it was asked to go."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..model import FileError, FileResult

if TYPE_CHECKING:
    from ..confirm.run import Outcome
    from .common import Console

# The formats that show each fixable finding's fix: it is computed in the same analysis.
SHOW_FIXES = frozenset({"json", "sarif", "full"})
FORMATS = ("text", "full", "concise", "json", "sarif", "github", "junit")


def render_report(
    echo: Callable[[str], None],
    console: Console,
    results: list[FileResult],
    errors: list[FileError],
    sources: dict[str, list[str]],
    *,
    fmt: str,
    statistics: bool = False,
    quiet: bool = False,
    unsafe: bool = False,
    show_fixes: bool = False,
    color: str = "auto",
    to_file: bool = False,
    outcomes: list[Outcome] | None = None,
) -> None:
    outcomes = outcomes or []
    if statistics:
        from ..report.statistics import render_statistics, render_statistics_json

        if fmt == "json":
            echo(render_statistics_json(results, unsafe))
            return
        text = render_statistics(results, errors, quiet=quiet, unsafe=unsafe)
        if text:
            echo(text)
        return
    if fmt == "json":
        from ..report.json_format import render_json

        echo(render_json(results, outcomes))
    elif fmt == "concise":
        from ..report.json_format import render_concise

        text = render_concise(results, errors, quiet=quiet, unsafe=unsafe)
        if text:
            echo(text)
    elif fmt == "sarif":
        from ..report.sarif import render_sarif

        echo(render_sarif(results, errors, Path.cwd()))
    elif fmt == "github":
        from ..report.ci_formats import render_github

        echo(render_github(results, errors))
    elif fmt == "junit":
        from ..report.ci_formats import render_junit

        echo(render_junit(results, errors))
    else:
        from ..report.text import Lines, PlainLines, RichLines, plain_stream, render_text

        # A pipe or a file gets no styles: written directly, without importing rich. A file
        # is a terminal only with --color=always (report_sink).
        plain = color != "always" and (to_file or plain_stream(sys.stdout, color))
        lines: Lines = PlainLines(echo) if plain else RichLines(console)
        render_text(
            lines,
            results,
            errors,
            sources,
            quiet=quiet,
            unsafe=unsafe,
            show_fixes=show_fixes,
            full=fmt == "full",
        )
        if outcomes:
            from ..confirm.report import render_confirm_table

            render_confirm_table(console, outcomes, ["cpu", "cuda"])
