"""The result cache: per file, keyed by path, stat and content hash, under one run key.

The run key covers everything that can change a finding: the tool's own code and rules, and the
effective configuration. Within it, a file whose size and mtime are unchanged is not even read;
one whose bytes hash the same is not re-analysed. The cross-file Function index is recomputed
from cached class declarations, and a result is reused only under the index it was computed with.

Writes go to a temporary file and are renamed into place, so concurrent runs never see a partial
file (the last one to finish wins) and an interrupted run leaves the previous cache intact. A
corrupt cache file is ignored and rebuilt, with a warning.

Only this user's own runs are trusted. The file is named, and its contents sealed, with a keyed
hash of a per-user secret kept outside the tree (cache_key.py): a cache committed to the repo or
copied from another machine is never read, and one edited on disk fails its seal. Fix edits are
not cached at all: a run that reports them computes them from the source. The directory is the
tool's own (cache_dir.py): one that holds other files is refused, and nothing in it that the
tool did not write is ever touched.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .cache_dir import CacheDirRefused, claim, refusal
from .cache_key import KeyUnavailable, seal, user_key
from .model import FileError, FileResult, Finding
from .text.bindings import Binding
from .text.outline import Outline
from .version import __version__
from .view import Details, Signature

FORMAT = 9  # 2: keyed by ctime and inode too; 3: dotted bases; 4: imports in the outline; 5: help;
# 6: `X.apply(` callees in the outline; 7: the C/C++ stamp of results that read it; 8: sealed
# with the per-user secret, named by it, and without fix edits; 9: forward's parameter names
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
    """A result without its fix edits: edits that a run writes into files or reports as safe
    come from the source each time, never from a file on disk (runner._has_what_is_wanted
    re-analyses a file whose fixable findings are asked for with their fixes)."""
    return {
        "findings": [asdict(f) for f in result.findings],
        "error": asdict(result.error) if result.error else None,
        "parsed": result.parsed,
        "depends": result.depends,
    }


def result_from_json(path: str, data: dict[str, Any]) -> FileResult:
    """Raises (KeyError, TypeError, ValueError) on an entry that is not one this code wrote."""
    findings = [Finding(**{**item, "path": path}) for item in data["findings"]]
    error = FileError(**{**data["error"], "path": path}) if data["error"] else None
    return FileResult(
        path,
        findings=findings,
        error=error,
        parsed=bool(data["parsed"]),
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
            (
                str(n),
                Signature(
                    int(sig[0]),
                    int(sig[1]),
                    bool(sig[2]),
                    bool(sig[3]),
                    tuple(str(name) for name in sig[4]),
                    bool(sig[5]),
                ),
            )
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


_SEAL_HEAD = b'{"seal":"'
_SEAL_LEN = 64  # hex digits of the keyed hash
_BODY_HEAD = b'","body":'


def sealed(key: bytes, body: bytes) -> bytes:
    """The file's bytes: valid JSON, `{"seal": keyed hash of body, "body": body}`."""
    return _SEAL_HEAD + seal(key, body).encode() + _BODY_HEAD + body + b"}"


def unsealed(key: bytes, data: bytes) -> bytes | None:
    """The body of a file `sealed` wrote with this key; None for anything else."""
    start = len(_SEAL_HEAD) + _SEAL_LEN + len(_BODY_HEAD)
    if not (data.startswith(_SEAL_HEAD) and data[start - len(_BODY_HEAD) : start] == _BODY_HEAD):
        return None
    body = data[start:-1]
    given = data[len(_SEAL_HEAD) : len(_SEAL_HEAD) + _SEAL_LEN]
    if not data.endswith(b"}") or not hmac.compare_digest(given, seal(key, body).encode()):
        return None
    return body


class Cache:
    """One run key's cache file: load at start, update in memory, save atomically at the end.

    Raises CacheDirRefused when `directory` exists and holds files the tool did not write.
    Without a trustworthy per-user secret it neither reads nor writes (`warning` says why)."""

    def __init__(self, directory: Path, config_fingerprint: str) -> None:
        reason = refusal(directory)
        if reason is not None:
            raise CacheDirRefused(reason)
        self.directory = directory
        self.raw: dict[str, Any] = {}
        self.entries: dict[str, Entry] = {}
        self.dirty = False
        # Which set of files the last run saw: when it is the same and none changed, every
        # file's project view is what it was, and the index need not be built at all.
        self.files_key = ""
        self.warning: str | None = None  # a cache file ignored, or the cache off: why
        self.key: bytes | None = None
        try:
            self.key = user_key()
        except KeyUnavailable as exc:
            self.warning = f"the result cache is off: {exc}"
        run_key = f"{engine_fingerprint()}:{config_fingerprint}".encode()
        name = seal(self.key, run_key) if self.key is not None else "off"
        self.file = directory / f"v{FORMAT}-{name[:24]}.json"
        self._load()

    def _load(self) -> None:
        if self.key is None:
            return
        try:
            data = self.file.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            self.warning = f"{self.file}: cannot read ({exc.strerror or exc}): ignored, rebuilt"
            return
        body = unsealed(self.key, data)
        if body is None:
            self.warning = f"{self.file}: not sealed by this user's runs: ignored and rebuilt"
            return
        try:
            raw = json.loads(body)
            if raw.get("format") != FORMAT or not isinstance(raw.get("files"), dict):
                raise ValueError("not this version's cache")
            self.raw = raw["files"]
            self.files_key = str(raw.get("files_key", ""))
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:
            # RecursionError: JSON nested thousands deep must cost a rebuild, not every run
            self.raw = {}
            reason = "nested too deeply" if isinstance(exc, RecursionError) else "unreadable"
            self.warning = f"{self.file}: {reason}: ignored and rebuilt"

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
        if self.key is None or (not self.dirty and self.file.exists()):
            return  # a warm run that changed nothing writes nothing
        try:
            claim(self.directory)  # checked again: the directory may have changed meanwhile
            files = dict(self.raw)  # entries not looked at this run stay as they were
            files.update((key, entry.to_json()) for key, entry in self.entries.items())
            body = json.dumps(
                {"format": FORMAT, "files_key": self.files_key, "files": files},
                separators=(",", ":"),
            ).encode()
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(sealed(self.key, body))
                os.replace(tmp, self.file)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except (OSError, CacheDirRefused):
            pass  # a read-only tree, or a directory that is no longer ours: no cache this time
