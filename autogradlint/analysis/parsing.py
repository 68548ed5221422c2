"""libcst parsing without libcst's per-node validation, which parsed code cannot fail, and with
long runs of adjacent string literals read as one node.

Every libcst node validates itself when it is constructed (`CSTNode.__post_init__`), which is
right for nodes a codemod builds by hand. Nodes libcst's own parser builds from text it just
parsed are valid by construction; libcst's source says as much ("PERF: ... would allow us to
avoid validating the tree when parsing a file"). On our slices validation is ~15% of a parse,
so parsing here switches it off for the parser's own node construction only.

libcst nests implicitly concatenated literals one level per literal: its native parser gives
up past ~4,000 of them ("expected one of STRING"), and its code generation and visitors
recurse past Python's limit at a few hundred. A generated `load_inline` source has thousands,
and CPython takes them. So a run of `MIN_RUN` or more literals is parsed as one triple-quoted
literal of the same length and lines, and its node is then given the run's own text: one
`RunString` leaf whose code is the source as written.
"""

from __future__ import annotations

import io
import re
import threading
import tokenize
from ast import literal_eval
from typing import Any

import libcst as cst

from ..analysis.walk import children

_VALIDATING = cst.CSTNode.__post_init__
_LOCK = threading.Lock()  # the switch is global: one parse at a time flips it
MIN_RUN = 64  # literals in a run before it is read as one (real code stays far below)
# A closing quote, blanks, line breaks (a backslash continuation too) and an opening quote:
# every adjacency of two literals that no comment separates. Each repetition starts with a
# character the one before cannot take, so the scan is one pass.
_ADJACENT = re.compile(r"""["'][ \t\f]*(?:\\?(?:\r\n|\r|\n)[ \t\f]*)*[rRbBuUfFtT]{0,2}["']""")
# A line that starts with a literal: one per literal of a run with a comment on each line.
_LINE_START = re.compile(r"""^[ \t\f]*[rRbBuU]{0,2}["']""", re.M)


class RunString(cst.SimpleString):
    """Adjacent string literals as one leaf: `value` is their text as written (the blanks,
    line breaks and comments between them included), so code generation gives the source
    back; `evaluated_value` is their concatenation."""

    __slots__ = ()  # type: ignore[misc]  # no __dict__: a parsed leaf can become one

    def _validate(self) -> None:
        return None  # a run is not one literal, and it came from code that parsed

    @property
    def evaluated_value(self) -> str | bytes:
        value: str | bytes = literal_eval(f"(\n{self.value}\n)")
        return value


def _trusted(self: cst.CSTNode) -> None:
    return None


def parse_module(source: str) -> cst.Module:
    """`libcst.parse_module`, skipping node validation; raises what it raises."""
    runs = literal_runs(source)
    text = _masked(source, runs) if runs else source
    with _LOCK:
        cst.CSTNode.__post_init__ = _trusted  # type: ignore[method-assign]
        try:
            module = cst.parse_module(text)
        finally:
            cst.CSTNode.__post_init__ = _VALIDATING  # type: ignore[method-assign]
    if runs:
        _restore(module, source, runs, text)
    return module


def parse_expression(source: str) -> cst.BaseExpression:
    """`libcst.parse_expression`, with long literal runs read as one leaf as above."""
    runs = literal_runs(source)
    text = _masked(source, runs) if runs else source
    expression = cst.parse_expression(text)
    if runs:
        _restore(expression, source, runs, text)
    return expression


def literal_runs(text: str, minimum: int = MIN_RUN) -> list[tuple[int, int]]:
    """(start, end) offsets of each run of `minimum` or more adjacent plain string literals
    (no f-string among them), trimmed to literals that can hold a triple quote."""
    if text.count('"') + text.count("'") < 2 * minimum:
        return []
    # Each literal of a run but the first follows another on its line, or starts a line (an
    # empty string can hide one adjacency): with fewer than half that many, there is no run.
    seen = 0
    for pattern in (_ADJACENT, _LINE_START):
        for _ in pattern.finditer(text):
            seen += 1
            if seen >= minimum // 2:
                return _tokenized_runs(text, minimum)
    return []


