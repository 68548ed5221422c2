"""Machine-readable output: JSON with ruff's keys (absolute `filename`s), and the concise
one-line-per-finding form (paths relative to the current directory, as in the text format)."""

from __future__ import annotations

import json
from typing import Any

from ..meta import rule_url
from ..model import FileError, FileResult, Finding, printable
from .escape import escaped
from .paths import absolute, relative
from .summary import applicable, summary_lines
from .text import fix_of


def render_json(results: list[FileResult], outcomes: list[Any] | None = None) -> str:
    verdicts: dict[int, dict[str, Any]] = {}
    for outcome in outcomes or []:
        for finding in outcome.target.findings:
            verdicts[id(finding)] = {"verdict": outcome.verdict, "devices": outcome.devices}
    items = []
    for result in results:
        for f in result.findings:
            items.append(
                {
                    "code": f.rule_id,
                    "name": f.name,
                    "message": f.message,
                    "help": f.help or None,
                    "severity": f.severity,
                    "family": f.family,
                    "filename": absolute(f.path),
                    "location": {"row": f.line, "column": f.col + 1},
                    "end_location": {"row": f.end_line, "column": f.end_col + 1},
                    "noqa_row": f.line,
                    "fix": _fix(result, f),
                    "fix_safety": f.fix_safety,
                    "url": rule_url(f.rule_id),
                    **({"confirm": verdicts[id(f)]} if id(f) in verdicts else {}),
                }
            )
    return json.dumps(items, indent=2)


def _fix(result: FileResult, finding: Finding) -> dict[str, Any] | None:
    """The finding's fix in ruff's shape: applicability, message, and edits (whole lines: a
    location at column 1 of the first, an end at column 1 of the line after the last)."""
    fix = fix_of(result, finding)
    if fix is None:
        return None
    return {
        "applicability": fix.safety,
        "message": fix.title + (f" ({fix.note})" if fix.note else ""),
        "edits": [
            {
                "content": "".join(edit.lines),
                "location": {"row": edit.start + 1, "column": 1},
                "end_location": {"row": edit.end + 1, "column": 1},
            }
            for edit in fix.edits
        ],
    }


def render_concise(
    results: list[FileResult],
    errors: list[FileError],
    *,
    quiet: bool = False,
    unsafe: bool = False,
) -> str:
    """One plain line per finding (no colour, no rich: it is often piped); `[*]` marks a
    finding the suggested fix command fixes, as in ruff's concise format; then, unless
    `quiet`, the summary every human format ends with."""
    lines = [
        f"{printable(relative(f.path))}:{f.line}:{f.col + 1}: {f.rule_id}"
        f"{' [*]' if applicable(f, unsafe) else ''} {escaped(f.message)}"
        for r in results
        for f in r.findings
    ]
    if not quiet:
        lines += summary_lines(results, errors, unsafe=unsafe)
    return "\n".join(lines)
