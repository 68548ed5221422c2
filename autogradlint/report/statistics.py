"""`--statistics`: the count of findings per rule, as ruff prints it (a table, or JSON)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from ..model import FileResult


@dataclass(frozen=True)
class RuleCount:
    code: str
    name: str
    count: int
    fixable: bool  # every finding of the rule here has a safe fix


def rule_counts(results: list[FileResult]) -> list[RuleCount]:
    """Most frequent first, then by code."""
    counts: Counter[tuple[str, str]] = Counter()
    fixable: dict[str, bool] = {}
    for result in results:
        for finding in result.findings:
            counts[(finding.rule_id, finding.name)] += 1
            safe = finding.fixable == "safe"
            fixable[finding.rule_id] = fixable.get(finding.rule_id, True) and safe
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0][0]))
    return [RuleCount(code, name, n, fixable[code]) for (code, name), n in ordered]


def render_statistics(results: list[FileResult]) -> str:
    """`count  code  [*] name` lines, the counts right-aligned; empty when nothing was found."""
    rows = rule_counts(results)
    width = max((len(str(row.count)) for row in rows), default=1)
    return "\n".join(
        f"{row.count:>{width}}\t{row.code}\t{'[*]' if row.fixable else '[ ]'} {row.name}"
        for row in rows
    )


def render_statistics_json(results: list[FileResult]) -> str:
    return json.dumps(
        [
            {"code": r.code, "name": r.name, "count": r.count, "fixable": r.fixable}
            for r in rule_counts(results)
        ],
        indent=2,
    )
