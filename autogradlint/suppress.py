"""Suppression comments: `# noqa: AGL201`, `# autogradlint: ignore[...]`, file-level ignores."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .speed.statements import comments, joined_lines

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[\w\-]+(?:[\s,]+[\w\-]+)*))?", re.IGNORECASE)
_IGNORE = re.compile(r"#\s*autogradlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?")
_FILE_IGNORE = re.compile(r"#\s*autogradlint:\s*file-ignore(?:\[(?P<codes>[^\]]*)\])?")
ALL = "*"


@dataclass
class Suppressions:
    """Which codes are silenced on which line (1-based), and for the whole file."""

    by_line: dict[int, set[str]] = field(default_factory=dict)
    file_wide: set[str] = field(default_factory=set)
    # Lines joined to later ones by `\` or a multi-line string: their noqa goes on the last.
    joined: dict[int, int] = field(default_factory=dict)

    def silences(self, rule_id: str, name: str, line: int) -> bool:
        if _matches(self.file_wide, rule_id, name):
            return True
        if _matches(self.by_line.get(line, set()), rule_id, name):
            return True
        last = self.joined.get(line)
        return last is not None and _matches(self.by_line.get(last, set()), rule_id, name)


def _matches(selectors: set[str], rule_id: str, name: str) -> bool:
    if ALL in selectors:
        return True
    return any(rule_id.startswith(sel.upper()) or sel == name for sel in selectors)


def _codes(text: str | None) -> set[str]:
    if not text:
        return {ALL}
    return {code for code in re.split(r"[\s,]+", text.strip()) if code}


# Every suppression comment holds one of these; a file without them needs no comment scan.
_ANY_MARKER = re.compile(r"noqa|autogradlint:", re.IGNORECASE)


def noqa_line(source: str, line: int) -> int:
    """The line a `# noqa` for a finding on `line` must go on (ruff's rule: the end of a
    backslash continuation or of a multi-line string)."""
    return joined_lines(source).get(line, line)


def parse_suppressions(source: str) -> Suppressions:
    """Read suppression comments; `# noqa` inside a string never counts."""
    result = Suppressions()
    if _ANY_MARKER.search(source) is None:
        return result
    result.joined = joined_lines(source)
    for line, _, comment, own_line in comments(source):
        file_match = _FILE_IGNORE.search(comment)
        if file_match:
            result.file_wide |= _codes(file_match.group("codes"))
            continue
        ignore = _IGNORE.search(comment)
        if ignore:
            codes = _codes(ignore.group("codes"))
            result.by_line.setdefault(line, set()).update(codes)
            if own_line:  # alone on its line: it covers the next line
                result.by_line.setdefault(line + 1, set()).update(codes)
            continue
        noqa = _NOQA.search(comment)
        if noqa:
            result.by_line.setdefault(line, set()).update(_codes(noqa.group("codes")))
    return result
