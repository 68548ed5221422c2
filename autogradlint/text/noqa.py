"""Adding `# noqa: CODE` comments for findings (`check --add-noqa`, the editor's quick action).

Pure: text in, text out. A code goes on the line Python lets a comment silence it from: the end
of a backslash continuation or of a multi-line string (suppress.noqa_line). An existing
`# noqa: ...` on that line is extended, keeping its codes and whatever follows it; a blanket one
already silences everything and is left alone."""

from __future__ import annotations

from collections.abc import Iterable

from .splice import split_lines
from .statements import joined_lines
from .suppress import parse_suppressions


def add_noqa(text: str, wanted: Iterable[tuple[int, str]]) -> tuple[str, int]:
    """`text` with every (line, code) silenced; and how many lines were changed."""
    joined = joined_lines(text)
    by_line: dict[int, set[str]] = {}
    for line, code in wanted:
        by_line.setdefault(joined.get(line, line), set()).add(code)
    if not by_line:
        return text, 0
    directives = {d.line: d for d in parse_suppressions(text).directives if d.kind == "noqa"}
    lines = split_lines(text)
    changed = 0
    for number, codes in sorted(by_line.items()):
        if number > len(lines):
            continue
        raw = lines[number - 1]
        body = raw.rstrip("\r\n")
        ending = raw[len(body) :]
        existing = directives.get(number)
        if existing is not None and (not existing.selectors or existing.problem is not None):
            continue  # a blanket noqa silences every code already
        if existing is not None:
            have = [s.text for s in existing.selectors]
            merged = have + sorted(codes - {c.upper() for c in have} - set(have))
            if merged == have:
                continue
            body = f"{body[: existing.start]}# noqa: {', '.join(merged)}{body[existing.end :]}"
        else:
            body = f"{body}  # noqa: {', '.join(sorted(codes))}"
        lines[number - 1] = body + ending
        changed += 1
    return "".join(lines), changed
