"""Baselines: record today's findings so that only new ones are reported (pure functions).

A finding is matched by rule, file (relative to the baseline's directory) and the flagged code
(its source line, whitespace-normalised), counted as a multiset: unrelated edits that shift line
numbers never resurface recorded findings, and a second copy of a recorded bug is still new.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

from .model import FileResult, Finding

VERSION = 1


class BaselineError(ValueError):
    """An unreadable or malformed baseline file."""


def _code(finding: Finding, lines: list[str]) -> str:
    text = lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""
    return " ".join(text.split())


def _key(finding: Finding, lines: list[str], root: Path) -> tuple[str, str, str]:
    try:
        rel = Path(finding.path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = Path(finding.path).resolve().as_posix()
    digest = hashlib.sha256(_code(finding, lines).encode()).hexdigest()[:16]
    return (rel, finding.rule_id, digest)


def build(results: list[FileResult], sources: dict[str, list[str]], root: Path) -> str:
    counts: Counter[tuple[str, str, str]] = Counter()
    for result in results:
        lines = sources.get(result.path, [])
        for finding in result.findings:
            counts[_key(finding, lines, root)] += 1
    entries = [
        {"file": file, "code": code, "fingerprint": digest, "count": count}
        for (file, code, digest), count in sorted(counts.items())
    ]
    return json.dumps({"version": VERSION, "findings": entries}, indent=2) + "\n"


def load(text: str, origin: str) -> Counter[tuple[str, str, str]]:
    try:
        data = json.loads(text)
        if data.get("version") != VERSION:
            raise BaselineError(f"{origin}: unsupported baseline version {data.get('version')!r}")
        return Counter(
            {(e["file"], e["code"], e["fingerprint"]): int(e["count"]) for e in data["findings"]}
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, BaselineError):
            raise
        raise BaselineError(f"{origin}: not a baseline file ({exc})") from None
    except RecursionError:  # JSON nested thousands deep
        raise BaselineError(f"{origin}: not a baseline file (nested too deeply)") from None


def apply(
    results: list[FileResult],
    recorded: Counter[tuple[str, str, str]],
    sources: dict[str, list[str]],
    root: Path,
) -> int:
    """Drop recorded findings from `results` in place; returns how many were dropped."""
    remaining = Counter(recorded)
    dropped = 0
    for result in results:
        lines = sources.get(result.path, [])
        kept = []
        for finding in result.findings:
            key = _key(finding, lines, root)
            if remaining[key] > 0:
                remaining[key] -= 1
                dropped += 1
            else:
                kept.append(finding)
        result.findings = kept
    return dropped
