"""`--statistics`: the count of findings per rule, as ruff prints it (a table, or JSON)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from ..model import FileError, FileResult
from .summary import applicable, summary_lines


@dataclass(frozen=True)
class RuleCount:
    code: str
    name: str
    count: int
    fixable_count: int  # how many of them the suggested fix command fixes

    @property
    def fixable(self) -> bool:
        """ruff's `[*]`: some finding of the rule here can be fixed."""
        return self.fixable_count > 0


def rule_counts(results: list[FileResult], unsafe: bool = False) -> list[RuleCount]:
    """Most frequent first, then by code."""
    counts: Counter[tuple[str, str]] = Counter()
    fixable: Counter[str] = Counter()
    for result in results:
        for finding in result.findings:
            counts[(finding.rule_id, finding.name)] += 1
            fixable[finding.rule_id] += applicable(finding, unsafe)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0][0]))
    return [RuleCount(code, name, n, fixable[code]) for (code, name), n in ordered]


def render_statistics(
    results: list[FileResult],
    errors: list[FileError],
    *,
    quiet: bool = False,
    unsafe: bool = False,
) -> str:
    """`count  code  [*] name` lines, the counts right-aligned, then (unless `quiet`) the
    summary, as ruff prints them."""
    rows = rule_counts(results, unsafe)
    width = max((len(str(row.count)) for row in rows), default=1)
    lines = [
        f"{row.count:>{width}}\t{row.code}\t{'[*]' if row.fixable else '[ ]'} {row.name}"
        for row in rows
    ]
    if not quiet:
        lines += summary_lines(results, errors, unsafe=unsafe)
    return "\n".join(lines)


def render_statistics_json(results: list[FileResult], unsafe: bool = False) -> str:
    """ruff's keys: `fixable` when any finding of the rule is, and `fixable_count`."""
    return json.dumps(
        [
            {
                "code": r.code,
                "name": r.name,
                "count": r.count,
                "fixable": r.fixable,
                "fixable_count": r.fixable_count,
            }
            for r in rule_counts(results, unsafe)
        ],
        indent=2,
    )
