"""Shared helpers: expected-finding markers (`# AGL201`) in example and fixture code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"#\s*(?P<codes>AGL\d{3}(?:[ ,]+AGL\d{3})*)\b")


def expected_findings(code: str) -> list[tuple[str, int]]:
    """(rule, line) for every line that carries a `# AGL123` marker comment."""
    out: list[tuple[str, int]] = []
    for number, line in enumerate(code.splitlines(), start=1):
        if "noqa" in line or "autogradlint:" in line:
            continue
        match = MARKER.search(line)
        if match:
            for code_id in re.split(r"[ ,]+", match.group("codes")):
                out.append((code_id, number))
    return sorted(out)


@pytest.fixture
def root() -> Path:
    return ROOT
