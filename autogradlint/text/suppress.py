"""Suppression comments: `# noqa: AGL201`, `# autogradlint: ignore[...]`, file-level ignores.

Each comment is read into a `Directive` that knows where it and each of its codes sit in the
line, so the hygiene rules (engine/hygiene.py) can say which one silenced nothing and remove just it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .statements import comments, joined_lines

# A bare noqa, or one with a colon and codes (AGL201, E501). Codes without the colon make a
# blanket noqa for every tool that reads it (flake8, ruff): `loose` catches them, so hygiene can
# say so.
_NOQA = re.compile(
    r"#\s*noqa(?:(?P<colon>:\s*)(?P<codes>[\w\-]+(?:(?:\s*,\s*|\s+)[\w\-]+)*)?"
    r"|(?P<loose>[ \t]+(?P<loose_codes>[A-Za-z]+[0-9]+(?:(?:\s*,\s*|\s+)[A-Za-z]+[0-9]+)*)))?",
    re.IGNORECASE,
)
# `# autogradlint: <word>[codes]`: any word, so a misspelt directive is reported, not ignored.
_OURS = re.compile(
    r"#\s*autogradlint:\s*(?P<word>[\w\-]*)"
    r"(?:\[(?P<codes>[^\]\n]*)\]|(?P<open>\[[^\]\n]*)|[ \t]+(?P<bare>AGL\w*(?:[\s,]+AGL\w*)*))?",
    re.IGNORECASE,
)
_CODE = re.compile(r"[\w\-]+")
# A code as flake8 and ruff read one (`E501`, `AGL201`): after the first code, the first word
# that is not one (nor one of autogradlint's rule names) starts the reason, which they ignore.
_TOOL_CODE = re.compile(r"[A-Za-z]+[0-9]+")
ALL = "*"


@dataclass(frozen=True)
class Selector:
    """One code or rule name in a directive, and where it is in its line (0-based columns)."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Directive:
    """One suppression comment as written."""

    kind: str  # "noqa" | "ignore" | "file-ignore" | an unknown word after `autogradlint:`
    line: int  # 1-based
    start: int  # the `#` that starts it, 0-based column in its line
    end: int  # just past its last code (or past the directive word)
    selectors: tuple[Selector, ...]  # () is a blanket: every rule
    own_line: bool
    problem: str | None = None  # malformed: what is wrong with it
    repaired: str | None = None  # the directive as its author meant it, when that is clear

    @property
    def ours(self) -> bool:
        """Whether every selector belongs to autogradlint (a `# noqa` is shared with others)."""
        return self.kind != "noqa"

    def covers(self) -> tuple[int, ...]:
        """The lines it silences; () for the whole file."""
        if self.kind == "file-ignore":
            return ()
        if self.kind == "ignore" and self.own_line:  # alone on its line: also the next line
            return (self.line, self.line + 1)
        return (self.line,)

    def silences(self, rule_id: str, name: str) -> Selector | None:
        """The selector that silences this rule (a blanket answers with a `*` selector)."""
        if self.problem is not None and self.kind not in ("noqa", "ignore", "file-ignore"):
            return None  # a misspelt directive silences nothing
        if not self.selectors:
            return Selector(ALL, self.start, self.end)
        for selector in self.selectors:
            if selects(selector.text, rule_id, name):
                return selector
        return None


def selects(selector: str, rule_id: str, name: str) -> bool:
    """`AGL201`, a prefix (`AGL2`, `AGL`), or the rule's name."""
    return rule_id.startswith(selector.upper()) or selector == name


@dataclass
class Suppressions:
    """Every directive of a file, and which lines each silences."""

    directives: list[Directive] = field(default_factory=list)
    by_line: dict[int, list[int]] = field(default_factory=dict)  # line -> directive indexes
    file_wide: list[int] = field(default_factory=list)
    # Lines joined to later ones by `\` or a multi-line string: their noqa goes on the last.
    joined: dict[int, int] = field(default_factory=dict)

    def silencer(self, rule_id: str, name: str, line: int) -> tuple[int, Selector] | None:
        """(directive index, selector) of what silences this finding, or None."""
        candidates = [*self.file_wide, *self.by_line.get(line, ())]
        last = self.joined.get(line)
        if last is not None:
            candidates.extend(self.by_line.get(last, ()))
        for index in candidates:
            selector = self.directives[index].silences(rule_id, name)
            if selector is not None:
                return index, selector
        return None

    def silences(self, rule_id: str, name: str, line: int) -> bool:
        return self.silencer(rule_id, name, line) is not None


# Every suppression comment holds one of these (in any case); a file without them needs no
# comment scan. A case-insensitive regex has no literal to search for and tries every position
# (a quarter of a second over torch's candidate files); lower-casing and two substring searches
# run at memory speed.
_MARKERS = (b"noqa", b"autogradlint:")


