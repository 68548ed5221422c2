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
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from . import __version__
from .analysis.bindings import Binding
from .model import FileError, FileResult, Finding, FixSuggestion, LineEdit
from .outline import Outline
from .project import Details, Signature

FORMAT = 7  # 2: keyed by ctime and inode too; 3: dotted bases; 4: imports in the outline; 5: help;
# 6: `X.apply(` callees in the outline; 7: the C/C++ stamp of results that read it
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


def files_key(keys: list[str]) -> str:
    """A fingerprint of a set of files (their absolute paths)."""
    return hashlib.blake2b("\n".join(sorted(keys)).encode(), digest_size=16).hexdigest()


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def result_to_json(result: FileResult) -> dict[str, Any]:
    return {
        "findings": [asdict(f) for f in result.findings],
        "error": asdict(result.error) if result.error else None,
        "parsed": result.parsed,
        "fixes": [asdict(f) for f in result.fixes],
        "depends": result.depends,
    }


def result_from_json(path: str, data: dict[str, Any]) -> FileResult:
    """Raises (KeyError, TypeError, ValueError) on an entry that is not one this code wrote."""
    findings = [Finding(**{**item, "path": path}) for item in data["findings"]]
    error = FileError(**{**data["error"], "path": path}) if data["error"] else None
    fixes = [
        FixSuggestion(
            **{
                **item,
                "edits": tuple(
                    LineEdit(int(e["start"]), int(e["end"]), tuple(map(str, e["lines"])))
                    for e in item["edits"]
                ),
            }
        )
        for item in data.get("fixes", [])
    ]
    return FileResult(
        path,
        findings=findings,
        error=error,
        parsed=bool(data["parsed"]),
        fixes=fixes,
        depends=str(data.get("depends", "")),
    )


