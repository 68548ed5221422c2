"""Writing a fixed file the way a careful editor does: never harm it, never lose an edit.

- A symlink is written through: its target gets the fix, the link stays a link. A target
  outside the checked paths (`link.py -> ../outside/victim.py`) is refused unless the caller
  lets writes leave them (`fix --follow-symlinks-outside`).
- A file with several hard links, or one whose owner this process cannot give back to a new
  file, is rewritten in place (after the new bytes sit complete in a temporary file), so every
  link and the owner stay; otherwise a temporary file with the same mode, owner and group
  replaces it atomically.
- A read-only file is refused, not silently rewritten.
- Size, mtime, ctime, inode and bytes are compared with what was read immediately before the
  replace: a file edited meanwhile (even while the temporary file was being synced) is refused.
- SIGINT and SIGTERM are held off during the few system calls that replace a file, so an
  interrupt leaves it old or new and no temporary file behind; after a SIGKILL, the temporary
  file's name (`.<name>.<pid>.agl-tmp`) lets the next run (or `autogradlint clean`) remove it.
- Every OSError becomes a WriteRefused for that file: the run goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model import printable
from ..source_io import decode, detect_encoding, read_regular

TEMP_SUFFIX = ".agl-tmp"
_TEMP_NAME = re.compile(r"^\..+\.(\d+)\.agl-tmp$")


class WriteRefused(Exception):
    """A fixed file could not be written safely; the original is untouched."""


class DecodeFailed(ValueError):
    """The file's bytes are not text in the encoding Python would read it with."""


def decode_source(data: bytes) -> str:
    text = decode(data)
    if isinstance(text, str):
        return text
    raise DecodeFailed(text.message)


@dataclass(frozen=True)
class ReadFile:
    """A file as it was read for fixing: where it really is, its bytes and its stat."""

    path: Path  # as named by the user
    target: Path  # the file itself (symlinks resolved)
    data: bytes
    info: os.stat_result

    @property
    def digest(self) -> bytes:
        return hashlib.blake2b(self.data, digest_size=16).digest()


def read_for_fix(path: Path) -> ReadFile:
    """Raises OSError (NotRegularFile included) when the file cannot be read."""
    target = Path(os.path.realpath(path))
    data, info = read_regular(target)
    return ReadFile(path, target, data, info)


def checked_roots(paths: Sequence[str]) -> tuple[Path, ...]:
    """The real directories the named paths stand for, which writes must stay in: a named
    directory (a symlinked one is where it leads: the user named it), a named file's own."""
    roots = []
    for named in paths:
        path = Path(named)
        roots.append(Path(os.path.realpath(path if path.is_dir() else path.parent)))
    return tuple(roots)


def _refuse_outside(read: ReadFile, roots: Sequence[Path]) -> None:
    target = read.target
    if any(target == root or root in target.parents for root in roots):
        return
    raise WriteRefused(
        f"leads through a symlink to {printable(str(target))}, outside the checked paths; "
        "not written (pass --follow-symlinks-outside to write it)"
    )


def write_fixed(
    read: ReadFile,
    text: str,
    *,
    roots: Sequence[Path] | None = None,
    on_written: Callable[[], None] = lambda: None,
) -> None:
    """Replace the file `read` came from with `text`, in its own encoding (BOM kept).

    `roots`: the directories the file must really be in (checked_roots), None for anywhere.
    `on_written` runs once the file is replaced, before an interrupt held off meanwhile is
    raised: a caller counting written files counts this one even when Ctrl-C came during it."""
    if roots is not None:
        _refuse_outside(read, roots)
    encoding = detect_encoding(read.data)
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise WriteRefused(f"the fixed text cannot be encoded as {encoding}: {exc}") from None
    info = read.info
    if not info.st_mode & 0o222:
        raise WriteRefused("is read-only; not written (make it writable to fix it)")
    target = read.target
    if not os.access(target, os.W_OK):
        raise WriteRefused("is not writable by this user; not written")
    remove_stale_temps(target.parent)
    in_place = info.st_nlink > 1 or not _can_give_back_owner(info)
    try:
        with _interrupts_held():
            if in_place or not os.access(target.parent, os.W_OK | os.X_OK):
                _write_in_place(read, data)
            else:
                _replace(read, data)
            on_written()
    except WriteRefused:
        raise
    except OSError as exc:
        raise WriteRefused(f"cannot write: {exc.strerror or exc}") from None


def _unchanged(read: ReadFile) -> None:
    """Raise unless the file is still exactly what was read (checked right before writing)."""
    try:
        now, info = read_regular(read.target)
    except OSError as exc:
        raise WriteRefused(f"cannot re-read before writing: {exc.strerror or exc}") from None
    before = read.info
    same_stat = (info.st_ino, info.st_size, info.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    if not same_stat or now != read.data:
        raise WriteRefused("changed since it was read; not written (run again)")


def _temp_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}{TEMP_SUFFIX}")


def _write_temp(target: Path, data: bytes, info: os.stat_result) -> Path:
    temp = _temp_path(target)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if info.st_uid != os.geteuid() or info.st_gid != os.getegid():
                os.fchown(handle.fileno(), info.st_uid, info.st_gid)
            os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode))
    except BaseException:
        _unlink_quietly(temp)
        raise
    return temp


def _replace(read: ReadFile, data: bytes) -> None:
    temp = _write_temp(read.target, data, read.info)
    try:
        _unchanged(read)
        os.replace(temp, read.target)
    except BaseException:
        _unlink_quietly(temp)
        raise


def _write_in_place(read: ReadFile, data: bytes) -> None:
    """Hard links and foreign owners: the new bytes go complete into a temporary file first
    (so a full disk fails there, not halfway through the real file), then over the file."""
    temp = _write_temp(read.target, data, read.info)
    try:
        _unchanged(read)
        fd = os.open(read.target, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        _unlink_quietly(temp)


def _can_give_back_owner(info: os.stat_result) -> bool:
    """Whether a new file can get this file's owner and group (root can; others only their
    own files, and groups they belong to)."""
    if os.geteuid() == 0:
        return True
    if info.st_uid != os.geteuid():
        return False
    return info.st_gid == os.getegid() or info.st_gid in os.getgroups()


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Delay SIGINT/SIGTERM until the block is done (only the main thread gets them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


_CLEANED: set[str] = set()


def remove_stale_temps(directory: Path, *, again: bool = False) -> int:
    """Remove temporary files that a killed autogradlint left in `directory` (their process is
    gone), once per directory and run unless `again`; returns how many."""
    key = os.fspath(directory)
    if key in _CLEANED and not again:
        return 0
    _CLEANED.add(key)
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and not _alive(pid):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps_below(root: Path, excluded: Callable[[str], bool]) -> int:
    """remove_stale_temps in `root` and every directory below it that is not excluded
    (symlinked directories are not followed)."""
    removed = 0
    for directory, subdirs, _files in os.walk(root):
        subdirs[:] = [d for d in subdirs if not excluded(d)]
        removed += remove_stale_temps(Path(directory), again=True)
    return removed
