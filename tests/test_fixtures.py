"""Fixture files of realistic code with inline `# AGLxxx` expectations (flake8-bugbear style)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import expected_findings

from autogradlint.engine.pipeline import lint_source

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.py"))


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_findings_match_markers(path: Path) -> None:
    code = path.read_text(encoding="utf-8")
    result = lint_source(code.encode(), str(path))
    assert result.error is None
    assert sorted((f.rule_id, f.line) for f in result.findings) == expected_findings(code)
