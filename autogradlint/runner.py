"""The file-system side: discovery (.gitignore, exclude), reading, and a process pool."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .checks import Settings
from .config import Config
from .engine import can_hold_findings, lint_source
from .gitignore import IgnoreRule, is_ignored, parse_gitignore
from .model import FileError, FileResult

PYTHON_SUFFIXES = (".py", ".pyi")
# Below this many files to parse, starting worker processes costs more than it saves.
POOL_THRESHOLD = 16


@dataclass(frozen=True)
class Discovery:
    files: list[Path]
    errors: list[FileError]


def _gitignore_layers(
    directory: Path, layers: list[tuple[Path, list[IgnoreRule]]]
) -> list[tuple[Path, list[IgnoreRule]]]:
    ignore_file = directory / ".gitignore"
    if ignore_file.is_file():
        try:
            rules = parse_gitignore(ignore_file.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            return layers
        return [*layers, (directory, rules)]
    return layers


def _ignored(path: Path, is_dir: bool, layers: list[tuple[Path, list[IgnoreRule]]]) -> bool:
    decision = False
    for base, rules in layers:
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        found = is_ignored(rules, rel, is_dir)
        if found is not None:
            decision = found
    return decision


def _parent_layers(directory: Path) -> list[tuple[Path, list[IgnoreRule]]]:
    """.gitignore files between the enclosing git root and `directory` (outermost first)."""
    chain: list[Path] = []
    for parent in (directory, *directory.parents):
        chain.append(parent)
        if (parent / ".git").exists():
            break
    else:
        chain = [directory]
    layers: list[tuple[Path, list[IgnoreRule]]] = []
    for parent in reversed(chain):
        layers = _gitignore_layers(parent, layers)
    return layers


def discover(paths: Sequence[str], config: Config, respect_gitignore: bool = True) -> Discovery:
    files: list[Path] = []
    errors: list[FileError] = []
    seen: set[Path] = set()

    def add(path: Path) -> None:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            files.append(path)

    for raw in paths:
        path = Path(raw)
        if not path.exists():
            errors.append(FileError(raw, "no such file or directory"))
        elif path.is_file():
            if path.suffix in PYTHON_SUFFIXES:
                add(path)
            else:
                errors.append(FileError(raw, "not a Python file (expected .py or .pyi)"))
        elif path.is_dir():
            for found in _walk(path, config, respect_gitignore, errors):
                add(found)
        else:
            errors.append(FileError(raw, "not a regular file or directory"))
    return Discovery(files, errors)


def _walk(
    root: Path, config: Config, respect_gitignore: bool, errors: list[FileError]
) -> Iterator[Path]:
    if config.is_excluded(root) and root.resolve() != config.root.resolve():
        return
    absolute_root = Path(os.path.abspath(root))
    start_layers = _parent_layers(absolute_root) if respect_gitignore else []
    # (directory, gitignore layers) pairs; os.scandir does not follow symlinked directories
    # here, so a symlink loop cannot trap the walk.
    stack: list[tuple[Path, list[tuple[Path, list[IgnoreRule]]]]] = [(root, start_layers)]
    while stack:
        directory, layers = stack.pop()
        if respect_gitignore and directory != root:
            layers = _gitignore_layers(Path(os.path.abspath(directory)), layers)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            errors.append(FileError(str(directory), f"cannot list directory: {exc.strerror}"))
            continue
        subdirs: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file()
            except OSError:
                continue
            # Parents were already checked on the way down: only this entry's name is new.
            if config.excludes_name(entry.name):
                continue
            if (
                respect_gitignore
                and layers
                and _ignored(Path(os.path.abspath(entry.path)), is_dir, layers)
            ):
                continue
            if is_dir:
                subdirs.append(path)
            elif is_file and path.suffix in PYTHON_SUFFIXES:
                yield path
        stack.extend((sub, layers) for sub in reversed(subdirs))


_CLASS_RE = re.compile(rb"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.M)
_FUNCTION_BASES = {"Function", "InplaceFunction"}


def function_index(sources: Sequence[bytes]) -> frozenset[str]:
    """Names of the project's autograd.Function classes, across files, from bytes alone.

    Seeds are classes whose base is spelled `...Function` in a file that mentions autograd;
    any class whose base names a known Function joins them (to a fixpoint), so a subclass of
    `MyBase` in one file is recognised when `MyBase(torch.autograd.Function)` is in another.
    """
    bases_of: dict[str, set[str]] = {}
    names: set[str] = set()
    for data in sources:
        if b"class" not in data:
            continue
        autograd = b"autograd" in data
        for match in _CLASS_RE.finditer(data):
            name = match.group(1).decode("ascii", "replace")
            bases = {
                b.strip().rsplit(b".", 1)[-1].decode("ascii", "replace")
                for b in match.group(2).split(b",")
                if b.strip() and b"=" not in b
            }
            bases_of.setdefault(name, set()).update(bases)
            if autograd and bases & _FUNCTION_BASES:
                names.add(name)
    changed = True
    while changed:
        changed = False
        for name, bases in bases_of.items():
            if name not in names and bases & names:
                names.add(name)
                changed = True
    return frozenset(names)


def _lint_job(job: tuple[str, bytes, frozenset[str], Settings, frozenset[str]]) -> FileResult:
    path, data, enabled, settings, index = job
    return lint_source(data, path, enabled=enabled, settings=settings, known_function_bases=index)


def read_source(path: Path) -> bytes | FileError:
    try:
        return path.read_bytes()
    except IsADirectoryError:
        return FileError(str(path), "is a directory")
    except OSError as exc:
        return FileError(str(path), f"cannot read: {exc.strerror or exc}")


def lint_paths(files: Sequence[Path], config: Config, jobs: int | None = None) -> list[FileResult]:
    """Lint files; only those the byte prefilter admits are parsed, in a pool when many."""
    results: list[FileResult] = []
    pending: list[tuple[str, bytes, frozenset[str], Settings, frozenset[str]]] = []
    contents: list[tuple[Path, bytes]] = []
    for path in files:
        data = read_source(path)
        if isinstance(data, FileError):
            results.append(FileResult(str(path), error=data))
            continue
        contents.append((path, data))
    index = function_index([data for _, data in contents])
    for path, data in contents:
        enabled = config.enabled_for(path)
        if not can_hold_findings(data, enabled, index):
            results.append(FileResult(str(path)))
            continue
        pending.append((str(path), data, enabled, config.settings, index))
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if workers > 1 and len(pending) >= POOL_THRESHOLD:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results.extend(pool.map(_lint_job, pending, chunksize=4))
    else:
        results.extend(_lint_job(job) for job in pending)
    results.sort(key=lambda r: r.path)
    return results


class WriteRefused(Exception):
    """A fixed file could not be written safely; the original is untouched."""


def detect_encoding(data: bytes) -> str:
    """The encoding Python would read the file with (BOM, then coding cookie, else UTF-8)."""
    import io
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return encoding


def write_atomic(path: Path, original: bytes, text: str) -> None:
    """Write `text` in the file's own encoding (BOM kept), atomically, keeping permissions.

    Refuses when the file changed since `original` was read, so a concurrent edit is never lost.
    """
    import tempfile

    encoding = detect_encoding(original)
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise WriteRefused(
            f"{path}: the fixed text cannot be encoded as {encoding}: {exc}"
        ) from None
    try:
        current = path.read_bytes()
        mode = path.stat().st_mode
    except OSError as exc:
        raise WriteRefused(f"{path}: cannot re-read before writing: {exc.strerror}") from None
    if current != original:
        raise WriteRefused(f"{path}: changed since it was read; not written (run again)")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".agl-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        # Interrupted or failed: remove the temporary file, leave the original as it was.
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
