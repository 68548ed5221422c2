"""The fix loop: lint, apply fixable edits, re-parse, re-lint, until nothing fixable is left."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .engine import analyse, locate
from .fixes import apply_fixes, diff_span
from .model import Finding
from .settings import Settings

MAX_PASSES = 16


@dataclass
class FixOutcome:
    """The result of fixing one file's text. `source` is the input when anything went wrong."""

    source: str
    applied: list[str] = field(default_factory=list)  # rule ids, in the order applied
    remaining: list[Finding] = field(default_factory=list)
    error: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def fix_text(
    text: str,
    path: str = "<stdin>",
    *,
    unsafe: bool = False,
    enabled: frozenset[str] | None = None,
    settings: Settings | None = None,
    max_passes: int = MAX_PASSES,
    known_function_bases: frozenset[str] = frozenset(),
) -> FixOutcome:
    """Apply every fix allowed by the tier until a fixpoint; never returns unparsable code."""
    current = text
    applied: list[str] = []
    # A cheap sliced pass first: most files have nothing fixable and never need a full parse.
    index = known_function_bases
    first = analyse(text, path, enabled=enabled, settings=settings, known_function_bases=index)
    if first.error is not None:
        return FixOutcome(text, error=first.error.describe())
    if first.module is None or first.text is None or not first.violations:
        return FixOutcome(text)
    located = locate(first.module, first.text, first.violations, path, first.layout)
    if not any(v.fix is not None and (v.fix.safety == "safe" or unsafe) for _, v in located):
        return FixOutcome(text, remaining=[finding for finding, _ in located])
    for attempt in range(max_passes):
        result = analyse(
            current, path, enabled=enabled, settings=settings, full=True, known_function_bases=index
        )
        if result.error is not None:
            if attempt == 0:
                return FixOutcome(text, error=result.error.describe())
            return FixOutcome(
                text,
                error=f"{path}: a fix produced code that does not analyse "
                f"({result.error.message}); this is a bug in autogradlint and the "
                "file was left untouched",
            )
        if result.module is None or not result.violations:
            return FixOutcome(current, applied)
        located = locate(result.module, current, result.violations, path, result.layout)
        wanted = [
            (finding, violation)
            for finding, violation in located
            if violation.fix is not None and (violation.fix.safety == "safe" or unsafe)
        ]
        if not wanted:
            return FixOutcome(current, applied, [finding for finding, _ in located])
        rule_of = {id(v.fix): f.rule_id for f, v in wanted}
        new, used = apply_fixes(result.module, [v.fix for _, v in wanted if v.fix is not None])
        try:
            cst.parse_module(new)
        except Exception as exc:  # noqa: BLE001 - any parse failure means we must not write
            return FixOutcome(
                text,
                error=f"{path}: a fix produced unparsable code ({exc}); this "
                "is a bug in autogradlint and the file was left untouched",
            )
        if new == current:
            return FixOutcome(current, applied, [finding for finding, _ in located])
        applied.extend(rule_of[id(fix)] for fix in used)
        current = new
    return FixOutcome(
        text,
        error=f"{path}: fixes did not converge after {max_passes} passes; "
        "this is a bug in autogradlint and the file was left untouched",
    )


def single_fix_edits(
    text: str,
    path: str,
    *,
    enabled: frozenset[str] | None = None,
    settings: Settings | None = None,
) -> dict[tuple[str, str, int, int], dict[str, object]]:
    """For each fixable finding, its fix alone as one replacement (SARIF regions, 1-based)."""
    result = analyse(text, path, enabled=enabled, settings=settings, full=True)
    if result.module is None or result.error is not None:
        return {}
    out: dict[tuple[str, str, int, int], dict[str, object]] = {}
    for finding, violation in locate(result.module, text, result.violations, path, result.layout):
        if violation.fix is None:
            continue
        new, applied = apply_fixes(result.module, [violation.fix])
        if not applied or new == text:
            continue
        start, end_old, end_new = diff_span(text, new)
        out[(path, finding.rule_id, finding.line, finding.col)] = {
            "title": f"{violation.fix.title} ({violation.fix.safety})",
            "region": {**_line_col(text, start, "start"), **_line_col(text, end_old, "end")},
            "text": new[start:end_new],
        }
    return out


def _line_col(text: str, offset: int, which: str) -> dict[str, int]:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return {f"{which}Line": line, f"{which}Column": col}
