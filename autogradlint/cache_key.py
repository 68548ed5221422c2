"""The per-user secret that authenticates the result cache, kept outside every project tree.

A cache file is named and sealed with a keyed hash of this secret, so a cache copied from
another machine, written by another user, or committed to the repository is never even
opened, and one edited on disk fails its seal: a cached result is only ever what this user's
own runs computed. The secret lives in the user cache directory (`$XDG_CACHE_HOME` or
`~/.cache`, beside the code cache of runtime/kept_files.py), created with mode 0600, and is
used only when this user owns it and nobody else can read or write it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

KEY_BYTES = 32


class KeyUnavailable(Exception):
    """No trustworthy secret: the run goes on without the result cache (the message says why)."""


def key_path() -> Path | None:
    """Where this user's secret lives; None without a home to keep it in."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None
    return Path(base) / "autogradlint" / "cache-key"


def user_key() -> bytes:
    """This user's secret, created on first use. Raises KeyUnavailable."""
    path = key_path()
    if path is None:
        raise KeyUnavailable("no user cache directory (set HOME or XDG_CACHE_HOME)")
    return _key_at(path)


def _key_at(path: Path) -> bytes:
    # Read each time a cache is opened (one small file): a secret made unsafe meanwhile counts.
    key = _read_private(path)
    if key is None:
        _create(path)
        key = _read_private(path)
    if key is None:  # pragma: no cover - created just now, then removed by someone else
        raise KeyUnavailable(f"{path}: vanished after it was created")
    return key


def _read_private(path: Path) -> bytes | None:
    """The secret, None when there is none yet; KeyUnavailable when it cannot be trusted."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KeyUnavailable(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise KeyUnavailable(f"{path}: not a file of this user; remove it to start afresh")
        if info.st_mode & 0o077:
            raise KeyUnavailable(
                f"{path}: other users can read or write it (mode {stat.S_IMODE(info.st_mode):o}); "
                "remove it to start afresh"
            )
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise KeyUnavailable(f"{path}: damaged; remove it to start afresh")
    return data


def _create(path: Path) -> None:
    """Write a fresh secret to a private temporary file, then link it into place: a run racing
    this one either links first (and both use its secret) or finds the complete file."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(os.urandom(KEY_BYTES))
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another run made one first: use that
        finally:
            try:
                os.unlink(temporary)
            except OSError:
                pass
    except OSError as exc:
        raise KeyUnavailable(f"{path}: cannot create: {exc.strerror or exc}") from None


def seal(key: bytes, data: bytes) -> str:
    """The keyed hash of `data`: only a holder of `key` can produce it."""
    return hashlib.blake2b(data, key=key, digest_size=32).hexdigest()
