"""The fix loop: lint, apply fixable edits, re-lint, until nothing fixable is left.

Each pass edits the same parsed slice `check` reads and splices the changed lines back into the
file (splice.py), so fixing costs what checking costs: linear in the file, not in its parse. The
result must compile with CPython (verify.py) and parse and lint again; otherwise the file is
left as it was and the error says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from ..edits import Fix, apply_fixes
from ..meta import all_rules
from ..model import Finding, LineEdit, Violation
from ..settings import Settings
from ..text.splice import apply_line_edits, line_edits
from ..text.torch_name import TorchNames, import_edit
from ..view import EMPTY, FileView
from .hygiene import CommentFix, audit, key
from .pipeline import Analysis, analyse, locate
from .verify import compile_error, python_version

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


@dataclass(frozen=True)
class SingleFix:
    """One finding's fix on its own: what ruff calls a fix's edits (for SARIF, JSON, the LSP)."""

    finding: Finding
    title: str
    safety: str
    note: str
    source: str  # the whole file with just this fix applied
    edits: tuple[LineEdit, ...]


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


@dataclass
class Pass:
    """One analysis of the text: what it reports, and what can fix it."""

    result: Analysis
    located: list[tuple[Finding, Violation]]  # the findings no comment silences, with checks'
    reported: list[Finding]  # everything reported, suppression hygiene (AGL9xx) included
    comment_fixes: dict[tuple[str, int, int], CommentFix]  # hygiene fixes, by finding key


def _pass(
    text: str,
    path: str,
    *,
    full: bool,
    enabled: frozenset[str] | None,
    settings: Settings | None,
    project: FileView,
) -> Pass:
    enabled = frozenset(all_rules()) if enabled is None else enabled
    result = analyse(text, path, enabled=enabled, settings=settings, project=project, full=full)
    if result.error is not None:
        return Pass(result, [], [], {})
    located: list[tuple[Finding, Violation]] = []
    if result.module is not None and result.violations:
        assert result.text is not None
        located = locate(result.module, result.text, result.violations, path, result.layout)
    audited = audit(text, path, [f for f, _ in located], enabled)
    kept = {key(f) for f in audited.findings}
    located = [(f, v) for f, v in located if key(f) in kept]
    return Pass(result, located, audited.findings, audited.fixes)


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


def fix_text(
    text: str,
    path: str = "<stdin>",
    *,
    unsafe: bool = False,
    enabled: frozenset[str] | None = None,
    settings: Settings | None = None,
    max_passes: int = MAX_PASSES,
    project: FileView = EMPTY,
) -> FixOutcome:
    """Apply every fix the tier allows until a fixpoint; never returns code that does not
    compile, and returns the input untouched (with `error`) whenever anything goes wrong."""
    current = text
    applied: list[str] = []
    run = partial(_pass, enabled=enabled, settings=settings, project=project)
    for attempt in range(max_passes):
        step = run(current, path, full=False)
        result, located = step.result, step.located
        if result.error is not None:
            if attempt == 0:
                return FixOutcome(text, error=result.error.describe())
            return FixOutcome(text, error=_bug(path, f"does not analyse ({result.error.message})"))
        wanted = _wanted(located, unsafe)
        remaining = step.reported
        if not wanted and not step.comment_fixes:
            if attempt == 0:
                return FixOutcome(text, remaining=remaining)
            problem = compile_error(current, path)
            if problem is not None:
                return FixOutcome(text, error=_bug(path, f"does not compile ({problem})"))
            return FixOutcome(current, applied, remaining)
        if attempt == 0:
            problem = compile_error(text, path)
            if problem is not None:
                return FixOutcome(
                    text,
                    remaining=remaining,
                    error=f"{path}: not fixed: Python {python_version()} cannot compile the "
                    f"file as it is ({problem}), so a fix could not be verified",
                )
        made: tuple[list[LineEdit], list[Fix]] | None = ([], [])
        if wanted:
            made = _edits_for(current, result, [(v.fix, f.line) for f, v in wanted])  # type: ignore[misc]
        if made is None:  # fall back to the whole file, where every line maps to itself
            step = run(current, path, full=True)
            result, wanted = step.result, _wanted(step.located, unsafe)
            if result.error is not None or not wanted:
                return FixOutcome(text, error=_bug(path, "could not be placed in the file"))
            made = _edits_for(current, result, [(v.fix, f.line) for f, v in wanted])  # type: ignore[misc]
            if made is None:
                return FixOutcome(text, error=_bug(path, "could not be placed in the file"))
        edits, used = made
        comment_edits, comment_rules = _comment_edits(step.comment_fixes, edits)
        if not edits and not comment_edits:
            return FixOutcome(current, applied, remaining)
        rule_of = {id(v.fix): f.rule_id for f, v in wanted}
        applied.extend(rule_of[id(fix)] for fix in used)
        applied.extend(comment_rules)
        current = apply_line_edits(current, [*edits, *comment_edits])
    return FixOutcome(
        text,
        error=f"{path}: fixes did not converge after {max_passes} passes; "
        "this is a bug in autogradlint and the file was left untouched",
    )


def _bug(path: str, what: str) -> str:
    return f"{path}: a fix produced code that {what}; this is a bug in autogradlint and the file was left untouched"


def single_fixes(
    text: str,
    path: str,
    *,
    enabled: frozenset[str] | None = None,
    settings: Settings | None = None,
    project: FileView = EMPTY,
    analysed: Pass | None = None,
) -> list[SingleFix]:
    """Each fixable finding's fix applied alone to `text` (never re-linted: a preview).
    `analysed` is the sliced pass when the caller has just made it."""
    run = partial(_pass, enabled=enabled, settings=settings, project=project)
    step = analysed if analysed is not None else run(text, path, full=False)
    result, located = step.result, step.located
    has_fixes = any(v.fix for _, v in located) or step.comment_fixes
    if not has_fixes or compile_error(text, path) is not None:
        return []
    out: list[SingleFix] = []
    by_key = {key(f): f for f in step.reported}
    for found, comment_fix in step.comment_fixes.items():
        edits = (comment_fix.edit,)
        new = apply_line_edits(text, list(edits))
        if compile_error(new, path) is None:
            out.append(SingleFix(by_key[found], comment_fix.title, "safe", "", new, edits))
    for finding, violation in located:
        fix = violation.fix
        if fix is None:
            continue
        made = _edits_for(text, result, [(fix, finding.line)])
        if made is None:
            full = run(text, path, full=True)
            match = [v.fix for f, v in full.located if f == finding and v.fix is not None]
            made = _edits_for(text, full.result, [(match[0], finding.line)]) if match else None
        if not made or not made[0]:
            continue
        new = apply_line_edits(text, made[0])
        if compile_error(new, path) is not None:
            continue  # never offer a fix that breaks the file
        out.append(SingleFix(finding, fix.title, fix.safety, fix.note, new, tuple(made[0])))
    return sorted(out, key=lambda single: single.finding.sort_key)


def analysed_pass(
    text: str,
    path: str,
    *,
    enabled: frozenset[str] | None,
    settings: Settings | None,
    project: FileView,
) -> Pass:
    """The sliced analysis and its findings, as the fix functions use them."""
    return _pass(text, path, full=False, enabled=enabled, settings=settings, project=project)
