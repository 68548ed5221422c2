"""Byte-level gates: which files can hold a finding, decided without parsing (or importing libcst).

Each check has a gate: the rules it reports, a regex one of whose matches every reportable file
contains, and substrings all of them contain. A file no enabled gate admits is never parsed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Gate:
    ids: tuple[str, ...]
    pattern: re.Pattern[bytes]
    requires: tuple[bytes, ...] = ()
    # Checks that start from autograd.Function classes: a file subclassing a Function defined
    # elsewhere in the project (the cross-file index) must reach them.
    starts_from_functions: bool = False

    def admits(self, raw: bytes) -> bool:
        return all(token in raw for token in self.requires) and self.pattern.search(raw) is not None


# A Function subclass is a class statement naming `...Function` among its bases, or a class in a
# file that imports Function under another name (`from torch.autograd import Function as F`).
_FUNCTION_CLASS = rb"class\s+\w+\s*\([^)]*Function\b|Function\s+as\s+\w+"
REENTRANT = Gate(
    ("AGL101", "AGL102", "AGL103", "AGL104", "AGL105"),
    re.compile(_FUNCTION_CLASS),
    (b"def backward", b"autograd"),
    True,
)
COMPILED_GRADS = Gate(
    ("AGL201", "AGL202"), re.compile(_FUNCTION_CLASS), (b"def backward", b"autograd"), True
)
TORCH_FUNCTION = Gate(("AGL301", "AGL302"), re.compile(rb"def\s+__torch_(function|dispatch)__"))
HYGIENE = Gate(("AGL303", "AGL304", "AGL305"), re.compile(rb"def\s+__torch_function__"))
CONTRACT = Gate(
    ("AGL401", "AGL402", "AGL403", "AGL404", "AGL405", "AGL406", "AGL407", "AGL408"),
    re.compile(_FUNCTION_CLASS),
    (b"autograd",),
    True,
)
GATES: tuple[Gate, ...] = (REENTRANT, COMPILED_GRADS, TORCH_FUNCTION, HYGIENE, CONTRACT)


def gates_for(enabled: Iterable[str]) -> list[Gate]:
    wanted = set(enabled)
    return [gate for gate in GATES if wanted.intersection(gate.ids)]


@functools.lru_cache(maxsize=8)
def index_pattern(names: frozenset[str]) -> re.Pattern[bytes]:
    """Matches a class statement whose bases name a Function class of the project index."""
    alternatives = b"|".join(re.escape(n.encode()) for n in sorted(names))
    return re.compile(rb"class\s+\w+\s*\([^)]*\b(?:" + alternatives + rb")\b")


def can_hold_findings(
    source: bytes, enabled: Iterable[str], index: frozenset[str] = frozenset()
) -> bool:
    gates = gates_for(enabled)
    if any(gate.admits(source) for gate in gates):
        return True
    return (
        bool(index)
        and any(gate.starts_from_functions for gate in gates)
        and index_pattern(index).search(source) is not None
    )


_CLASS_RE = re.compile(rb"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.M)
_FUNCTION_BASES = {"Function", "InplaceFunction"}
ClassDecl = tuple[str, tuple[str, ...], bool]  # name, last components of bases, file has autograd


def class_declarations(data: bytes) -> list[ClassDecl]:
    """The class statements of one file, from bytes: what the cross-file index is built from."""
    if b"class" not in data:
        return []
    autograd = b"autograd" in data
    out: list[ClassDecl] = []
    for match in _CLASS_RE.finditer(data):
        name = match.group(1).decode("ascii", "replace")
        bases = tuple(
            sorted(
                {
                    b.strip().rsplit(b".", 1)[-1].decode("ascii", "replace")
                    for b in match.group(2).split(b",")
                    if b.strip() and b"=" not in b
                }
            )
        )
        out.append((name, bases, autograd))
    return out


def function_index(declarations: Sequence[Sequence[ClassDecl]]) -> frozenset[str]:
    """Names of the project's autograd.Function classes, across files.

    Seeds are classes whose base is spelled `...Function` in a file that mentions autograd;
    any class whose base names a known Function joins them (to a fixpoint), so a subclass of
    `MyBase` in one file is recognised when `MyBase(torch.autograd.Function)` is in another.
    """
    bases_of: dict[str, set[str]] = {}
    names: set[str] = set()
    for decls in declarations:
        for name, bases, autograd in decls:
            bases_of.setdefault(name, set()).update(bases)
            if autograd and _FUNCTION_BASES.intersection(bases):
                names.add(name)
    changed = True
    while changed:
        changed = False
        for name, bases in bases_of.items():
            if name not in names and bases & names:
                names.add(name)
                changed = True
    return frozenset(names)
