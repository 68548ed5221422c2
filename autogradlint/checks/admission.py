"""Whether a file can hold an enabled rule's finding, from its bytes: the gates the checks
declare (`Check.gate`), read without importing the checks when an earlier run kept them.

Importing the checks imports libcst and the analysis (~0.13 s of a CLI run, serial, before the
readers that gate the files can fork). The gates are data derived from the check modules, so,
as a `.pyc` file keeps a module's code, the registry's table of each check's codes and gate is
kept on disk (runtime/kept_files.py) with the size and mtime of every module of the package
loaded when it was derived, and read back while all of them are unchanged: the CLI gates files
while the engine loads. A process that has imported the registry (a worker, the language
server, a test) reads the gates from it; nothing else keeps a rule's gate.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from ..runtime import kept_files
from ..text.outline import ClassDecl
from .gates import (
    SUPPRESSION_CODES,
    SUPPRESSIONS,
    Gate,
    Memo,
    Pattern,
    admitting,
    declarations,
    declared,
    subclasses_index,
)

# A check's codes and gate, in registry order.
Entry = tuple[tuple[str, ...], Gate]
_REGISTRY = "autogradlint.checks.registry"
_KIND = "gate-table"


def can_hold_findings(
    source: bytes,
    enabled: Iterable[str],
    index: frozenset[str] = frozenset(),
    decls: Sequence[ClassDecl] | None = None,
    memo: Memo | None = None,
) -> bool:
    """Whether an enabled gate admits the file, or it subclasses a Function of the index.

    `decls` are the file's class_declarations when the caller already has them; `memo`, what
    earlier tests of the same bytes found (gates.declarations puts the class statements there)."""
    gates = _admitting_gates(frozenset(enabled))
    memo = declared(memo, decls)
    if any(gate.admits(source, memo) for gate in gates):
        return True
    if not index or not any(gate.starts_from_functions for gate in gates):
        return False
    return subclasses_index(declarations(source, memo), index)


def gates_for(enabled: Iterable[str]) -> list[Gate]:
    """The gates of the enabled checks, and the suppression audit's (engine/hygiene.py)."""
    wanted = set(enabled)
    gates = [gate for codes, gate in gate_table() if wanted.intersection(codes)]
    return gates + [SUPPRESSIONS] if wanted.intersection(SUPPRESSION_CODES) else gates


@functools.lru_cache(maxsize=64)
def _admitting_gates(enabled: frozenset[str]) -> tuple[Gate, ...]:
    return admitting(gates_for(enabled))


@functools.cache
def gate_table() -> tuple[Entry, ...]:
    """Each check's codes and gate, in registry order: from the registry once it is imported,
    else from the table an earlier run kept, else from the registry (imported here), kept."""
    if _REGISTRY in sys.modules:
        return _derived()
    path = kept_files.cache_file(_KIND)
    kept = _read(kept_files.load_owned(path)) if path is not None else None
    if kept is not None:
        return kept
    table = _derived()
    stamps = _stamps(_package_modules())
    if path is not None and stamps:
        kept_files.save_atomic(path, (stamps, _to_data(table)))
    return table


def _derived() -> tuple[Entry, ...]:
    from .registry import REGISTRY

    return tuple((check.codes, check.gate) for check in REGISTRY)


# --- the kept form: marshal's types only ---------------------------------------------------------
Stamp = tuple[str, int, int]  # a module's file, mtime (ns) and size


def _package_modules() -> list[str]:
    """The files of the package's modules loaded now: what the table may have been derived from."""
    prefix = __name__.split(".", 1)[0] + "."
    files = {
        getattr(module, "__file__", None)
        for name, module in sys.modules.items()
        if name.startswith(prefix)
    }
    return sorted(file for file in files if isinstance(file, str))


def _stamps(files: Iterable[str]) -> tuple[Stamp, ...] | None:
    try:
        return tuple((file, (info := os.stat(file)).st_mtime_ns, info.st_size) for file in files)
    except OSError:
        return None


def _to_data(table: tuple[Entry, ...]) -> tuple[object, ...]:
    return tuple(
        (
            codes,
            tuple((p.needle, p.regex.pattern, p.regex.flags, p.by_decls) for p in gate.patterns),
            gate.requires,
            gate.starts_from_functions,
            gate.also,
        )
        for codes, gate in table
    )


def _read(kept: Any) -> tuple[Entry, ...] | None:
    """The table `kept` holds while every module it was derived from is unchanged; None when
    one changed or the value is not what _to_data writes."""
    try:
        stamps, data = kept
        if not stamps or _stamps(file for file, _mtime, _size in stamps) != tuple(stamps):
            return None
        return tuple(
            (
                tuple(codes),
                Gate(
                    tuple(Pattern(n, re.compile(r, f), b) for n, r, f, b in patterns),
                    tuple(requires),
                    starts,
                    tuple(also),
                ),
            )
            for codes, patterns, requires, starts, also in data
        )
    except (TypeError, ValueError, re.error):
        return None
