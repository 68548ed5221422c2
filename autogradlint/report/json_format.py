"""JSON output with ruff's keys (code, message, filename, location, end_location, fix, url)."""

from __future__ import annotations

import json
from pathlib import Path

from ..meta import all_rules
from ..model import FileResult


def render_json(results: list[FileResult]) -> str:
    rules = all_rules()
    items = []
    for result in results:
        for f in result.findings:
            items.append(
                {
                    "code": f.rule_id,
                    "name": f.name,
                    "message": f.message,
                    "severity": f.severity,
                    "family": f.family,
                    "filename": str(Path(f.path).resolve()) if f.path != "<stdin>" else f.path,
                    "location": {"row": f.line, "column": f.col + 1},
                    "end_location": {"row": f.end_line, "column": f.end_col + 1},
                    "noqa_row": f.line,
                    "fix": None,
                    "fix_safety": f.fix_safety,
                    "url": rules[f.rule_id].url,
                }
            )
    return json.dumps(items, indent=2)
