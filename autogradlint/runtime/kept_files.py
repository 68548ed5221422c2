"""Files the program keeps across runs under ~/.cache/autogradlint: where they live, and how
they are read (only when this user owns them and nobody else can write them) and written
(atomically). Each is a `.pyc`-like artefact of the installed program, never of the code
checked: compiled dataclass methods, parsed rule files."""

from __future__ import annotations

import contextlib
import importlib.util
import marshal
import os
import stat
import sys
import zlib
from pathlib import Path
from typing import Any


def cache_file(kind: str) -> Path | None:
    """Where this interpreter and environment keep one kind of file (marshal's format is per
    interpreter); None when turned off (`AUTOGRADLINT_NO_CODE_CACHE=1`) or with no home."""
    if os.environ.get("AUTOGRADLINT_NO_CODE_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None  # no home to speak of: compute as usual
    key = zlib.crc32(f"{sys.prefix}\0{sys.version}".encode())  # not hashlib: 3 ms to import
    magic = importlib.util.MAGIC_NUMBER.hex()
    return Path(base) / "autogradlint" / f"{kind}-{magic}-{key:08x}.marshal"


def load_owned(path: Path) -> object:
    """What the file holds; None when it is missing, unreadable, not marshal data, or could
    have been written by someone else."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return None  # someone else could have written it
            return marshal.load(handle)
    except (OSError, EOFError, ValueError, TypeError):
        return None


def save_atomic(path: Path, value: Any) -> None:
    """Write `value` to a temporary file beside `path`, then rename it into place; a failure
    (a read-only home, a value marshal cannot write) leaves things as they were."""
    try:
        import tempfile  # only when writing: importing it costs more than a load saves

        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                marshal.dump(value, out)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except (OSError, ValueError):
        pass  # the next run computes again, nothing else is lost
