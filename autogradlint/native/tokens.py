"""C/C++ tokens of a comment-blanked text, with their brackets matched: what the access reader
walks. One linear pass; every question asked of the tokens afterwards is bounded or indexed."""

from __future__ import annotations

import bisect
import re

# Each alternative starts with its own characters and none repeats what another repeats, so `re`
# never backtracks over a run it has read: one step per character. Whitespace matches nothing.
_TOKEN = re.compile(
    r"[A-Za-z_]\w*"  # identifiers and keywords
    r"|\d[\w.']*"  # numbers, with suffixes and digit separators
    r"|\"(?:[^\"\\\n]|\\.)*\"?"  # a string literal (an unterminated one ends with its line)
    r"|'(?:[^'\\\n]|\\.)*'?"  # a character literal
    r"|<<<|>>>|<<=|>>=|->|::|\+\+|--|&&|\|\||[-+*/%&|^!=<>]=|<<|>>"
    r"|\S"
)
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {")": "(", "]": "[", "}": "{"}
BACKWARD_LIMIT = 64  # tokens a backward look walks: a declaration's head is never longer
FORWARD_LIMIT = 256  # tokens a kernel launch's configuration may take
OFFSET_LIMIT = 64  # tokens an offset expression may take (`i * g.stride(0) + j` is 11)
_KEYWORDS = frozenset(
    {"if", "for", "while", "switch", "catch", "return", "sizeof", "else", "do", "defined",
     "decltype", "alignof", "static_assert", "new", "delete", "throw", "case"}
)  # fmt: skip


