"""Refuse, before libcst sees it, code that its native parser cannot take.

libcst's parser recurses once per level of expression nesting: 10,000 chained operators
(`g * ------1`, `not not ...`, `a.b.c...`, `1+1+...`, `x if c else x if c else ...`, nested
lambdas, call and subscript chains) overflow its stack and kill the process, and well before
that its cost grows quadratically (3,000 take 2-10 s). CPython's own parser copes. A text scan,
strings and comments skipped, estimates the deepest nesting libcst would build; past the limit
the file is reported as too complex instead of being parsed. Real code stays far below it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

# Overridable for experiments (and for the tests that reach the native parser on purpose).
MAX_EXPRESSION_DEPTH = int(os.environ.get("AUTOGRADLINT_MAX_EXPRESSION_DEPTH", "1000"))

# Identifiers are not tokens here (most of any text is identifiers): `re` skips them in C, and
# whether a bracket follows an operand is read from the character before it.
_TOKENS = re.compile(
    r"""
      (?P<skip>\#[^\n]*
        | [rRbBuUfF]{0,2}\"\"\"[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*\"\"\"
        | [rRbBuUfF]{0,2}'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''
        | [rRbBuUfF]{0,2}"[^"\\\n]*(?:\\.[^"\\\n]*)*"
        | [rRbBuUfF]{0,2}'[^'\\\n]*(?:\\.[^'\\\n]*)*'
        | \\\r?\n
        | \d[\w.]*(?:[eE][-+]?\d+)?
      )
    | (?P<open>[(\[{])
    | (?P<close>[)\]}])
    | (?P<reset>[,;]|\r?\n|\r)
    | (?P<op>\*\*|//|<<|>>|<=|>=|==|!=|->|:=|[-+*/%@&|^~<>.]
        | \b(?:not|and|or|if|else|lambda|await|in|is)\b)
    """,
    re.VERBOSE,
)
_OPERAND_END = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_)]}\"'")


_BRACKETS = ("(", "[", "{")  # a bracket can count twice: itself, and as a call's trailer
_COUNTED = (".", "+", "-", "*", "/", "%", "@", "&", "|", "^", "~", "<", ">", "=")
_WORDS = ("not ", "and ", "or ", "if ", "else ", "lambda", "await ", "in ", "is ")


def _upper_bound(text: str) -> int:
    """More than the depth the scan below can find: every level it counts is one of these
    characters or words (str.count runs at memory speed)."""
    return (
        2 * sum(text.count(c) for c in _BRACKETS)
        + sum(text.count(c) for c in _COUNTED)
        + sum(text.count(w) for w in _WORDS)
    )


@dataclass(frozen=True)
class TooComplex:
    depth: int
    line: int

    def describe(self) -> str:
        return (
            f"too complex to analyse: an expression nests more than {self.depth - 1:,} levels "
            "deep (chained operators, attributes, calls or subscripts), more than libcst's "
            "parser can take"
        )


def too_complex(text: str, limit: int | None = None) -> TooComplex | None:
    """The first place where the estimated nesting passes `limit`, or None."""
    limit = MAX_EXPRESSION_DEPTH if limit is None else limit
    if len(text) < limit or _upper_bound(text) <= limit:
        return None  # fewer operators and brackets in all of it than levels: cannot reach it
    chains = [0]  # per open bracket: operators chained at that level since its last comma
    depth = 0  # sum of chains: what libcst's recursion would be at this point
    line = 1
    for match in _TOKENS.finditer(text):
        kind = match.lastgroup
        if kind == "skip":
            line += match.group().count("\n")
            continue
        if kind == "open":
            start = match.start()
            if start and text[start - 1] in _OPERAND_END:  # a call or subscript trailer
                chains[-1] += 1
                depth += 1
            chains.append(1)
            depth += 1
        elif kind == "close":
            if len(chains) > 1:
                depth -= chains.pop()
        elif kind == "reset":
            if match.group() not in ",;":
                line += 1
                if len(chains) > 1:
                    continue  # a line break inside brackets continues the expression
            depth -= chains[-1] - (1 if len(chains) > 1 else 0)
            chains[-1] = 1 if len(chains) > 1 else 0
        else:  # an operator
            chains[-1] += 1
            depth += 1
        if depth > limit:
            return TooComplex(depth, line)
    return None
