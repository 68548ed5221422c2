"""Compiled dataclass methods kept across runs, as `.pyc` files keep a module's code.

`dataclasses` writes each generated `__init__`, `__repr__`, `__eq__`, `__hash__` ... as source
text and compiles it with `exec` when the class is created. libcst defines ~200 node dataclasses:
compiling their ~600 methods is about 60% of importing it (~0.12 s of ~0.2 s here), paid by every
run before any file is analysed. `cached_dataclass_code(part)` shadows `exec` inside the
`dataclasses` module only while the engine loads, so the same text runs the same code object,
compiled once and kept on disk. Nothing else changes: `exec(text, g, l)` and
`exec(compile(text, "<string>", "exec", dont_inherit=True), g, l)` are the same call (the
`dataclasses` module has no `__future__` flags for the text to inherit).

The file is per interpreter (bytecode magic) and per environment (`sys.prefix`), rewritten
when a text was missing (bounded: after an upgrade or two only this load's texts stay), written
atomically, read only when this user owns it and nobody else can write it. Any problem with it
means compiling as `dataclasses` would have. `AUTOGRADLINT_NO_CODE_CACHE=1` turns it off.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from types import CodeType
from typing import Any

from . import kept_files

_MOST = 5000  # entries; one load of the engine uses ~700


def cache_file(part: str) -> Path | None:
    """Where this interpreter and environment keep the code of one part of the program (the
    CLI, the engine); None when turned off."""
    return kept_files.cache_file(f"dataclass-code-{part}")


def _load(path: Path) -> dict[str, CodeType]:
    codes = kept_files.load_owned(path)
    if not isinstance(codes, dict):
        return {}
    return {k: v for k, v in codes.items() if isinstance(k, str) and isinstance(v, CodeType)}


class Counts:
    """What one load found in the cache (`reused`) and had to compile (`compiled`)."""

    def __init__(self) -> None:
        self.reused = 0
        self.compiled = 0


@contextlib.contextmanager
def cached_dataclass_code(part: str) -> Iterator[Counts]:
    """Dataclasses created inside reuse compiled methods from `part`'s cache file (one per part
    of the program, so the CLI does not read the engine's ~1 MB)."""
    counts = Counts()
    path = cache_file(part)
    if path is None or "exec" in vars(dataclasses):
        yield counts  # turned off, or already inside (a nested load): nothing to add
        return
    known = _load(path)
    used: dict[str, CodeType] = {}

    def cached_exec(source: Any, globals: Any = None, locals: Any = None) -> None:
        if isinstance(source, str):
            code = known.get(source)
            if code is None:
                code = compile(source, "<string>", "exec", dont_inherit=True)
                counts.compiled += 1
            else:
                counts.reused += 1
            used[source] = code
            source = code
        builtins.exec(source, globals, locals)

    dataclasses.exec = cached_exec  # type: ignore[attr-defined]
    try:
        yield counts
    finally:
        del dataclasses.exec  # type: ignore[attr-defined]
        if counts.compiled:
            # Keep what another kind of load used too (one that found libcst imported
            # already asks for fewer), up to a bound an upgrade or two cannot pass.
            merged = {**known, **used}
            kept_files.save_atomic(path, merged if len(merged) <= _MOST else used)
