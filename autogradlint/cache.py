"""The result cache: per file, keyed by path, stat and content hash, under one run key.

The run key covers everything that can change a finding: the tool's own code and rules, and the
effective configuration. Within it, a file whose size and mtime are unchanged is not even read;
one whose bytes hash the same is not re-analysed. The cross-file Function index is recomputed
from cached class declarations, and a result is reused only under the index it was computed with.

Writes go to a temporary file and are renamed into place, so concurrent runs never see a partial
file (the last one to finish wins) and an interrupted run leaves the previous cache intact. A
corrupt or foreign cache file is ignored and rebuilt.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import __version__
from .model import FileError, FileResult, Finding
from .prefilter import ClassDecl

FORMAT = 1
DIR_NAME = ".autogradlint_cache"


@functools.cache
def engine_fingerprint() -> str:
    """A hash of the tool version and of every source and rule file it runs with."""
    digest = hashlib.sha256(f"{__version__}:{FORMAT}".encode())
    package = Path(__file__).resolve().parent
    from .meta import rules_dir

    files = sorted(package.rglob("*.py")) + sorted(rules_dir().glob("*.yaml"))
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def index_fingerprint(index: frozenset[str]) -> str:
    """Results depend on the cross-file Function index: each entry records the one it used."""
    return hashlib.blake2b("\n".join(sorted(index)).encode(), digest_size=8).hexdigest()


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def result_to_json(result: FileResult) -> dict[str, Any]:
    return {
        "findings": [asdict(f) for f in result.findings],
        "error": asdict(result.error) if result.error else None,
        "parsed": result.parsed,
    }


def result_from_json(path: str, data: dict[str, Any]) -> FileResult:
    findings = [Finding(**{**item, "path": path}) for item in data["findings"]]
    error = FileError(**{**data["error"], "path": path}) if data["error"] else None
    return FileResult(path, findings=findings, error=error, parsed=bool(data["parsed"]))


class Cache:
    """One run key's cache file: load at start, update in memory, save atomically at the end."""

    def __init__(self, directory: Path, config_fingerprint: str) -> None:
        self.directory = directory
        key = hashlib.sha256(f"{engine_fingerprint()}:{config_fingerprint}".encode()).hexdigest()
        self.file = directory / f"v{FORMAT}-{key[:24]}.json"
        self.entries: dict[str, list[Any]] = {}
        self.dirty = False
        self._load()

    def _load(self) -> None:
        try:
            raw = json.loads(self.file.read_text(encoding="utf-8"))
            if raw.get("format") != FORMAT or not isinstance(raw.get("files"), dict):
                return
            self.entries = raw["files"]
        except (OSError, ValueError, TypeError, AttributeError):
            self.entries = {}  # missing or corrupt: start afresh

    # entry: [mtime_ns, size, content_hash, class declarations, result json, index fingerprint]
    def lookup_stat(self, key: str, stat: os.stat_result) -> list[Any] | None:
        entry = self.entries.get(key)
        if entry and entry[0] == stat.st_mtime_ns and entry[1] == stat.st_size:
            return entry
        return None

    def lookup_hash(self, key: str, digest: str) -> list[Any] | None:
        entry = self.entries.get(key)
        if entry and entry[2] == digest:
            return entry
        return None

    def store(
        self,
        key: str,
        stat: os.stat_result,
        digest: str,
        decls: list[ClassDecl],
        result: FileResult,
        index_key: str,
    ) -> None:
        self.dirty = True
        self.entries[key] = [
            stat.st_mtime_ns,
            stat.st_size,
            digest,
            [[d[0], list(d[1]), d[2]] for d in decls],
            result_to_json(result),
            index_key,
        ]

    @staticmethod
    def declarations(entry: list[Any]) -> list[ClassDecl]:
        return [(name, tuple(bases), bool(flag)) for name, bases, flag in entry[3]]

    def save(self) -> None:
        if not self.dirty and self.file.exists():
            return  # a warm run that changed nothing writes nothing
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tag = self.directory / "CACHEDIR.TAG"
            if not tag.exists():
                tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
                (self.directory / ".gitignore").write_text("*\n")
            payload = json.dumps(
                {"format": FORMAT, "files": self.entries},
                separators=(",", ":"),
            )
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(payload)
                os.replace(tmp, self.file)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            pass  # a read-only tree: run without a cache rather than fail


def clean(directory: Path) -> int:
    """Remove the cache directory; returns the number of files removed."""
    import shutil

    if not directory.is_dir():
        return 0
    count = sum(1 for p in directory.rglob("*") if p.is_file())
    shutil.rmtree(directory, ignore_errors=True)
    return count
