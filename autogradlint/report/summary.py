"""The lines that end a report in every human format (text, full, concise, statistics): what
was found, what can be fixed, and what happened to every file named."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import FileError, FileResult, Finding


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def applicable(finding: Finding, unsafe: bool) -> bool:
    """Whether the fix command this run suggests would fix the finding (ruff's `[*]`): a safe
    fix, or an unsafe one when unsafe fixes were asked for."""
    return finding.fixable == "safe" or (unsafe and finding.fixable == "unsafe")


@dataclass(frozen=True)
class Files:
    """Every file a run was given, accounted for."""

    analysed: int  # parsed and checked
    skipped: int  # no autograd code in their bytes: read and decoded, never parsed
    failed: int  # could not be read, decoded or parsed, or named something that is no file

    @classmethod
    def of(cls, results: Sequence[FileResult], errors: Sequence[FileError]) -> Files:
        clean = [r for r in results if r.error is None]
        analysed = sum(1 for r in clean if r.parsed)
        return cls(analysed, len(clean) - analysed, len(errors))

    def describe(self) -> str:
        """`12 files checked: 3 analysed, 9 without autograd code`."""
        checked = plural(self.analysed + self.skipped, "file")
        if not self.skipped:
            return f"{checked} checked"
        return f"{checked} checked: {self.analysed} analysed, {self.skipped} without autograd code"


def summary_lines(
    results: Sequence[FileResult], errors: Sequence[FileError], *, unsafe: bool = False
) -> list[str]:
    findings = [f for r in results for f in r.findings]
    files = Files.of(results, errors)
    could_not = (
        f"; {plural(files.failed, 'file')} could not be checked (see the errors below)"
        if files.failed
        else ""
    )
    if not findings:
        if not files.failed:
            return [f"All checks passed! ({files.describe()})"]
        return [f"No problems found in {files.describe()}{could_not}."]
    errors_found = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors_found
    where = len({f.path for f in findings})
    lines = [
        f"Found {plural(len(findings), 'problem')} ({plural(errors_found, 'error')}, "
        f"{plural(warnings, 'warning')}) in {plural(where, 'file')}; {files.describe()}"
        f"{could_not}."
    ]
    fixable = sum(1 for f in findings if applicable(f, unsafe))
    hidden = sum(1 for f in findings if f.fixable == "unsafe" and not unsafe)
    command = "autogradlint fix --apply" + (" --unsafe-fixes" if unsafe else "")
    if fixable:
        more = f" ({hidden} more with `--unsafe-fixes`)" if hidden else ""
        lines.append(f"[*] {fixable} fixable with `{command}`{more}.")
    elif hidden:
        fixes = f"{hidden} unsafe fix{'es' * (hidden != 1)}"
        lines.append(f"No safe fixes ({fixes} with `--unsafe-fixes`).")
    return lines
