"""Byte-level gates: which files can hold a finding, decided without parsing (or importing libcst).

Each check declares its gate beside its code (`Check.gate`): patterns one of whose matches every
reportable file contains, and substrings all of them contain. A file no enabled check's gate
admits is never parsed; checks/registry.py puts the enabled checks' gates together.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..text.functions import FUNCTION_ALIAS, may_name_function
from ..text.outline import ClassDecl, class_declarations


class Pattern(NamedTuple):
    """A regex and a substring every match of it contains: `bytes in` runs at memory speed
    (~2.5 GB/s here), a regex search at half that, so the regex runs only where it can match.
    `by_decls`: the file's class statements (which the index reads anyway) answer instead of
    the regex, so the file is not searched again."""

    needle: bytes
    regex: re.Pattern[bytes]
    by_decls: bool = False


def pattern(needle: bytes, regex: bytes, by_decls: bool = False) -> Pattern:
    assert needle in regex.replace(b"\\", b""), (needle, regex)  # a literal of the regex
    return Pattern(needle, re.compile(regex), by_decls)


# Each test's answer for one file, shared by the gates (they share tokens and patterns), and
# under _DECLS the file's class statements once they are read.
Memo = dict[object, Any]
_DECLS = "class statements"


@dataclass(frozen=True)
class Gate:
    """A byte test a check declares (`Check.gate`): every file that can hold one of its
    findings passes it."""

    patterns: tuple[Pattern, ...]  # a reportable file matches one of them
    requires: tuple[bytes, ...] = ()
    # Checks that start from autograd.Function classes: a file subclassing a Function defined
    # elsewhere in the project (the cross-file index) must reach them.
    starts_from_functions: bool = False
    # Tokens that admit a file on their own: `register_autograd` gives a torch.library custom
    # op a backward that the Function checks read too, with no Function class in sight.
    also: tuple[bytes, ...] = ()

    def admits(self, raw: bytes, memo: Memo | None = None) -> bool:
        """Substring tests first (memory speed, they reject almost every file), then patterns.

        Gates share tokens and patterns: `memo` keeps each test's answer for one file."""
        memo = {} if memo is None else memo
        for token in self.also:
            if _contains(raw, token, memo):
                return True
        for token in self.requires:
            if not _contains(raw, token, memo):
                return False
        for needle, regex, by_decls in self.patterns:
            if not _contains(raw, needle, memo):
                continue
            if regex not in memo:
                if by_decls:
                    memo[regex] = any(may_name_function(base) for base in _bases(raw, memo))
                else:
                    memo[regex] = regex.search(raw) is not None
            if memo[regex]:
                return True
        return False


def declarations(raw: bytes, memo: Memo) -> list[ClassDecl]:
    """The file's class statements, read once per file whichever gate or caller asks first."""
    decls: list[ClassDecl] | None = memo.get(_DECLS)
    if decls is None:
        decls = memo[_DECLS] = class_declarations(raw, _contains(raw, b"autograd", memo))
    return decls


def _bases(raw: bytes, memo: Memo) -> Iterator[str]:
    return (base for _name, bases, _flag in declarations(raw, memo) for base in bases)


# Each absent token is a scan of the whole file; most files lack every token. A token that holds
# a shorter one (`register_autograd` holds `autograd`) is absent when that one is, so the
# shorter one is scanned first and the longer one only where it is present.
_IMPLIED_BY: dict[bytes, tuple[bytes, ...]] = {
    b"register_autograd": (b"autograd",),
    b"autogradlint:": (b"autograd",),
    b"__torch_dispatch__": (b"__torch_",),
    b"__torch_function__": (b"__torch_",),
}


def _contains(raw: bytes, token: bytes, memo: Memo) -> bool:
    found = memo.get(token)
    if found is None:
        found = all(_contains(raw, inner, memo) for inner in _IMPLIED_BY.get(token, ()))
        found = memo[token] = found and token in raw
    return found


# A Function subclass is a class statement with a base that may name a Function
# (text/functions.py's may_name_function), or a class in a file that imports such a name under
# another (`from torch.autograd import Function as F`: FUNCTION_ALIAS). Each pattern starts with
# a literal so `re` skips ahead instead of trying every byte (a leading `\b` or `^`, or an
# alternation of the two, makes the same search five to ten times slower). The first is
# answered from the class statements the index reads; the regex says the same of the text,
# where comments and strings match too.
FUNCTION_CLASS = (
    pattern(b"Function", rb"class\s+\w+\s*\([^)]*Function", by_decls=True),
    pattern(b"Function", FUNCTION_ALIAS.encode()),
)
CUSTOM_OP_AUTOGRAD = b"register_autograd"


def function_gate(*requires: bytes, custom_ops: bool = False) -> Gate:
    """The gate of a check that starts from autograd.Function classes: a Function class
    statement, in a file holding `autograd`, `requires` and `Function` (tested in that order,
    each only where the ones before it are present: `autograd` first, the custom-op test has
    looked for it already, then the rarer ones). `custom_ops`: the check also reads
    torch.library custom ops' backwards (`register_autograd` admits the file on its own)."""
    also = (CUSTOM_OP_AUTOGRAD,) if custom_ops else ()
    return Gate(FUNCTION_CLASS, (b"autograd", *requires, b"Function"), True, also)


# Suppression hygiene (engine/hygiene.py, not a check): a file whose comments can name autogradlint.
SUPPRESSION_CODES = ("AGL901", "AGL902", "AGL903")
SUPPRESSIONS = Gate(
    (
        pattern(b"AGL", rb"AGL\d"),
        pattern(b"agl", rb"agl\d"),
        pattern(b"autogradlint:", rb"autogradlint:"),
    ),
)


def admitting(gates: Sequence[Gate]) -> tuple[Gate, ...]:
    """The gates that can change a yes/no answer: a gate with the same patterns as another
    and more required tokens admits nothing the other does not."""
    return tuple(
        gate
        for gate in gates
        if not any(
            other is not gate
            and other.patterns == gate.patterns
            and set(other.requires) < set(gate.requires)
            and set(gate.also) <= set(other.also)
            for other in gates
        )
    )


def declared(memo: Memo | None, decls: Sequence[ClassDecl] | None) -> Memo:
    """`memo` (a fresh one for None) knowing the file's class statements when the caller
    has them already."""
    memo = {} if memo is None else memo
    if decls is not None:
        memo.setdefault(_DECLS, list(decls))
    return memo


def subclasses_index(decls: Sequence[ClassDecl], index: frozenset[str]) -> bool:
    """Whether one of these class statements names (by its last component) a class of the
    project's Function index."""
    return any(base.rsplit(".", 1)[-1] in index for _, bases, _ in decls for base in bases)
