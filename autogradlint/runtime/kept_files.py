"""Files the program keeps across runs under ~/.cache/autogradlint: where they live, and how
they are read (only when this user owns them and nobody else can write them) and written
(atomically). Each is a `.pyc`-like artefact of the installed program, never of the code
checked: compiled dataclass methods, parsed rule files.

There is one set per interpreter and environment, so writing one also prunes the others that
can no longer be used: those of an environment or interpreter that no longer exists, of an
interpreter this environment has since replaced, and, beyond the most recent few of each
kind, the oldest. Only files this program wrote are removed: named as it names them, owned by
this user, and starting with its header (a temporary file of an interrupted write, by its
name, once it is an hour old)."""

from __future__ import annotations

import contextlib
import importlib.util
import marshal
import os
import re
import stat
import sys
import time
import zlib
from pathlib import Path
from typing import Any

_TAG = "autogradlint-kept-file"  # the header every file starts with, then its interpreter
MOST_PER_KIND = 8  # sets kept of one kind (the interpreters used most recently)
_NAME = re.compile(r"^(?P<kind>[a-z][a-z-]*)-[0-9a-f]{8}-[0-9a-f]{8}\.marshal$")
_TEMPORARY = re.compile(r"^\.[a-z][a-z-]*-[0-9a-f]{8}-[0-9a-f]{8}\.marshal\.\w+$")
_TEMPORARY_AGE_S = 3600
_SUFFIX = len("-0123abcd-0123abcd.marshal")  # the interpreter's part of a name
_EARLIER = ("", "", "")  # what _read_header says of a file written before the header


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


def _header() -> tuple[str, str, str]:
    return (_TAG, sys.prefix, sys.executable)


def load_owned(path: Path) -> object:
    """What the file holds; None when it is missing, unreadable, not marshal data, not one
    this program wrote for this interpreter, or could have been written by someone else."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return None  # someone else could have written it
            if marshal.load(handle) != _header():
                return None
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
                marshal.dump(_header(), out)
                marshal.dump(value, out)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except (OSError, ValueError):
        return  # the next run computes again, nothing else is lost
    prune(path)


def prune(current: Path) -> None:
    """Remove the kept files beside `current` that no interpreter will read again (see the
    module's docstring); a file that cannot be read or removed is left as it is."""
    mine = os.getuid()
    kinds: dict[str, list[tuple[float, str]]] = {}
    now = time.time()
    try:
        entries = list(os.scandir(current.parent))
    except OSError:
        return
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_uid != mine:
            continue
        if _TEMPORARY.match(entry.name):
            if now - info.st_mtime > _TEMPORARY_AGE_S:
                _remove(entry.path)
            continue
        found = _NAME.match(entry.name)
        if found is None or entry.name == current.name:
            continue
        header = _read_header(entry.path)
        if header is None:
            continue  # not one of ours, or not readable: never removed
        if header == _EARLIER:
            _remove(entry.path)  # written before files had a header: read by no version now
            continue
        _tag, prefix, executable = header
        replaced = prefix == sys.prefix and entry.name[-_SUFFIX:] != current.name[-_SUFFIX:]
        if replaced or not os.path.isdir(prefix) or not os.path.exists(executable):
            _remove(entry.path)  # replaced here, or its environment is gone
            continue
        kinds.setdefault(found.group("kind"), []).append((info.st_mtime, entry.path))
    kind = _NAME.match(current.name)
    for name, files in kinds.items():
        # The current file is the newest of its kind: it counts towards the limit.
        room = MOST_PER_KIND - (1 if kind is not None and kind.group("kind") == name else 0)
        for _mtime, path in sorted(files, reverse=True)[max(room, 0) :]:
            _remove(path)


def _read_header(path: str) -> tuple[str, str, str] | None:
    """The header of a kept file; _EARLIER for one of the earlier format (a bare mapping);
    None for anything else."""
    try:
        with open(path, "rb") as handle:
            header = marshal.load(handle)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if isinstance(header, dict):
        return _EARLIER
    if (
        isinstance(header, tuple)
        and len(header) == 3
        and header[0] == _TAG
        and all(isinstance(part, str) for part in header)
    ):
        return header
    return None


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
