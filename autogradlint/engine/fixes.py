"""What a pass's fixes are as edits of the file: each fixable finding's fix on its own (JSON,
SARIF, the editor's quick fixes) and the plan that applies every fix of a tier at once (one
pass of the fix loop).

Fixes edit the same parsed slice `check` reads; the changed lines are spliced back into the
file (text/splice.py), so fixing costs what checking costs. Where a slice's edit cannot be
placed, the whole file is parsed and the fix built there. A fix whose result does not compile
(verify.py) is never offered on its own."""

from __future__ import annotations

from dataclasses import replace

from ..edits import Fix, apply_fixes
from ..model import Finding, FixPlan, FixSuggestion, LineEdit, Violation
from ..text.splice import apply_line_edits, line_edits
from ..text.torch_name import TorchNames, import_edit
from .hygiene import CommentFix, key
from .pipeline import Analysis, Pass, examine
from .request import LintRequest
from .verify import compile_error

NOT_PLACED = "could not be placed in the file"


def _wanted(
    located: list[tuple[Finding, Violation]], unsafe: bool
) -> list[tuple[Finding, Violation]]:
    return [
        (finding, violation)
        for finding, violation in located
        if violation.fix is not None and (violation.fix.safety == "safe" or unsafe)
    ]


def _edits_for(
    text: str, result: Analysis, fixes: list[tuple[Fix, int]]
) -> tuple[list[LineEdit], list[Fix]] | None:
    """The line edits that apply `fixes` (and add the imports they need) to `text`; None when
    the slice cannot be spliced back and the whole file must be parsed instead."""
    assert result.module is not None
    names: TorchNames | None = None

    def namer(line: int) -> tuple[str, bool]:
        nonlocal names
        if names is None:
            names = TorchNames(text)
        return names.at(line)

    new_code, used, imports = apply_fixes(result.module, fixes, namer)
    edits = line_edits(text, result.module.code, new_code, result.layout.line_map)
    if edits is None:
        return None
    added = import_edit(text, imports, names.tree if names is not None else None)
    return ([*edits, added] if added is not None else edits), used


def _comment_edits(
    fixes: dict[tuple[str, int, int], CommentFix], taken: list[LineEdit]
) -> tuple[list[LineEdit], list[str]]:
    """The comment fixes that touch no line another edit of this pass touches (one per line;
    the rest wait for the next pass), and their rule ids."""
    busy = {line for e in taken for line in range(e.start, max(e.end, e.start + 1))}
    edits, rules = [], []
    for (rule_id, _, _), fix in sorted(fixes.items(), key=lambda item: item[0][1:]):
        lines = set(range(fix.edit.start, max(fix.edit.end, fix.edit.start + 1)))
        if lines & busy:
            continue
        busy |= lines
        edits.append(fix.edit)
        rules.append(rule_id)
    return edits, rules


def fix_plan(text: str, request: LintRequest, step: Pass, unsafe: bool) -> FixPlan | None:
    """Every fix the tier allows, as one set of edits of `text`; None when nothing is fixable."""
    wanted = _wanted(step.located, unsafe)
    if not wanted and not step.comment_fixes:
        return None
    made: tuple[list[LineEdit], list[Fix]] | None = ([], [])
    if wanted:
        made = _edits_for(text, step.result, [(v.fix, f.line) for f, v in wanted])  # type: ignore[misc]
    if made is None:  # fall back to the whole file, where every line maps to itself
        step = examine(request, "whole")
        wanted = _wanted(step.located, unsafe)
        if step.result.error is not None or not wanted:
            return FixPlan((), (), NOT_PLACED)
        made = _edits_for(text, step.result, [(v.fix, f.line) for f, v in wanted])  # type: ignore[misc]
        if made is None:
            return FixPlan((), (), NOT_PLACED)
    edits, used = made
    comment_edits, comment_rules = _comment_edits(step.comment_fixes, edits)
    rule_of = {id(v.fix): f.rule_id for f, v in wanted}
    rules = [rule_of[id(fix)] for fix in used] + comment_rules
    return FixPlan((*edits, *comment_edits), tuple(rules))


def single_fixes(text: str, request: LintRequest, step: Pass) -> list[FixSuggestion]:
    """Each fixable finding's fix applied alone to `text` (never re-linted: a preview)."""
    located = step.located
    has_fixes = any(v.fix for _, v in located) or step.comment_fixes
    if not has_fixes or compile_error(text, request.path) is not None:
        return []
    out: list[tuple[Finding, FixSuggestion]] = []
    by_key = {key(f): f for f in step.reported}
    for found, comment_fix in step.comment_fixes.items():
        edits: tuple[LineEdit, ...] = (comment_fix.edit,)
        new = apply_line_edits(text, list(edits))
        if compile_error(new, request.path) is None:
            finding = by_key[found]
            out.append((finding, _suggestion(finding, comment_fix.title, "safe", "", edits)))
    whole: Pass | None = None
    for finding, violation in located:
        fix = violation.fix
        if fix is None:
            continue
        made = _edits_for(text, step.result, [(fix, finding.line)])
        if made is None:
            whole = whole if whole is not None else examine(replace(request, source=text), "whole")
            match = [v.fix for f, v in whole.located if f == finding and v.fix is not None]
            made = _edits_for(text, whole.result, [(match[0], finding.line)]) if match else None
        if not made or not made[0]:
            continue
        new = apply_line_edits(text, made[0])
        if compile_error(new, request.path) is not None:
            continue  # never offer a fix that breaks the file
        fixed = tuple(made[0])
        out.append((finding, _suggestion(finding, fix.title, fix.safety, fix.note, fixed)))
    return [suggestion for _, suggestion in sorted(out, key=lambda pair: pair[0].sort_key)]


def _suggestion(
    finding: Finding, title: str, safety: str, note: str, edits: tuple[LineEdit, ...]
) -> FixSuggestion:
    return FixSuggestion(finding.rule_id, finding.line, finding.col, title, safety, note, edits)
