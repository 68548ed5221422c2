"""What a file's result depends on beyond its own bytes: the project's C/C++ sources and the
other Python files whose functions a check followed. A cached result stays valid while they
are unchanged; each is stat'ed at most once per run, and only when such a result is cached."""

from __future__ import annotations

import os


def encode(natives: dict[str, str], files: set[str]) -> str:
    """`natives`: native root -> the stamp of its sources when read; `files`: Python files."""
    if not natives and not files:
        return ""
    entries = [["native", root, stamp] for root, stamp in sorted(natives.items())]
    entries += [["file", path, _file_stamp(path)] for path in sorted(files)]
    import json  # only a cached run records what a result depends on

    return json.dumps(entries, separators=(",", ":"))


class Current:
    """Checks encoded dependencies against the disk, memoised for one run."""

    def __init__(self, extra: tuple[str, ...]) -> None:
        self.extra = extra
        self.memo: dict[tuple[str, str], str] = {}

    def holds(self, encoded: str) -> bool:
        if not encoded:
            return True
        try:
            import json

            entries = json.loads(encoded)
            return all(self._now(kind, key) == stamp for kind, key, stamp in entries)
        except (ValueError, TypeError):
            return False  # not an encoding this code wrote: analyse again

    def _now(self, kind: str, key: str) -> str:
        if (kind, key) not in self.memo:
            if kind == "native":
                from ..native.index import native_files, stamp

                self.memo[kind, key] = stamp(native_files(key, self.extra))
            else:
                self.memo[kind, key] = _file_stamp(key)
        return self.memo[kind, key]


def _file_stamp(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return "missing"
    return f"{info.st_mtime_ns}:{info.st_size}"
