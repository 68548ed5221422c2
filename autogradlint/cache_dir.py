"""The result cache's directory is autogradlint's own, and nothing else in it is ever touched.

autogradlint marks a directory it makes its cache with a signature file and a `CACHEDIR.TAG`
(https://bford.info/cachedir/, so backup tools skip it) and a `.gitignore` of `*`, each created
only where no file of that name exists. A directory that exists and holds files autogradlint did
not write is refused (`--cache-dir .` must not turn the project's `.gitignore` into `*`), and
`clean` removes only autogradlint's own entries and markers, and only from a directory that
carries its signature (`clean --cache-dir src` must not delete the sources).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

SIGNATURE_NAME = "autogradlint.signature"
SIGNATURE = (
    "autogradlint result cache\n"
    "# autogradlint made this directory its cache. `autogradlint clean` removes the files it\n"
    "# wrote here and nothing else.\n"
)
TAG_NAME = "CACHEDIR.TAG"
TAG_LINE = "Signature: 8a477f597d28d172789f06886806bc55\n"
TAG = TAG_LINE + (
    "# This file is a cache directory tag created by autogradlint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
GITIGNORE = "*\n"
MARKERS = {SIGNATURE_NAME: SIGNATURE, TAG_NAME: TAG, ".gitignore": GITIGNORE}
# Earlier versions wrote no signature file: a directory of only their files is still ours.
_LEGACY_MARKERS = {TAG_NAME: TAG_LINE, ".gitignore": GITIGNORE}
# What the cache writes itself: result files (named by run key) and their temporary files.
ENTRY = re.compile(r"v\d+-[0-9a-f]{24}\.json|\.tmp-[A-Za-z0-9_]+")


class CacheDirRefused(Exception):
    """The directory is not autogradlint's to write in or clean; nothing was changed."""


def refusal(directory: Path) -> str | None:
    """Why `directory` cannot be the cache (None: it can; absent or empty counts as usable)."""
    if not os.path.lexists(directory):
        return None
    if not directory.is_dir():
        return f"{directory}: cannot be the cache directory: it exists and is not a directory"
    foreign = _foreign(directory)
    if not foreign:
        return None
    shown = ", ".join(sorted(foreign)[:5]) + (", ..." if len(foreign) > 5 else "")
    return (
        f"{directory}: not an autogradlint cache directory: it holds files autogradlint did not "
        f"write ({shown}); name a new or empty directory with --cache-dir"
    )


def claim(directory: Path) -> None:
    """Make `directory` the cache: create it and its missing markers. Never overwrites a file;
    raises CacheDirRefused (nothing written) for a directory that holds other files, and
    OSError when the directory cannot be written."""
    reason = refusal(directory)
    if reason is not None:
        raise CacheDirRefused(reason)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in MARKERS.items():
        _create_new(directory / name, text)


def clean(directory: Path) -> tuple[int, list[str]]:
    """Remove the cache's own files from `directory`, then the directory if that empties it.
    Returns (files removed, names kept because autogradlint did not write them). Raises
    CacheDirRefused, removing nothing, unless the directory carries the signature (or holds
    only an earlier version's files)."""
    if not directory.is_dir():
        return 0, []
    if _foreign(directory):
        raise CacheDirRefused(
            f"{directory}: not an autogradlint cache directory (no {SIGNATURE_NAME}, and it "
            "holds files autogradlint did not write); nothing removed"
        )
    removed, kept = 0, []
    for name, is_file in _listing(directory).items():
        if not _own(directory / name, is_file):
            kept.append(name)
            continue
        try:
            os.unlink(directory / name)
            removed += 1
        except OSError:
            kept.append(name)
    if removed and not kept:  # only a directory that was the cache: never one merely named
        with contextlib.suppress(OSError):
            directory.rmdir()
    return removed, sorted(kept)


def _listing(directory: Path) -> dict[str, bool]:
    """Each entry's name, and whether it is a regular file (a symlink is not)."""
    with os.scandir(directory) as entries:
        return {entry.name: entry.is_file(follow_symlinks=False) for entry in entries}


def _signed(directory: Path, names: dict[str, bool]) -> bool:
    return names.get(SIGNATURE_NAME, False) and _is_marker(directory / SIGNATURE_NAME, MARKERS)


def _foreign(directory: Path) -> list[str]:
    """The entries of `directory` that autogradlint did not write. In a directory with the
    signature, none counts: whatever else someone put there is left alone, not refused."""
    names = _listing(directory)
    if _signed(directory, names):
        return []
    return [name for name, is_file in names.items() if not _own(directory / name, is_file)]


def _own(path: Path, is_file: bool) -> bool:
    """Whether `path` is a file autogradlint writes in its cache, with the text it writes."""
    return is_file and bool(
        ENTRY.fullmatch(path.name) or _is_marker(path, MARKERS) or _is_marker(path, _LEGACY_MARKERS)
    )


def _is_marker(path: Path, markers: dict[str, str]) -> bool:
    """Whether `path` is one of `markers` with exactly the text autogradlint writes there."""
    expected = markers.get(path.name)
    if expected is None:
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(len(expected) + 1) == expected.encode()
    except OSError:
        return False


def _create_new(path: Path, text: str) -> None:
    """Write a marker that is not there yet; one that is (ours, or a file put there since) is
    left as it is."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