@dataclass(frozen=True)
class Entry:
    """What the cache knows of one file. The stat key has the inode and the ctime as well as
    size and mtime: an edit that keeps the size and restores the mtime still changes the ctime
    (which no user call can set), and a file replaced by another has another inode."""

    mtime_ns: int
    size: int
    ctime_ns: int
    inode: int
    digest: str
    outline: Outline  # what its bytes say: class statements, import aliases, direct callees
    result: FileResult | None  # None: read for the project index, never analysed
    index_key: str  # the project view its result was computed under
    details: Details = Details()  # imports and forward signatures, once the index asked

    def result_for(self, path: str) -> FileResult:
        """The cached result, reported under the path this run names the file by."""
        result = self.result
        assert result is not None
        return FileResult(
            path,
            findings=[replace(f, path=path) for f in result.findings],
            error=replace(result.error, path=path) if result.error else None,
            parsed=result.parsed,
            fixes=list(result.fixes),
            depends=result.depends,
        )

    def matches(self, info: os.stat_result) -> bool:
        return (self.mtime_ns, self.size, self.ctime_ns, self.inode) == (
            info.st_mtime_ns,
            info.st_size,
            info.st_ctime_ns,
            info.st_ino,
        )

    def to_json(self) -> list[Any]:
        return [
            self.mtime_ns,
            self.size,
            self.ctime_ns,
            self.inode,
            self.digest,
            [[name, list(bases), flag] for name, bases, flag in self.outline.decls],
            [list(pair) for pair in self.outline.aliases],
            list(self.outline.callees),
            result_to_json(self.result) if self.result is not None else None,
            self.index_key,
            _details_to_json(self.details),
        ]

    @classmethod
    def from_json(cls, path: str, raw: Any) -> Entry | None:
        """None for anything malformed: a foreign or damaged entry is a miss, never an error."""
        try:
            mtime, size, ctime, inode, digest, decls, aliases, calls, result, index_key, details = (
                raw
            )
            entry = cls(
                int(mtime),
                int(size),
                int(ctime),
                int(inode),
                str(digest),
                Outline(
                    tuple((str(n), tuple(str(b) for b in bases), bool(f)) for n, bases, f in decls),
                    tuple((str(a), str(b)) for a, b in aliases),
                    tuple(str(c) for c in calls),
                ),
                result_from_json(path, result) if result is not None else None,
                str(index_key),
                _details_from_json(details),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if not all(
            isinstance(v, (int, str)) for v in (mtime, size, ctime, inode, digest, index_key)
        ):
            return None
        return entry


def _details_to_json(details: Details) -> Any:
    imports = None if details.imports is None else [list(b) for b in details.imports]
    signatures = (
        None if details.signatures is None else [[n, list(sig)] for n, sig in details.signatures]
    )
    return [imports, signatures]


def _details_from_json(raw: Any) -> Details:
    imports, signatures = raw
    return Details(
        None if imports is None else _bindings_from_json(imports),
        None
        if signatures is None
        else tuple(
            (str(n), Signature(int(sig[0]), int(sig[1]), bool(sig[2]), bool(sig[3])))
            for n, sig in signatures
        ),
    )


def _bindings_from_json(raw: Any) -> tuple[Binding, ...]:
    bindings: list[Binding] = []
    for binding in raw:
        if binding[0] == "import" and len(binding) == 3:
            bindings.append(("import", str(binding[1]), _optional(binding[2])))
        elif binding[0] == "from" and len(binding) == 4:
            bindings.append(("from", str(binding[1]), str(binding[2]), _optional(binding[3])))
        else:
            raise ValueError("not an import binding")
    return tuple(bindings)


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


class Cache:
    """One run key's cache file: load at start, update in memory, save atomically at the end."""

    def __init__(self, directory: Path, config_fingerprint: str) -> None:
        self.directory = directory
        key = hashlib.sha256(f"{engine_fingerprint()}:{config_fingerprint}".encode()).hexdigest()
        self.file = directory / f"v{FORMAT}-{key[:24]}.json"
        self.raw: dict[str, Any] = {}
        self.entries: dict[str, Entry] = {}
        self.dirty = False
        # Which set of files the last run saw: when it is the same and none changed, every
        # file's project view is what it was, and the index need not be built at all.
        self.files_key = ""
        self._load()

    def _load(self) -> None:
        try:
            raw = json.loads(self.file.read_text(encoding="utf-8"))
            if raw.get("format") != FORMAT or not isinstance(raw.get("files"), dict):
                return
            self.raw = raw["files"]
            self.files_key = str(raw.get("files_key", ""))
        except (OSError, ValueError, TypeError, AttributeError):
            self.raw = {}  # missing or corrupt: start afresh

    def get(self, key: str) -> Entry | None:
        """The entry for a file, validated on first use (most runs use few of them)."""
        entry = self.entries.get(key)
        if entry is None and key in self.raw:
            entry = Entry.from_json(key, self.raw.pop(key))
            if entry is not None:
                self.entries[key] = entry
            else:
                self.dirty = True  # drop the bad entry from the file on save
        return entry

    def lookup_stat(self, key: str, info: os.stat_result) -> Entry | None:
        entry = self.get(key)
        return entry if entry is not None and entry.matches(info) else None

    def lookup_hash(self, key: str, digest: str) -> Entry | None:
        entry = self.get(key)
        return entry if entry is not None and entry.digest == digest else None

    def store(
        self,
        key: str,
        info: os.stat_result,
        digest: str,
        outline: Outline,
        result: FileResult | None,
        index_key: str,
        details: Details = Details(),  # noqa: B008 - frozen, shared safely
    ) -> None:
        self.dirty = True
        self.entries[key] = Entry(
            info.st_mtime_ns,
            info.st_size,
            info.st_ctime_ns,
            info.st_ino,
            digest,
            outline,
            result,
            index_key,
            details,
        )

    def save(self) -> None:
        if not self.dirty and self.file.exists():
            return  # a warm run that changed nothing writes nothing
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tag = self.directory / "CACHEDIR.TAG"
            if not tag.exists():
                tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
                (self.directory / ".gitignore").write_text("*\n")
            files = dict(self.raw)  # entries not looked at this run stay as they were
            files.update((key, entry.to_json()) for key, entry in self.entries.items())
            payload = json.dumps(
                {"format": FORMAT, "files_key": self.files_key, "files": files},
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
