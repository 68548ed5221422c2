"""Lint a document again after an edit, re-analysing only what the edit can change.

The language server lints on every keystroke; a 2,000-line module with 64 Function classes took
close to a second. A module is split into its top-level statements: *units* (the classes checks
read one at a time: Functions and classes with a torch hook) and *context* (imports, helpers,
functions, anything else). A unit's findings depend on its own text, the context, and the
outline of the units it names (their class statement and method headers: what inheritance and
`Fn.forward(...)` calls read). So a unit is analysed with the same engine `check` uses, on a
reduced copy of the module that keeps every line number: the context as it is, the unit itself,
the units it names as stubs (headers only, bodies `...`), every other line blank. Its findings
are kept per unit, moved with the unit when lines above it are added or removed, and computed
again only when its text, the context, or a unit it names changes. Findings in the context
come from one more run with every unit stubbed. Suppressions are then applied and audited
(engine/hygiene.py) on the whole text. tests/test_incremental.py holds the result equal to linting the whole text, edit after
edit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ..meta import all_rules
from ..model import FileResult, Finding
from ..text.functions import may_name_function
from ..text.statements import body_start, chunk_starts, line_breaks
from .door import lint
from .hygiene import audit
from .request import LintRequest

_CLASS = re.compile(r"(?:@[^\n]*\n[ \t\f]*)*class[ \t]+(\w+)")
_HOOK = re.compile(r"__torch_(?:function|dispatch)__")
_NAME = re.compile(r"[A-Za-z_]\w*")
MIN_UNITS = 4  # fewer units than this: linting the whole text is as cheap


@dataclass(frozen=True)
class Chunk:
    start: int  # offset in the text
    end: int
    first_line: int  # 1-based line of `start`
    lines: int  # line breaks it spans
    name: str | None  # the class name of a unit; None for context


@dataclass
class _State:
    key: tuple[object, ...] | None = None  # what every run depends on besides its units
    outlines: str = ""  # the units' outlines the context run saw
    context: list[tuple[int, Finding]] = field(default_factory=list)  # (context chunk, relative)
    units: dict[tuple[str, ...], list[Finding]] = field(default_factory=dict)


class IncrementalLinter:
    """Per-document memo of findings by unit; one instance per worker process."""

    def __init__(self) -> None:
        self.documents: dict[str, _State] = {}

    def lint(self, request: LintRequest) -> FileResult:
        """`lint(request)` for the text of an editor's document, re-analysing only the units
        an edit can change."""
        text, path, project, enabled = request.source, request.path, request.view, request.enabled
        assert isinstance(text, str)  # an editor's buffer

        def run(source: str, suppress: bool = True) -> FileResult:
            return lint(replace(request, source=source, suppress=suppress))

        chunks = split(text, project.seeds)
        # Units by name (a chunk is a unit when it has one).
        units = [(c.name, c) for c in chunks if c.name is not None]
        names = [name for name, _ in units]
        if len(units) < MIN_UNITS or len(set(names)) < len(names) or "\r" in text or "\x00" in text:
            self.documents.pop(path, None)
            return run(text)
        bodies = {name: text[c.start : c.end] for name, c in units}
        contexts = [c for c in chunks if c.name is None]
        key = ("".join(text[c.start : c.end] for c in contexts), enabled, request.settings, project)
        state = self.documents.setdefault(path, _State())
        if state.key != key:
            state.key, state.units, state.outlines = key, {}, ""
        stubs = {name: stub(text, c) for name, c in units}
        outlines = "\n".join(f"{n}:{_squeeze(stubs[n])}" for n in sorted(stubs))
        if state.outlines != outlines:
            # Findings in the context: calls to units' forward, classes nested in functions.
            reduced = _reduced(text, chunks, keep=set(), stubs=stubs)
            result = run(reduced, suppress=False)
            if result.error is not None:
                self.documents.pop(path, None)
                return run(text)
            state.outlines = outlines
            state.context = [
                (contexts.index(owner), _shift(f, -owner.first_line))
                for f in result.findings
                if (owner := _owner(chunks, f.line)).name is None
            ]
        findings = [_shift(f, contexts[i].first_line) for i, f in state.context]
        fresh: dict[tuple[str, ...], list[Finding]] = {}
        for name, unit in units:
            named = _named(bodies, name)
            memo = (bodies[name], *(bodies[n] for n in sorted(named)))
            relative = state.units.get(memo)
            if relative is None:
                reduced = _reduced(text, chunks, keep={name, *named}, stubs={})
                result = run(reduced, suppress=False)
                if result.error is not None:
                    self.documents.pop(path, None)
                    return run(text)
                relative = [
                    _shift(f, -unit.first_line)
                    for f in result.findings
                    if _owner(chunks, f.line) is unit
                ]
            fresh[memo] = relative
            findings.extend(_shift(f, unit.first_line) for f in relative)
        state.units = fresh
        everything = frozenset(all_rules()) if enabled is None else enabled
        return FileResult(
            path, findings=audit(text, path, findings, everything).findings, parsed=True
        )

    def forget(self, path: str) -> None:
        self.documents.pop(path, None)


def split(text: str, seeds: frozenset[str] = frozenset()) -> list[Chunk]:
    """The top-level statements: units (classes of interest: a base spelled `...Function`, a
    torch hook, or a base that is one of those or a Function of another module) and context."""
    starts = chunk_starts(text)
    bounds = [*starts, len(text)]
    pieces: list[tuple[int, int, int, str | None, set[str]]] = []
    line = 1
    for index, start in enumerate(starts):
        end = bounds[index + 1]
        piece = text[start:end]
        match = _CLASS.match(piece)
        name, bases = None, set()
        if match is not None:
            header = piece[match.end() : piece.find(":", match.end()) + 1]
            bases = set(_NAME.findall(header))
            if may_name_function(header) or _HOOK.search(piece) or bases & seeds:
                name = match.group(1)
        pieces.append((start, end, line, name, bases))
        line += line_breaks(piece)
    units = {p[3] for p in pieces if p[3]}
    changed = True
    while changed:  # a class whose base is a unit of this module is a unit too
        changed = False
        for position, (start, end, first, name, bases) in enumerate(pieces):
            if name is None and bases & units:
                found = _CLASS.match(text, start)
                assert found is not None
                pieces[position] = (start, end, first, found.group(1), bases)
                units.add(found.group(1))
                changed = True
    return [
        Chunk(start, end, first, line_breaks(text[start:end]), name)
        for start, end, first, name, _bases in pieces
    ]


def stub(text: str, unit: Chunk) -> str:
    """The unit's outline: its class statement and member headers, bodies `...`, blank lines
    elsewhere (the same number of lines, so line numbers stay)."""
    body = body_start(text, unit.start, unit.end)
    if body is None:
        return text[unit.start : unit.end]  # a one-line class: itself
    offset, indent = body
    out = [text[unit.start : offset]]
    members = chunk_starts(text, indent, offset, unit.end)
    bounds = [*members, unit.end]
    for index, start in enumerate(members):
        end = bounds[index + 1]
        inner = body_start(text, start, end)
        if inner is None:  # an assignment, a one-line def: short, kept as it is
            out.append(text[start:end])
            continue
        header_end, member_indent = inner
        out.append(text[start:header_end])
        out.append(f"{member_indent}...\n")
        out.append("\n" * max(0, line_breaks(text[header_end:end]) - 1))
    outline = "".join(out)
    missing = unit.lines - line_breaks(outline)
    return outline + "\n" * missing if missing > 0 else outline


def _squeeze(outline: str) -> str:
    """An outline without its blank lines: a body growing by a line does not change it."""
    return re.sub(r"\n\s*(?=\n)", "", outline)


def _named(bodies: dict[str, str], own: str) -> set[str]:
    """The other units this one names (bases, `Fn.forward(...)`, helpers), transitively."""
    names = set(_NAME.findall(bodies[own])) & set(bodies)
    names.discard(own)
    pending = list(names)
    while pending:
        for found in set(_NAME.findall(bodies[pending.pop()])) & set(bodies):
            if found != own and found not in names:
                names.add(found)
                pending.append(found)
    return names


def _reduced(text: str, chunks: list[Chunk], keep: set[str], stubs: dict[str, str]) -> str:
    """The module with the context as it is, the units in `keep` whole, those in `stubs` as
    their outline, and blank lines for the rest: every line where it was."""
    out: list[str] = []
    for chunk in chunks:
        if chunk.name is None or chunk.name in keep:
            out.append(text[chunk.start : chunk.end])
        elif chunk.name in stubs:
            out.append(stubs[chunk.name])
        else:
            out.append("\n" * chunk.lines)
    return "".join(out)


def _owner(chunks: list[Chunk], line: int) -> Chunk:
    for chunk in chunks:
        if line < chunk.first_line + chunk.lines:
            return chunk
    return chunks[-1]


def _shift(finding: Finding, lines: int) -> Finding:
    return replace(finding, line=finding.line + lines, end_line=finding.end_line + lines)
