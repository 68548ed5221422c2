"""Findings to LSP types, in the client's position encoding (pure; no server state)."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from ..edits import diff_span
from ..meta import all_rules
from ..model import Finding

SOURCE = "autogradlint"


def _position(lines: Sequence[str], line: int, col: int, codec) -> types.Position:  # type: ignore[no-untyped-def]
    # libcst columns are code points (UTF-32 units); the codec converts to the client's units.
    return codec.position_to_client_units(lines, types.Position(line=line - 1, character=col))


def to_diagnostic(finding: Finding, lines: Sequence[str], codec) -> types.Diagnostic:  # type: ignore[no-untyped-def]
    meta = all_rules()[finding.rule_id]
    return types.Diagnostic(
        range=types.Range(
            start=_position(lines, finding.line, finding.col, codec),
            end=_position(lines, finding.end_line, finding.end_col, codec),
        ),
        # The headline, then the detail: editors show the first line inline, all of it on hover.
        message=f"{finding.message}\n{finding.help}" if finding.help else finding.message,
        severity=(
            types.DiagnosticSeverity.Error
            if finding.severity == "error"
            else types.DiagnosticSeverity.Warning
        ),
        code=finding.rule_id,
        code_description=types.CodeDescription(href=meta.url),
        source=SOURCE,
        data={"rule": finding.rule_id, "name": finding.name, "fixable": finding.fixable},
    )


def minimal_edit(old: str, new: str, codec) -> types.TextEdit:  # type: ignore[no-untyped-def]
    """One TextEdit replacing only the span that differs (common prefix and suffix trimmed)."""
    start, end_old, end_new = diff_span(old, new)
    lines = old.splitlines(keepends=True) or [""]

    def position(offset: int) -> types.Position:
        line = old.count("\n", 0, offset)
        line_start = old.rfind("\n", 0, offset) + 1
        plain = [text.rstrip("\r\n") for text in lines]
        return codec.position_to_client_units(
            plain, types.Position(line=line, character=offset - line_start)
        )

    return types.TextEdit(
        range=types.Range(start=position(start), end=position(end_old)),
        new_text=new[start:end_new],
    )


def hover_markdown(rule_id: str) -> str:
    meta = all_rules()[rule_id]
    return f"**{meta.id} {meta.name}** ({meta.severity}, fix: {meta.fix})\n\n{meta.summary}\n\n{meta.docs}"
