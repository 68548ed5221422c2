"""The fix loop: lint, apply the plan of fixable edits, re-lint, until nothing fixable is left.

Each pass asks the door (door.py) for the tier's plan: every fix at once, as edits of the text
(fixes.py). The result must compile with CPython (verify.py) and parse and lint again;
otherwise the file is left as it was and the error says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..model import Finding
from ..text.splice import apply_line_edits
from .door import lint
from .request import LintRequest
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


def fix_text(request: LintRequest, max_passes: int = MAX_PASSES) -> FixOutcome:
    """Apply every fix of the request's tier (`plan`, safe when unset) until a fixpoint; never
    returns code that does not compile, and returns the input untouched (with `error`)
    whenever anything goes wrong."""
    text, path = request.source, request.path
    assert isinstance(text, str)  # fixes rewrite text: the caller decodes it
    request = replace(request, plan=request.plan or "safe", fixes=False, classes=False)
    current = text
    applied: list[str] = []
    for attempt in range(max_passes):
        result = lint(replace(request, source=current))
        if result.error is not None:
            if attempt == 0:
                return FixOutcome(text, error=result.error.describe())
            return FixOutcome(text, error=_bug(path, f"does not analyse ({result.error.message})"))
        remaining, plan = result.findings, result.plan
        if plan is None:
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
        if plan.error is not None:
            return FixOutcome(text, error=_bug(path, plan.error))
        if not plan.edits:
            return FixOutcome(current, applied, remaining)
        applied.extend(plan.rules)
        current = apply_line_edits(current, list(plan.edits))
    return FixOutcome(
        text,
        error=f"{path}: fixes did not converge after {max_passes} passes; "
        "this is a bug in autogradlint and the file was left untouched",
    )


def _bug(path: str, what: str) -> str:
    return f"{path}: a fix produced code that {what}; this is a bug in autogradlint and the file was left untouched"
