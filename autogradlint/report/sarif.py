"""SARIF 2.1.0 output for GitHub code scanning: rule metadata, results, fixes, notifications.

File locations are URIs relative to %SRCROOT%, the directory `check` runs in (the text report
names files relative to it too; a file outside it gets an absolute `file://` URI), which is the
repository's root in a CI job, as code scanning wants."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..meta import all_rules
from ..model import FileError, FileResult, LineEdit
from ..version import __version__
from .paths import relative_in
from .text import fix_of

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str, root: Path) -> str:
    """A URI reference (percent-encoded bytes: spaces, `%`, `#` and undecodable names stay
    exact), relative to %SRCROOT% when the file is below it."""
    absolute = Path(path).resolve()
    try:
        relative = absolute.relative_to(root).as_posix()
    except ValueError:
        return "file://" + quote(os.fsencode(absolute.as_posix()))
    return quote(os.fsencode(relative))


def _replacement(edit: LineEdit) -> dict[str, Any]:
    """Whole lines [start, end) replaced: a region from column 1 of the first to column 1 of
    the line after the last (empty for an insertion)."""
    return {
        "deletedRegion": {
            "startLine": edit.start + 1,
            "startColumn": 1,
            "endLine": edit.end + 1,
            "endColumn": 1,
        },
        "insertedContent": {"text": "".join(edit.lines)},
    }


def render_sarif(
    results: list[FileResult],
    errors: list[FileError],
    root: Path,
) -> str:
    """The report, with `root` (the working directory) as %SRCROOT%."""
    rules = list(all_rules().values())
    index = {meta.id: i for i, meta in enumerate(rules)}
    root = root.resolve()
    cwd = str(root)
    sarif_rules = [
        {
            "id": meta.id,
            "name": meta.name,
            "shortDescription": {"text": meta.summary},
            "fullDescription": {"text": meta.summary},
            "help": {"text": meta.docs, "markdown": meta.docs},
            "helpUri": meta.url,
            "defaultConfiguration": {"level": meta.severity},
            "properties": {
                "family": meta.family,
                "fix": meta.fix,
                "tags": [f"family-{meta.family}"],
            },
        }
        for meta in rules
    ]
    sarif_results = []
    for result in results:
        for f in result.findings:
            location = {
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri(f.path, root), "uriBaseId": "%SRCROOT%"},
                    "region": {
                        "startLine": f.line,
                        "startColumn": f.col + 1,
                        "endLine": f.end_line,
                        "endColumn": f.end_col + 1,
                    },
                }
            }
            item: dict[str, Any] = {
                "ruleId": f.rule_id,
                "ruleIndex": index[f.rule_id],
                "level": f.severity,
                "message": {
                    "text": relative_in(f"{f.message}. {f.help}" if f.help else f.message, cwd)
                },
                "locations": [location],
            }
            fix = fix_of(result, f)
            if fix is not None:
                item["fixes"] = [
                    {
                        "description": {"text": f"{fix.title} ({fix.safety})"},
                        "artifactChanges": [
                            {
                                "artifactLocation": location["physicalLocation"][
                                    "artifactLocation"
                                ],
                                "replacements": [_replacement(edit) for edit in fix.edits],
                            }
                        ],
                    }
                ]
            sarif_results.append(item)
    notifications = [
        {
            "level": "error",
            "message": {"text": error.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {
                            "uri": _uri(error.path, root),
                            "uriBaseId": "%SRCROOT%",
                        },
                        **({"region": {"startLine": error.line}} if error.line else {}),
                    }
                }
            ],
        }
        for error in errors
    ]
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "autogradlint",
                        "version": __version__,
                        "rules": sarif_rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": sarif_results,
                "invocations": [
                    {
                        "executionSuccessful": not errors,
                        "workingDirectory": {"uri": Path(os.getcwd()).resolve().as_uri() + "/"},
                        "toolExecutionNotifications": notifications,
                    }
                ],
            }
        ],
    }
    return json.dumps(document, indent=2)
