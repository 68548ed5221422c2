"""Suppression hygiene (AGL901-AGL903): apply the file's suppression comments to its findings,
and report the comments that silence nothing, name no rule, or do not say what they seem to.

Pure: text and findings in, findings and comment edits out. Every front end calls `audit` on the
located findings of the whole file, so check, fix, the language server and SARIF agree on which
findings are silenced and which comments are stale."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..meta import RuleMeta, all_rules
from ..model import Finding, LineEdit
from ..text.suppress import (
    ALL,
    Directive,
    Selector,
    Suppressions,
    ascii_lowered,
    parse_suppressions,
    read_directive,
    selects,
)

UNUSED, UNKNOWN, MALFORMED = "AGL901", "AGL902", "AGL903"
HYGIENE = frozenset({UNUSED, UNKNOWN, MALFORMED})


@dataclass(frozen=True)
class CommentFix:
    """A fix that only edits a comment: it cannot change what the code does."""

    title: str
    edit: LineEdit


@dataclass
class Audited:
    findings: list[Finding] = field(default_factory=list)  # kept findings, hygiene ones included
    fixes: dict[tuple[str, int, int], CommentFix] = field(default_factory=dict)  # by finding key


def key(finding: Finding) -> tuple[str, int, int]:
    return (finding.rule_id, finding.line, finding.col)


def audit(text: str, path: str, findings: list[Finding], enabled: frozenset[str]) -> Audited:
    """Drop the findings a comment silences; add AGL901-903 for the comments themselves."""
    if not findings and _nothing_to_report(text):
        return Audited()
    suppressions = parse_suppressions(text)
    if not suppressions.directives:
        return Audited(sorted(findings, key=lambda f: f.sort_key))
    used: set[tuple[int, str]] = set()
    kept = []
    for finding in findings:
        hit = suppressions.silencer(finding.rule_id, finding.name, finding.line)
        if hit is None:
            kept.append(finding)
        else:
            used.add((hit[0], hit[1].text))
    out = Audited()
    for finding, fix in _hygiene(text, path, suppressions, used, enabled):
        hit = suppressions.silencer(finding.rule_id, finding.name, finding.line)
        if hit is not None and hit[1].text != ALL:
            continue  # silenced by naming its code (AGL901 itself); a blanket never hides these
        kept.append(finding)
        if fix is not None:
            out.fixes[key(finding)] = fix
    out.findings = sorted(kept, key=lambda f: f.sort_key)
    return out


def _hygiene(
    text: str,
    path: str,
    suppressions: Suppressions,
    used: set[tuple[int, str]],
    enabled: frozenset[str],
) -> list[tuple[Finding, CommentFix | None]]:
    rules = all_rules()
    names = _rule_names()
    lines = _lines(text)
    out: list[tuple[Finding, CommentFix | None]] = []

    def report(
        rule_id: str, at: Selector | Directive, line: int, message: str, fix: CommentFix | None
    ) -> None:
        if rule_id not in enabled:
            return
        meta = rules[rule_id]
        finding = Finding(
            path=path,
            rule_id=rule_id,
            name=meta.name,
            family=meta.family,
            severity=meta.severity,
            message=meta.format(detail=message),
            line=line,
            col=at.start,
            end_line=line,
            end_col=at.end,
            fix_safety=meta.fix,
            fixable="safe" if fix is not None else None,
        )
        out.append((finding, fix))

    for index, directive in enumerate(suppressions.directives):
        line_text = lines[directive.line - 1] if directive.line <= len(lines) else ""
        if directive.problem is not None:
            fix = None
            if directive.repaired is not None:
                rest = line_text[directive.end :]
                ending = rest[len(rest.rstrip("\r\n")) :]
                rest = rest.rstrip("\r\n") if rest.strip() else ""  # no trailing blanks
                edited = line_text[: directive.start] + directive.repaired + rest + ending
                fix = CommentFix(f"write `{directive.repaired}`", _replace(directive.line, edited))
            shown = line_text[directive.start : directive.end]
            report(MALFORMED, directive, directive.line, f"`{shown}`: {directive.problem}", fix)
            continue
        if not directive.selectors:
            if directive.ours and (index, ALL) not in used and _judgeable(None, enabled, rules):
                fix = _removal(directive, (), line_text)
                shown = line_text[directive.start : directive.end]
                message = f"`{shown}` silences nothing here"
                report(UNUSED, directive, directive.line, message, fix)
            continue
        for selector in directive.selectors:
            if not directive.ours and not _names_ours(selector, names):
                continue  # another tool's code in a shared noqa comment
            known = any(selects(selector.text, rid, m.name) for rid, m in rules.items())
            remaining = tuple(s for s in directive.selectors if s is not selector)
            fix = _removal(directive, remaining, line_text)
            if not known:
                message = f"`{selector.text}` in a suppression comment is not an autogradlint rule"
                report(UNKNOWN, selector, directive.line, message, fix)
            elif (index, selector.text) not in used and _judgeable(selector.text, enabled, rules):
                where = "in this file" if directive.kind == "file-ignore" else "here"
                message = f"`{selector.text}` is suppressed but nothing {where} reports it"
                report(UNUSED, selector, directive.line, message, fix)
    return out


@functools.cache
def _rule_names() -> frozenset[str]:
    """Every rule's kebab-case name (a `# noqa: <name>` selector is autogradlint's)."""
    return frozenset(meta.name for meta in all_rules().values())


def _names_ours(selector: Selector, names: frozenset[str]) -> bool:
    """Whether a selector names autogradlint's rules (`AGL201`, `AGL2`, a rule's name)."""
    return selector.text.upper().startswith("AGL") or selector.text in names


def _nothing_to_report(text: str) -> bool:
    """Whether a file with no findings has no comment to report either: nothing says
    `autogradlint:`, and every `noqa`, read from the `#` before it as if it were a comment, is
    well formed and names only other tools' codes. Torch has thousands of `# noqa: F401`: the
    string-aware scan of every comment is then skipped. Reading a `noqa` inside a string as a
    comment can only send a file down the full path, never hide a report."""
    lowered = ascii_lowered(text)
    if b"autogradlint:" in lowered:
        return False
    names = _rule_names()
    carriage = "\r" in text  # else the search for one would scan back to the file's start
    at = lowered.find(b"noqa")
    while at != -1:
        newline = text.rfind("\n", 0, at)
        line_start = max(newline, text.rfind("\r", newline + 1, at) if carriage else -1) + 1
        hash_at = text.rfind("#", line_start, at)
        if hash_at != -1:
            line_end = len(text) if (end := lowered.find(b"\n", at)) == -1 else end
            directive = read_directive(text[hash_at:line_end], 1, 0, False)
            if directive is not None and (
                directive.problem is not None
                or directive.ours
                or any(_names_ours(s, names) for s in directive.selectors)
            ):
                return False
        at = lowered.find(b"noqa", at + 4)
    return True


def _judgeable(selector: str | None, enabled: frozenset[str], rules: dict[str, RuleMeta]) -> bool:
    """Only a selector whose rules all ran can be called unused: a rule switched off in the
    configuration might report here in another run."""
    matched = [
        rid for rid, m in rules.items() if selector is None or selects(selector, rid, m.name)
    ]
    judged = [rid for rid in matched if rid not in HYGIENE]
    return bool(judged) and all(rid in enabled for rid in judged)


def _removal(
    directive: Directive, remaining: tuple[Selector, ...], line_text: str
) -> CommentFix | None:
    """The line with `directive` rewritten to keep only `remaining` (or removed outright);
    None when the rewrite would change more than the comment (`comment-only`)."""
    fix = _rewritten(directive, remaining, line_text)
    return fix if _only_codes_removed(directive, remaining, line_text, fix) else None


def _only_codes_removed(
    directive: Directive, remaining: tuple[Selector, ...], line_text: str, fix: CommentFix
) -> bool:
    """The precondition of a comment fix (rules/AGL901.yaml, `comment-only`): the code before
    the comment is as it was, the codes that stay are read as codes again (a reason must not
    become codes: `# noqa: kept, on, purpose` is a blanket noqa for flake8), and the text that
    followed the codes is still on the line."""
    edited = fix.edit.lines[0] if fix.edit.lines else ""
    code = line_text[: directive.start].rstrip(" \t")
    if not edited.startswith(code):
        return False
    reason = line_text[directive.end :].strip().lstrip("#").strip()
    if reason and reason not in edited:
        return False
    if not remaining:
        return True
    found = read_directive(edited[len(code) :], directive.line, len(code), directive.own_line)
    kept = [s.text for s in found.selectors] if found is not None else None
    return kept == [s.text for s in remaining]


def _rewritten(directive: Directive, remaining: tuple[Selector, ...], line_text: str) -> CommentFix:
    before, after = line_text[: directive.start], line_text[directive.end :]
    if remaining:
        codes = ", ".join(s.text for s in remaining)
        if directive.kind == "noqa":
            new = f"# noqa: {codes}"
        else:
            new = f"# autogradlint: {directive.kind}[{codes}]"
        title = f"keep only `{codes}`"
        return CommentFix(title, _replace(directive.line, before + new + after))
    ending = line_text[len(line_text.rstrip("\r\n")) :]
    rest = after.rstrip("\r\n")
    if rest.strip() and not rest.strip().startswith("#"):
        rest = "# " + rest.strip()  # the reason written after the codes: it stays, as a comment
    if rest.strip().startswith("#"):  # another comment follows on the line: keep it
        edited = (
            before.rstrip(" \t") + "  " + rest.strip() if before.strip() else before + rest.lstrip()
        )
    else:
        edited = (before + rest).rstrip(" \t")
    if not edited.strip():
        return CommentFix("remove the comment", LineEdit(directive.line - 1, directive.line, ()))
    return CommentFix(
        "remove the suppression", _replace(directive.line, edited.rstrip("\r\n") + ending)
    )


def _replace(line: int, text: str) -> LineEdit:
    return LineEdit(line - 1, line, (text,))


def _lines(text: str) -> list[str]:
    from ..text.splice import split_lines

    return split_lines(text)