class Tokens:
    """The tokens of one text (a function body), their offsets, matching brackets, and the
    identifiers' positions."""

    def __init__(self, text: str) -> None:
        # A backslash outside a literal continues a macro's line: not a token.
        found = [(m.group(), m.start()) for m in _TOKEN.finditer(text) if m.group() != "\\"]
        self.text = [t for t, _ in found]
        self.start = [s for _, s in found]
        count = len(found)
        self.match = [-1] * count  # the matching bracket of each bracket token
        self.enclosing = [-1] * count  # the innermost open bracket around each token
        self.names: dict[str, list[int]] = {}  # identifier -> its positions (not `x.name`)
        stack: list[int] = []
        for index, token in enumerate(self.text):
            if stack:
                self.enclosing[index] = stack[-1]
            if token in _OPENERS:
                stack.append(index)
            elif token in _CLOSERS:
                # An unbalanced `#if` branch leaves openers behind: close down to the match.
                opener = _CLOSERS[token]
                depth = len(stack) - 1
                while depth >= 0 and self.text[stack[depth]] != opener:
                    depth -= 1
                if depth >= 0:
                    self.match[stack[depth]] = index
                    self.match[index] = stack[depth]
                    del stack[depth:]
                    self.enclosing[index] = stack[-1] if stack else -1
            elif token[0].isalpha() or token[0] == "_":
                before = self.text[index - 1] if index else ""
                if before not in (".", "->", "::"):
                    self.names.setdefault(token, []).append(index)
        self._arguments: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return len(self.text)

    def at(self, index: int) -> str:
        """The token at `index`, or "" outside the text."""
        return self.text[index] if 0 <= index < len(self.text) else ""

    def occurrences(self, name: str) -> list[int]:
        return self.names.get(name, [])

    def is_name(self, index: int) -> bool:
        token = self.at(index)
        return bool(token) and (token[0].isalpha() or token[0] == "_") and token not in _KEYWORDS

    def template_end(self, index: int) -> int:
        """The index after the `<...>` that starts at `index` (`>>` closes two), or -1."""
        depth = 0
        for at in range(index, min(len(self.text), index + BACKWARD_LIMIT)):
            token = self.text[at]
            if token == "<":
                depth += 1
            elif token in (">", ">>"):
                depth -= len(token)
                if depth <= 0:
                    return at + 1
            elif token in (";", "{", "}"):
                return -1
        return -1

    def template_start(self, index: int) -> int:
        """The `<` that the `>` (or `>>`) at `index` closes, or -1."""
        depth = 0
        for at in range(index, max(-1, index - BACKWARD_LIMIT), -1):
            token = self.text[at]
            if token in (">", ">>"):
                depth += len(token)
            elif token == "<":
                depth -= 1
                if depth <= 0:
                    return at
            elif token in (";", "{", "}"):
                return -1
        return -1

    def callee(self, opener: int) -> str:
        """The function a `(` at `opener` calls (`ns::f`, `k` of `k<T><<<g, b>>>(`), or "" when
        the parenthesis is no call (grouping, a cast, `if (`)."""
        at = opener - 1
        if self.at(at) == ">>>":
            at = self.template_start_launch(at)
            if at < 0:
                return ""
            at -= 1
        if self.at(at) in (">", ">>"):
            start = self.template_start(at)
            if start < 1:
                return ""
            at = start - 1
        if not self.is_name(at):
            return ""
        parts = [self.text[at]]
        while self.at(at - 1) == "::" and self.is_name(at - 2):
            at -= 2
            parts.append(self.text[at])
        return "::".join(reversed(parts))

    def template_start_launch(self, index: int) -> int:
        """The `<<<` of the `>>>` at `index`, or -1."""
        for at in range(index - 1, max(-1, index - FORWARD_LIMIT), -1):
            token = self.text[at]
            if token == "<<<":
                return at
            if token in (";", "{", "}"):
                return -1
        return -1

    def argument_starts(self, opener: int) -> list[int]:
        """The index of each top-level argument's first token inside the brackets at
        `opener` (computed once per bracket)."""
        found = self._arguments.get(opener)
        if found is None:
            found = [opener + 1]
            close = self.match[opener]
            at = opener + 1
            while 0 <= at < close:
                token = self.text[at]
                if token in _OPENERS and self.match[at] > at:
                    at = self.match[at] + 1
                    continue
                if token == ",":
                    found.append(at + 1)
                at += 1
            self._arguments[opener] = found
        return found

    def position(self, opener: int, index: int) -> int:
        """Which argument of the call at `opener` the token at `index` starts or is in."""
        return bisect.bisect_right(self.argument_starts(opener), index) - 1

    def arguments(self, opener: int) -> list[tuple[int, int]]:
        """(first, last) token index of each argument of the brackets at `opener`."""
        starts = self.argument_starts(opener)
        close = self.match[opener]
        ends = [s - 2 for s in starts[1:]] + [close - 1]
        return list(zip(starts, ends, strict=True))

    def assigned(self, index: int) -> tuple[str, int] | None:
        """(name, index of `=`) when the expression holding the token at `index` is the
        initializer of a declaration or the right side of `name = ...` (a bounded look back)."""
        at = index - 1
        for _ in range(BACKWARD_LIMIT):
            if at < 0:
                return None
            token = self.text[at]
            if token in _CLOSERS:
                at = self.match[at] - 1 if self.match[at] >= 0 else -1
                continue
            if token == "=":
                if self.is_name(at - 1):
                    return self.text[at - 1], at
                return None
            if token in (";", ",", "{", "}", "(", "[", "return") or token in _ASSIGNING:
                return None
            at -= 1
        return None

    def expression_end(self, index: int) -> int:
        """The last token of the operand chain that starts at `index` (`a + b * c[i]`), up to
        a separator, comparison or assignment at the same level; -1 when it runs longer than
        any offset does (then nothing is concluded from it, and each one read costs little)."""
        at = index
        last = index - 1
        for _ in range(OFFSET_LIMIT):
            if at >= len(self.text):
                return last
            token = self.text[at]
            if token in _OPENERS:
                if self.match[at] < at:
                    return last
                last = at = self.match[at]
                at += 1
                continue
            if token in _ENDS or token in _CLOSERS:
                return last
            last = at
            at += 1
        return -1

    def statement_start(self, index: int) -> int:
        """The first token of the statement holding `index` (a bounded look back)."""
        at = index
        for _ in range(BACKWARD_LIMIT):
            if at <= 0 or self.text[at - 1] in (";", "{", "}"):
                return max(at, 0)
            at -= 1
        return at

    def unary(self, index: int) -> bool:
        """Whether the operator at `index` is a prefix operator (`*p`, `&p[i]`), not binary."""
        before = self.at(index - 1)
        if not before:
            return True
        if before in (")", "]"):
            return False
        if before[0].isalnum() or before[0] in "_\"'":
            return before in _KEYWORDS or before in ("return", "co_return")
        return True


_ASSIGNING = frozenset({"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="})
ASSIGNMENTS = _ASSIGNING | {"="}
STEPS = frozenset({"++", "--"})
_ENDS = frozenset(
    {",", ";", "?", ":", "==", "!=", "<=", ">=", "&&", "||", "<", ">", "<<", ">>"} | ASSIGNMENTS
)


def is_check(name: str) -> bool:
    """TORCH_CHECK, AT_ASSERTM, a project's own ASSERT / CHECK_ARG ... and the C `assert`."""
    last = name.rsplit("::", 1)[-1]
    return last == "assert" or (is_macro(last) and ("CHECK" in last or "ASSERT" in last))


def is_macro(name: str) -> bool:
    """An upper-case name (`CHECK_INPUT`): a macro, whose definition the index knows."""
    return (
        bool(name)
        and name[0].isupper()
        and all(c.isupper() or c.isdigit() or c == "_" for c in name)
    )
