"""Human output: `path:line:col: AGL201 message`, a code frame, and a summary line (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..model import FileError, FileResult, Finding, printable

_STYLE = {"error": "bold red", "warning": "bold yellow"}


def _frame(lines: list[str], f: Finding) -> list[str]:
    out: list[str] = []
    first = max(1, f.line - 1)
    last = min(len(lines), f.line + 1)
    width = len(str(last))
    out.append(f"[blue]{' ' * width} |[/blue]")
    for number in range(first, last + 1):
        text = lines[number - 1].rstrip("\r\n")
        out.append(f"[blue]{number:>{width}} |[/blue] {escape(text)}")
        if number == f.line:
            end = f.end_col if f.end_line == f.line else len(text)
            carets = "^" * max(1, end - f.col)
            out.append(
                f"[blue]{' ' * width} |[/blue] {' ' * f.col}[{_STYLE[f.severity]}]{carets} "
                f"{f.rule_id}[/]"
            )
    out.append(f"[blue]{' ' * width} |[/blue]")
    return out


def render_text(
    console: Console,
    results: list[FileResult],
    errors: list[FileError],
    sources: dict[str, list[str]],
    *,
    quiet: bool = False,
) -> None:
    """The findings with code frames, then (unless `quiet`) the summary."""
    findings = [f for r in results for f in r.findings]
    for f in findings:
        style = _STYLE[f.severity]
        marker = " [cyan]\\[*][/cyan]" if f.fixable == "safe" else ""
        console.print(
            f"[bold]{escape(printable(f.path))}[/bold]:{f.line}:{f.col + 1}: [{style}]{f.rule_id}[/]{marker} "
            f"{escape(f.message)}",
            soft_wrap=True,
            highlight=False,
        )
        lines = sources.get(f.path)
        if lines:
            for line in _frame(lines, f):
                console.print(line, soft_wrap=True, highlight=False)
        if f.help:
            pad = " " * (len(str(min(len(lines), f.line + 1))) if lines else 1)
            console.print(
                f"{pad} [blue]=[/blue] [bold]help[/bold]: {escape(f.help)}", highlight=False
            )
        console.print()
    if quiet:
        return
    errors_found = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors_found
    files = len({f.path for f in findings})
    checked = len(results)
    if findings:
        console.print(
            f"Found {len(findings)} problem{'s' * (len(findings) != 1)} "
            f"({errors_found} error{'s' * (errors_found != 1)}, "
            f"{warnings} warning{'s' * (warnings != 1)}) in {files} "
            f"file{'s' * (files != 1)}; {checked} file{'s' * (checked != 1)} checked.",
            highlight=False,
        )
        safe = sum(1 for f in findings if f.fixable == "safe")
        unsafe = sum(1 for f in findings if f.fixable == "unsafe")
        if safe or unsafe:
            more = f" ({unsafe} more with `--unsafe-fixes`)" if unsafe else ""
            console.print(
                f"\\[*] {safe} fixable with `autogradlint fix --apply`{more}.", highlight=False
            )
    elif not errors:
        console.print(
            f"All checks passed! ({checked} file{'s' * (checked != 1)} checked)", highlight=False
        )
    else:
        console.print(
            f"No problems found in {checked} file{'s' * (checked != 1)} checked, but "
            f"{len(errors)} could not be checked (see the errors below).",
            highlight=False,
        )
