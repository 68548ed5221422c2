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
    | (?P<word>\w+)
    """,
    re.VERBOSE,
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
    if len(text) < limit:
        return None  # fewer characters than levels: cannot reach it
    chains = [0]  # per open bracket: operators chained at that level since its last comma
    depth = 0  # sum of chains: what libcst's recursion would be at this point
    line = 1
    after_operand = False  # a bracket right after an operand is a call or subscript trailer
    for match in _TOKENS.finditer(text):
        kind = match.lastgroup
        token = match.group()
        if kind == "skip":
            line += token.count("\n")
            after_operand = not token.startswith(("#", "\\"))
            continue
        if kind == "open":
            if after_operand:
                chains[-1] += 1
                depth += 1
            chains.append(1)
            depth += 1
            after_operand = False
        elif kind == "close":
            if len(chains) > 1:
                depth -= chains.pop()
            after_operand = True
        elif kind == "reset":
            if token not in ",;":
                line += 1
                if len(chains) > 1:
                    continue  # a line break inside brackets continues the expression
            depth -= chains[-1] - (1 if len(chains) > 1 else 0)
            chains[-1] = 1 if len(chains) > 1 else 0
            after_operand = False
        elif kind == "op":
            chains[-1] += 1
            depth += 1
            after_operand = False
        else:
            after_operand = True
        if depth > limit:
            return TooComplex(depth, line)
    return None