def ascii_lowered(text: str) -> bytes:
    """`text` lower-cased for finding ASCII words in any case: one byte per character, so an
    offset in it is an offset in `text` (str.lower can change the length: "İ" becomes two
    characters), and a non-ASCII text costs no Unicode case mapping (~20 instructions a
    character)."""
    return text.encode("ascii", "replace").lower()


def _has_marker(source: str) -> bool:
    lowered = ascii_lowered(source)
    return any(marker in lowered for marker in _MARKERS)


def noqa_line(source: str, line: int) -> int:
    """The line a `# noqa` for a finding on `line` must go on (ruff's rule: the end of a
    backslash continuation or of a multi-line string)."""
    return joined_lines(source).get(line, line)


def parse_suppressions(source: str) -> Suppressions:
    """Read suppression comments; `# noqa` inside a string never counts."""
    result = Suppressions()
    if not _has_marker(source):
        return result
    result.joined = joined_lines(source)
    for comment in comments(source):
        directive = read_directive(comment.text, comment.line, comment.column, comment.alone)
        if directive is None:
            continue
        index = len(result.directives)
        result.directives.append(directive)
        covered = directive.covers()
        if not covered:
            result.file_wide.append(index)
        for line in covered:
            result.by_line.setdefault(line, []).append(index)
    return result


def read_directive(text: str, line: int, col: int, own_line: bool) -> Directive | None:
    """The directive in one comment (`text` starts at column `col` of `line`), if any.
    `autogradlint:` directives win over a `# noqa` in the same comment."""
    ours = _OURS.search(text)
    if ours is not None:
        return _ours(ours, line, col, own_line)
    noqa = _NOQA.search(text)
    if noqa is not None:
        return _noqa(noqa, line, col, own_line)
    return None


def _selectors(match: re.Match[str], group: str, col: int) -> tuple[Selector, ...]:
    text = match.group(group)
    if not text:
        return ()
    base = col + match.start(group)
    return tuple(
        Selector(m.group(), base + m.start(), base + m.end()) for m in _CODE.finditer(text)
    )


def _noqa(match: re.Match[str], line: int, col: int, own_line: bool) -> Directive:
    start, end = col + match.start(), col + match.end()
    if match.group("loose") is not None:
        codes = _selectors(match, "loose_codes", col)
        repaired = "# noqa: " + ", ".join(s.text for s in codes)
        problem = "without a colon, `# noqa` silences every rule on the line"
        return Directive("noqa", line, start, end, (), own_line, problem, repaired)
    if match.group("colon") is not None and match.group("codes") is None:
        problem = "`# noqa:` names no codes, so it silences every rule on the line"
        return Directive("noqa", line, start, end, (), own_line, problem)
    selectors = _selectors(match, "codes", col)
    if selectors and _is_code(selectors[0].text):
        # `# noqa: AGL201 kept on purpose`: the codes end at the first word that is not one.
        cut = next((i for i, s in enumerate(selectors) if not _is_code(s.text)), len(selectors))
        selectors = selectors[:cut]
        end = selectors[-1].end
    return Directive("noqa", line, start, end, selectors, own_line)


def _is_code(text: str) -> bool:
    """A word of a `# noqa:` list that is a code: a tool's (`E501`), autogradlint's (`AGL2`,
    `AGL20x`: a misspelt one is still meant as a code) or one of its rule names."""
    from ..meta import rule_names

    return (
        _TOOL_CODE.fullmatch(text) is not None
        or text.upper().startswith("AGL")
        or text in rule_names().values()
    )


def _ours(match: re.Match[str], line: int, col: int, own_line: bool) -> Directive:
    start, end = col + match.start(), col + match.end()
    word = match.group("word").lower()
    if word not in ("ignore", "file-ignore"):
        shown = word or "(nothing)"
        problem = f"`{shown}` is not a directive: use `ignore[...]` or `file-ignore[...]`"
        return Directive(word or "?", line, start, end, (), own_line, problem)
    if match.group("open") is not None:
        problem = "the code list has no closing `]`, so it silences every rule"
        return Directive(word, line, start, end, (), own_line, problem)
    if match.group("bare") is not None:
        codes = _selectors(match, "bare", col)
        repaired = f"# autogradlint: {word}[{', '.join(s.text for s in codes)}]"
        problem = f"codes after `{word}` need brackets; as written it silences every rule"
        return Directive(word, line, start, end, (), own_line, problem, repaired)
    if match.group("codes") is not None and not match.group("codes").strip():
        problem = "`[]` names no codes, so it silences every rule"
        return Directive(word, line, start, end, (), own_line, problem)
    return Directive(word, line, start, end, _selectors(match, "codes", col), own_line)