def _tokenized_runs(text: str, minimum: int) -> list[tuple[int, int]]:
    lines: list[int] = [0]  # the offset each line the tokenizer reads starts at
    reader = io.StringIO(text).readline

    def readline() -> str:
        line = reader()
        lines.append(lines[-1] + len(line))
        return line

    found: list[tuple[int, int]] = []
    run: list[tokenize.TokenInfo] = []

    def close() -> None:
        if len(run) >= minimum:
            span = _span(run, lines, minimum)
            if span is not None:
                found.append(span)
        run.clear()

    try:
        for token in tokenize.generate_tokens(readline):
            if token.type == tokenize.STRING and "f" not in _prefix(token.string).lower():
                if run and _bytes(run[0].string) != _bytes(token.string):
                    close()
                run.append(token)
            elif token.type not in (tokenize.NL, tokenize.COMMENT):
                close()  # anything else ends a run (comments and breaks sit inside one)
    except (tokenize.TokenError, SyntaxError):
        return []  # not Python the tokenizer takes: libcst says what is wrong
    close()
    return found


def _prefix(literal: str) -> str:
    return literal[: len(literal) - len(literal.lstrip("rRbBuUfFtT"))]


def _bytes(literal: str) -> bool:
    return "b" in _prefix(literal).lower()


def _span(run: list[tokenize.TokenInfo], lines: list[int], minimum: int) -> tuple[int, int] | None:
    """The run from its first literal that can open a triple quote (`"a"`, not `""`) to its
    last that can close one, as offsets; None when fewer than `minimum` are left."""

    def fits(token: tokenize.TokenInfo, opening: bool) -> bool:
        text = token.string
        edge = text[len(_prefix(text)) :][:3] if opening else text[-3:]
        return len(edge) == 3 and "\n" not in edge and "\r" not in edge

    first = next((i for i, t in enumerate(run) if fits(t, True)), len(run))
    last = next((i for i in range(len(run) - 1, -1, -1) if fits(run[i], False)), -1)
    if last - first + 1 < minimum:
        return None
    start = lines[run[first].start[0] - 1] + run[first].start[1]
    end = lines[run[last].end[0] - 1] + run[last].end[1]
    return start, end


def _masked(text: str, runs: list[tuple[int, int]]) -> str:
    """The text with each run replaced by one triple-quoted literal of the same length whose
    line breaks are where the run's are."""
    out: list[str] = []
    at = 0
    for number, (start, end) in enumerate(runs):
        out.append(text[at:start])
        out.append(_stand_in(text[start:end], number))
        at = end
    out.append(text[at:])
    return "".join(out)


def _stand_in(run: str, number: int) -> str:
    """The run's prefix and first quote, tripled, around its line breaks; the rest is the
    run's number over and over (ASCII, for a bytes run), so each stand-in is unique."""
    prefix = _prefix(run)
    quote = run[len(prefix)] * 3
    inside = run[len(prefix) + 3 : len(run) - 3]
    tag = f"{number};"
    filler = [c if c in "\r\n" else tag[i % len(tag)] for i, c in enumerate(inside)]
    return f"{prefix}{quote}{''.join(filler)}{quote}"


def _restore(root: Any, source: str, runs: list[tuple[int, int]], masked: str) -> None:
    """Give each stand-in leaf its run's text."""
    originals = {masked[start:end]: source[start:end] for start, end in runs}
    stack = [root]
    while stack and originals:
        node = stack.pop()
        if type(node) is cst.SimpleString:
            original = originals.pop(node.value, None)
            if original is not None:
                object.__setattr__(node, "__class__", RunString)
                object.__setattr__(node, "value", original)
            continue
        stack.extend(children(node))
