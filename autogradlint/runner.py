"""The file-system side: discovery (.gitignore, exclude), reading, and a process pool."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .config import Config
from .gitignore import IgnoreRule, is_ignored, parse_gitignore
from .model import FileError, FileResult
from .prefilter import (
    ClassDecl,
    can_hold_findings,
    class_declarations,
    function_index,
    subclasses_index,
)
from .settings import Settings
from .source_io import kind_of, read_source

if TYPE_CHECKING:  # the pool and the cache are imported only by the runs that use them
    from .cache import Cache
    from .cache import Entry as CacheEntry
    from .fix.loop import FixOutcome
    from .fix.write import ReadFile

PYTHON_SUFFIXES = (".py", ".pyi")
# One file to analyse: path, bytes, enabled rules, settings, the cross-file Function index.
Job = tuple[str, bytes, frozenset[str], Settings, frozenset[str]]
Progress = Callable[[int], AbstractContextManager[Callable[[], None]]]
# Below this many files to parse (or to read), starting worker processes costs more than it saves.
POOL_THRESHOLD = 16
READ_POOL_THRESHOLD = 400
FILES_PER_ENGINE_LOAD = 3000


@dataclass(frozen=True)
class Discovery:
    files: list[Path]
    errors: list[FileError]


Layers = list[tuple[str, list[IgnoreRule]]]  # (absolute directory, its .gitignore rules)


def _gitignore_layers(directory: str, layers: Layers) -> Layers:
    ignore_file = os.path.join(directory, ".gitignore")
    if os.path.isfile(ignore_file):
        try:
            with open(ignore_file, encoding="utf-8", errors="replace") as handle:
                rules = parse_gitignore(handle.read())
        except OSError:
            return layers
        return [*layers, (directory, rules)]
    return layers


def _ignored(path: str, is_dir: bool, layers: Layers) -> bool:
    decision = False
    for base, rules in layers:
        if not path.startswith(base + os.sep):
            continue
        found = is_ignored(rules, path[len(base) + 1 :].replace(os.sep, "/"), is_dir)
        if found is not None:
            decision = found
    return decision


def _parent_layers(directory: str) -> Layers:
    """.gitignore files between the enclosing git root and `directory` (outermost first)."""
    chain: list[str] = []
    current = directory
    while True:
        chain.append(current)
        if os.path.exists(os.path.join(current, ".git")):
            break
        parent = os.path.dirname(current)
        if parent == current:
            chain = [directory]
            break
        current = parent
    layers: Layers = []
    for parent in reversed(chain):
        layers = _gitignore_layers(parent, layers)
    return layers


def discover(paths: Sequence[str], config: Config, respect_gitignore: bool = True) -> Discovery:
    files: list[Path] = []
    errors: list[FileError] = []
    seen: set[str] = set()

    overlapping = len(paths) > 1  # one root cannot list a file twice (links are not followed)

    def add(path: str) -> None:
        if overlapping:
            key = os.path.abspath(path)
            if key in seen:
                return
            seen.add(key)
        files.append(Path(path))

    for raw in paths:
        if not os.path.lexists(raw):
            errors.append(FileError(raw, "no such file or directory"))
        elif os.path.isfile(raw):
            if raw.endswith(PYTHON_SUFFIXES):
                add(raw)
            else:
                errors.append(FileError(raw, "not a Python file (expected .py or .pyi)"))
        elif os.path.isdir(raw):
            for found in _walk(raw, config, respect_gitignore, errors):
                add(found)
        else:
            try:
                reason = f"not a regular file ({kind_of(os.stat(raw).st_mode)}): not read"
            except OSError as exc:  # ELOOP for a symlink loop, ENOENT for a dangling link
                reason = f"cannot open: {exc.strerror}"
            errors.append(FileError(raw, reason))
    return Discovery(files, errors)


def _walk(
    root: str, config: Config, respect_gitignore: bool, errors: list[FileError]
) -> Iterator[str]:
    """Python files below `root`, as strings (pathlib costs more than the walk itself)."""
    if config.is_excluded(Path(root)) and os.path.abspath(root) != str(config.root.resolve()):
        return
    absolute_root = os.path.abspath(root)
    start_layers = _parent_layers(absolute_root) if respect_gitignore else []
    # os.scandir does not follow symlinked directories here, so a link loop cannot trap us.
    stack: list[tuple[str, str, Layers]] = [(root, absolute_root, start_layers)]
    excluded = config.excludes_name
    while stack:
        directory, absolute, layers = stack.pop()
        if respect_gitignore and directory != root:
            layers = _gitignore_layers(absolute, layers)
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError as exc:
            errors.append(FileError(directory, f"cannot list directory: {exc.strerror}"))
            continue
        subdirs: list[tuple[str, str, Layers]] = []
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)  # from the listing: no syscall
            except OSError:
                continue
            if not is_dir and not name.endswith(PYTHON_SUFFIXES):
                continue
            if excluded(name):
                continue  # parents were checked on the way down: only this name is new
            entry_abs = absolute + os.sep + name
            if layers and _ignored(entry_abs, is_dir, layers):
                continue
            if is_dir:
                subdirs.append((entry.path, entry_abs, layers))
            else:
                try:
                    if entry.is_file():
                        yield entry.path
                except OSError:
                    continue
        stack.extend(reversed(subdirs))


def _lint_job(job: Job) -> FileResult:
    from .engine import lint_source  # workers and warm runs import libcst only when needed

    path, data, enabled, settings, index = job
    return lint_source(data, path, enabled=enabled, settings=settings, known_function_bases=index)


@dataclass
class _Read:
    """What reading one file gives the parent (picklable): its bytes only when a gate admits
    it on its own, so thousands of rejected files never cross a pipe."""

    data: bytes | None = None
    admitted: bool = False
    digest: str | None = None
    decls: list[ClassDecl] | None = None
    error: FileError | None = None


def _read_batch(batch: list[tuple[str, frozenset[str]]], hashed: bool) -> list[_Read]:
    out: list[_Read] = []
    for path, enabled in batch:
        data = read_source(path)
        if isinstance(data, FileError):
            out.append(_Read(error=data))
            continue
        decls = class_declarations(data)
        admitted = can_hold_findings(data, enabled, frozenset(), decls)
        digest = None
        if hashed:  # only the cache needs it
            from .cache import content_hash

            digest = content_hash(data)
        out.append(_Read(data if admitted else None, admitted, digest, decls))
    return out


@dataclass
class _File:
    path: Path
    key: str
    stat: os.stat_result | None = None
    data: bytes | None = None
    digest: str | None = None
    decls: list[ClassDecl] | None = None
    admitted: bool | None = None  # a gate admits it on its own (None: not read this run)
    entry: CacheEntry | None = None  # the cache entry matching this file's stat or bytes
    result: FileResult | None = None


def lint_paths(
    files: Sequence[Path],
    config: Config,
    jobs: int | None = None,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> list[FileResult]:
    """Lint files. Cached results are reused; only files the byte prefilter admits are parsed.

    Many files are read by a pool of workers while this process loads the engine; the
    analysis then runs in a second pool forked after that, so no worker imports libcst."""
    items = [_File(path, os.path.abspath(path) if cache else "") for path in files]
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    hashed = cache is not None
    # 1. Find each file's cache entry by stat (no read); read the others.
    unread: list[_File] = [] if cache is not None else items
    for item in items if cache is not None else ():
        try:
            item.stat = os.stat(item.path)
        except OSError as exc:
            error = FileError(str(item.path), f"cannot read: {exc.strerror or exc}")
            item.result = FileResult(str(item.path), error=error)
            continue
        item.entry = cache.lookup_stat(item.key, item.stat) if cache else None
        if item.entry is None:
            unread.append(item)
    batch = [(str(item.path), config.enabled_for(item.path)) for item in unread]
    large = workers > 1 and len(unread) >= READ_POOL_THRESHOLD
    reads = _read_many(batch, hashed, workers) if large else _read_batch(batch, hashed)
    for item, read in zip(unread, reads, strict=True):
        if read.error is not None:
            item.result = FileResult(str(item.path), error=read.error)
            continue
        item.data, item.admitted, item.digest, item.decls = (
            read.data,
            read.admitted,
            read.digest,
            read.decls,
        )
        if cache is not None:
            item.entry = cache.lookup_hash(item.key, item.digest or "")
    for item in items:
        if item.entry is not None and cache is not None:
            item.decls = list(item.entry.decls)
    # 2. The cross-file Function index, from every file's class declarations.
    index = function_index([item.decls or [] for item in items])
    index_key = ""
    if cache is not None:
        from .cache import index_fingerprint

        index_key = index_fingerprint(index)
    # 3. Reuse results computed under the same index; analyse the rest.
    pending: list[Job] = []
    todo: list[_File] = []
    for item in items:
        if item.result is not None:
            continue
        if item.entry is not None and item.entry.index_key == index_key:
            item.result = item.entry.result_for(str(item.path))
            continue
        enabled = config.enabled_for(item.path)
        if item.admitted is None:  # known from the cache: decide from a fresh read
            read = _read_batch([(str(item.path), enabled)], hashed)[0]
            if read.error is not None:
                item.result = FileResult(str(item.path), error=read.error)
                continue
            item.data, item.admitted, item.digest = read.data, read.admitted, read.digest
        if not item.admitted and subclasses_index(item.decls or [], index):
            data = read_source(item.path)  # a subclass of a Function defined in another file
            if isinstance(data, FileError):
                item.result = FileResult(str(item.path), error=data)
                continue
            item.data = data
        if item.data is None:
            item.result = FileResult(str(item.path))
            continue
        todo.append(item)
        pending.append((str(item.path), item.data, enabled, config.settings, index))
    in_pool = workers > 1 and bool(pending) and (large or len(pending) >= POOL_THRESHOLD)
    analysed = _analyse(pending, workers if in_pool else 1, progress)
    for item, result in zip(todo, analysed, strict=True):
        item.result = result
    if cache is not None:
        for item in items:
            fresh = (
                item.entry is None or item.entry.index_key != index_key or item.admitted is not None
            )
            if fresh and item.stat is not None and item.digest is not None and item.result:
                cache.store(
                    item.key, item.stat, item.digest, item.decls or [], item.result, index_key
                )
        cache.save()
    results_out = [item.result for item in items if item.result is not None]
    results_out.sort(key=lambda r: r.path)
    return results_out


def _read_many(batch: list[tuple[str, frozenset[str]]], hashed: bool, workers: int) -> list[_Read]:
    """Read and gate many files in forked workers while this process loads the engine."""
    from .workers import load_engine, reader_pool

    # Reading ~3,000 files costs about what loading the engine costs here: one reader then
    # finishes alongside it, and more would only compete with it for the cores.
    readers = 1 if len(batch) <= FILES_PER_ENGINE_LOAD else workers
    size = -(-len(batch) // (readers * 4))  # a few batches per reader balance the load
    with reader_pool(readers) as pool:
        futures = [
            pool.submit(_read_batch, batch[i : i + size], hashed)
            for i in range(0, len(batch), size)
        ]
        load_engine()  # while they read; the analysis workers inherit it
        return [read for future in futures for read in future.result()]


def _analyse(pending: list[Job], workers: int, progress: Progress | None) -> list[FileResult]:
    """Lint the jobs in isolated worker processes (a crash or a runaway file costs that file
    only); results in job order."""
    if not pending:
        return []
    from .isolation import Failure, run_isolated
    from .workers import load_engine

    load_engine()  # before forking: the workers inherit it
    # Largest first, so no worker is left with a big file at the end.
    order = sorted(range(len(pending)), key=lambda i: -len(pending[i][1]))
    with progress(len(pending)) if progress else nullcontext(_noop) as tick:
        results = run_isolated(
            _lint_job, pending, workers=min(workers, len(pending)), order=order, tick=tick
        )
    return [
        FileResult(job[0], error=FileError(job[0], f"too complex to analyse: {r.reason}"))
        if isinstance(r, Failure)
        else r
        for job, r in zip(pending, results, strict=True)
    ]


def _noop() -> None:
    return None


@dataclass
class FixJob:
    """One file to fix, as read (symlinks resolved) and decoded, and what fixing gave."""

    read: ReadFile
    text: str | None = None
    outcome: FixOutcome | None = None
    error: FileError | None = None


def _fix_job(job: tuple[str, str, frozenset[str], Settings, frozenset[str], bool]) -> FixOutcome:
    from .fix.loop import fix_text

    path, text, enabled, settings, index, unsafe = job
    return fix_text(
        text, path, unsafe=unsafe, enabled=enabled, settings=settings, known_function_bases=index
    )


def fix_files(
    files: Sequence[Path], config: Config, *, unsafe: bool, jobs: int | None = None
) -> tuple[list[FixJob], list[FileError]]:
    """Fix what the files hold, each in an isolated worker; nothing is written here. Returns
    the files that could hold a finding, with their outcome, and the files that could not be
    read."""
    from .fix.write import DecodeFailed, decode_source, read_for_fix
    from .isolation import Failure, run_isolated
    from .workers import load_engine

    errors: list[FileError] = []
    reads = []
    for path in files:
        try:
            reads.append(read_for_fix(path))
        except OSError as exc:
            errors.append(FileError(str(path), f"cannot read: {exc.strerror or exc}"))
    # The same cross-file Function index `check` uses, so both see the same findings.
    index = function_index([class_declarations(read.data) for read in reads])
    todo: list[FixJob] = []
    for read in reads:
        enabled = config.enabled_for(read.path)
        if not can_hold_findings(read.data, enabled, index):
            continue
        job = FixJob(read)
        try:
            job.text = decode_source(read.data)
        except DecodeFailed as exc:
            job.error = FileError(str(read.path), str(exc))
        todo.append(job)
    pending = [
        (str(j.read.path), j.text, config.enabled_for(j.read.path), config.settings, index, unsafe)
        for j in todo
        if j.text is not None
    ]
    if pending:
        load_engine()
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    outcomes = iter(run_isolated(_fix_job, pending, workers=min(workers, len(pending) or 1)))
    for job in todo:
        if job.text is None:
            continue
        result = next(outcomes)
        if isinstance(result, Failure):
            job.error = FileError(str(job.read.path), f"too complex to analyse: {result.reason}")
        else:
            job.outcome = result
    return todo, errors
