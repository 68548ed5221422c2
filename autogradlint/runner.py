"""The file-system side: discovery (.gitignore, exclude), reading, and a process pool."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .analysis.dependencies import Current
from .checks.admission import can_hold_findings, gate_table
from .checks.gates import Memo, declarations
from .config import Config
from .engine.request import LintRequest
from .gitignore import IgnoreRule, is_ignored, parse_gitignore
from .model import FileError, FileResult
from .source_io import decode_problem, kind_of, read_source
from .text.functions import may_name_function
from .text.outline import Outline, module_imports, outline
from .view import EMPTY, Details, FileView, Record, build_index, record_of, view_key

if TYPE_CHECKING:  # the pool and the cache are imported only by the runs that use them
    from .cache import Cache
    from .cache import Entry as CacheEntry
    from .engine.fix_loop import FixOutcome
    from .fix.write import ReadFile

PYTHON_SUFFIXES = (".py", ".pyi")
Progress = Callable[[int], AbstractContextManager[Callable[[], None]]]
# Below this many files to parse (or to read), starting worker processes costs more than it saves.
POOL_THRESHOLD = 16
READ_POOL_THRESHOLD = 400
FILES_PER_ENGINE_LOAD = 1500


@dataclass(frozen=True)
class Discovery:
    # Paths as found, under the prefix they were named by: a `Path` per file costs ~6 us to
    # build and ~2 us to turn back into the string every step below uses (~95 ms of serial
    # start-up over the corpus's 11,000 files).
    files: list[str]
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
    files: list[str] = []
    errors: list[FileError] = []
    seen: set[str] = set()

    overlapping = len(paths) > 1  # one root cannot list a file twice (links are not followed)

    def add(path: str) -> None:
        if overlapping:
            key = os.path.abspath(path)
            if key in seen:
                return
            seen.add(key)
        files.append(path)

    for raw in paths:
        if not os.path.lexists(raw):
            errors.append(FileError(raw, "no such file or directory"))
        elif os.path.isfile(raw):
            if raw.endswith(PYTHON_SUFFIXES):
                add(str(Path(raw)))
            else:
                errors.append(FileError(raw, "not a Python file (expected .py or .pyi)"))
        elif os.path.isdir(raw):
            # Spelled as pathlib spells them (`./a//b/` is `a/b`): the walk joins plain entry
            # names to the root, so only the root needs it, and `.` is no prefix at all.
            base = str(Path(raw))
            for found in _walk(base, config, respect_gitignore, errors):
                add(found[2:] if base == "." else found)
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
    # A directory named on the command line is walked even inside an excluded one (a package
    # in site-packages, say), as ruff does; exclusions apply to what the walk finds below it.
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


def _lint_job(request: LintRequest) -> FileResult:
    from .engine.door import lint  # workers and warm runs import libcst only when needed

    return lint(request)


@dataclass
class _Read:
    """What reading one file gives the parent (picklable): its bytes only when a gate admits
    it on its own, so thousands of rejected files never cross a pipe."""

    data: bytes | None = None
    admitted: bool = False
    digest: str | None = None
    outline: Outline | None = None
    error: FileError | None = None
    details: Details | None = None  # for the files the project index will surely ask about
    # Why a file no gate admits cannot be read as text: never parsed, it is still an error
    # (kept with its outline, so the cache remembers it).
    invalid: FileError | None = None


def _read_batch(batch: list[tuple[str, frozenset[str]]], hashed: bool) -> list[_Read]:
    out: list[_Read] = []
    for path, enabled in batch:
        data = read_source(path)
        if isinstance(data, FileError):
            out.append(_Read(error=data))
            continue
        memo: Memo = {}  # the gates and the outline share what they look for
        admitted = can_hold_findings(data, enabled, memo=memo)
        decls = declarations(data, memo)
        digest = None
        if hashed:  # only the cache needs it
            from .cache import content_hash

            digest = content_hash(data)
        details = None
        if any(may_name_function(base) for _name, bases, _flag in decls for base in bases):
            # The index will resolve this file's imports: reading them here, in a reader
            # process, keeps that off the main process.
            details = Details(imports=module_imports(data))
        invalid = None
        if not admitted:  # an admitted file is decoded by the engine, which says the same
            problem = decode_problem(data)
            if problem is not None:
                invalid = FileError(path, problem.message, problem.line, problem.col)
        out.append(
            _Read(
                data if admitted else None,
                admitted,
                digest,
                outline(data, decls),
                None,
                details,
                invalid,
            )
        )
    return out


@dataclass
class _File:
    path: str
    key: str
    reported: bool = True  # named by the user (the others are read for the index only)
    stat: os.stat_result | None = None
    data: bytes | None = None
    digest: str | None = None
    outline: Outline | None = None
    details: Details | None = None
    admitted: bool | None = None  # a gate admits it on its own (None: not read this run)
    entry: CacheEntry | None = None  # the cache entry matching this file's stat or bytes
    result: FileResult | None = None
    record: Record | None = None

    def source(self) -> bytes | None:
        """The bytes, read again if they were not kept (the index may need them)."""
        data = self.data if self.data is not None else read_source(self.path)
        return data if isinstance(data, bytes) else None


def lint_paths(
    files: Sequence[str | Path],
    config: Config,
    jobs: int | None = None,
    cache: Cache | None = None,
    progress: Progress | None = None,
    project: Sequence[str | Path] = (),
    root: Path | None = None,
    wants: frozenset[str] = frozenset(),
) -> list[FileResult]:
    """Lint `files` (`wants`: "fixes" adds each fixable finding's fix, "classes" the classes
    the confirmer can run). Cached results are reused; only files the byte prefilter admits, or that
    involve a Function of another file, are parsed.

    `project` lists the rest of the project (`root` is its top): those files are read, through
    the cache, only to build the index every file is linted with (view.py), so linting one
    file finds what linting the whole project finds in it. Many files are read by a pool of
    workers while this process loads the engine; the analysis then runs in isolated workers
    forked after that, so none imports libcst again."""
    keyed = cache is not None or bool(project)
    if cache is not None:
        wants |= {"depends"}  # a cached result is valid while what it was decided from is
    items = [_File(str(path), os.path.abspath(path) if keyed else "") for path in files]
    named = {item.key for item in items}
    items += [
        _File(str(path), key, reported=False)
        for path in project
        if (key := os.path.abspath(path)) not in named
    ]
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    hashed = cache is not None
    # 1. Find each file's cache entry by stat (no read); read the others.
    unread: list[_File] = [] if cache is not None else items
    for item in items if cache is not None else ():
        try:
            item.stat = os.stat(item.path)
        except OSError as exc:
            error = FileError(item.path, f"cannot read: {exc.strerror or exc}")
            item.result = FileResult(item.path, error=error)
            continue
        item.entry = cache.lookup_stat(item.key, item.stat) if cache else None
        if item.entry is None:
            unread.append(item)
    batch = [(item.path, config.enabled_for(item.path)) for item in unread]
    large = workers > 1 and len(unread) >= READ_POOL_THRESHOLD
    reads = _read_many(batch, hashed, workers) if large else _read_batch(batch, hashed)
    for item, read in zip(unread, reads, strict=True):
        if read.error is not None:
            item.result = FileResult(item.path, error=read.error)
            continue
        item.data, item.admitted, item.digest = read.data, read.admitted, read.digest
        item.outline, item.details = read.outline, read.details
        if read.invalid is not None:
            item.result = FileResult(item.path, error=read.invalid)
        if cache is not None:
            item.entry = cache.lookup_hash(item.key, item.digest or "")
    for item in items:
        if item.entry is not None:
            item.outline = item.entry.outline
    native = Current(config.settings.native_sources)
    if cache is not None and _unchanged(cache, items, unread, wants, native):
        # No file was added, removed or changed since the last run: every view is the same.
        reuse = [item.entry.result_for(item.path) for item in items if item.reported and item.entry]
        return sorted(reuse, key=lambda r: r.path)
    # 2. The project index: Function classes resolved through imports, across every file.
    records = []
    for item in items:
        if item.outline is None:
            continue
        details = item.entry.details if item.entry is not None else None
        details = details or item.details or Details()
        item.record = Record(item.path, item.outline, item.source, details)
        records.append(item.record)
    index = build_index(root, records=records)
    # 3. Reuse results computed under the same view of the project; analyse the rest.
    pending: list[LintRequest] = []
    todo: list[_File] = []
    keys: dict[str, str] = {}
    for item in items:
        if item.result is not None or not item.reported:
            continue
        view = EMPTY
        if item.outline is not None and index.needs_view(item.outline):
            view = index.view(item.path)
        keys[item.key] = key = view_key(view)
        entry = item.entry
        if (
            entry is not None
            and entry.result is not None
            and entry.index_key == key
            and native.holds(entry.result.depends)
        ):
            cached = entry.result_for(item.path)
            if _has_what_is_wanted(cached, wants):
                item.result = cached
                continue
        enabled = config.enabled_for(item.path)
        if item.admitted is None:  # known from the cache: decide from a fresh read
            read = _read_batch([(item.path, enabled)], hashed)[0]
            if read.error is not None or read.invalid is not None:
                item.result = FileResult(item.path, error=read.error or read.invalid)
                continue
            item.data, item.admitted, item.digest = read.data, read.admitted, read.digest
        if not item.admitted and view:
            data = read_source(item.path)  # it involves a Function defined in another file
            if isinstance(data, FileError):
                item.result = FileResult(item.path, error=data)
                continue
            item.data = data
        if item.data is None:
            item.result = FileResult(item.path)
            continue
        todo.append(item)
        pending.append(
            LintRequest(
                item.data,
                item.path,
                config.settings,
                view,
                enabled,
                fixes="fixes" in wants,
                classes="classes" in wants,
                record_depends="depends" in wants,
            )
        )
    in_pool = workers > 1 and bool(pending) and (large or len(pending) >= POOL_THRESHOLD)
    analysed = lint_isolated(pending, workers if in_pool else 1, progress)
    for item, result in zip(todo, analysed, strict=True):
        item.result = result
    if cache is not None:
        _store(cache, items, keys)
    results_out = [item.result for item in items if item.reported and item.result is not None]
    results_out.sort(key=lambda r: r.path)
    return results_out


def _has_what_is_wanted(result: FileResult, wants: frozenset[str]) -> bool:
    """A cached result serves when it holds what this run asks for besides findings."""
    if "classes" in wants and result.parsed:
        return False  # never cached: the confirmer asks rarely, and wants them fresh
    if "fixes" in wants and any(f.fixable for f in result.findings) and not result.fixes:
        return False
    return True


def _unchanged(
    cache: Cache,
    items: list[_File],
    unread: list[_File],
    wants: frozenset[str],
    native: Current,
) -> bool:
    from .cache import files_key

    if unread or any(item.result is not None for item in items):
        return False  # something was read, or could not be
    for item in items:
        entry = item.entry
        if item.reported and entry is not None and entry.result is not None:
            if not _has_what_is_wanted(entry.result, wants):
                return False
            if not native.holds(entry.result.depends):
                return False  # the C/C++ it read has changed
    if any(item.reported and (item.entry is None or item.entry.result is None) for item in items):
        return False  # a file named now that an earlier run only read for the index
    return cache.files_key == files_key([item.key for item in items])


def _store(cache: Cache, items: list[_File], keys: dict[str, str]) -> None:
    """Record what this run learned: results under their view, and each file's details once
    the index computed them (a project file's entry has no result until it is named)."""
    for item in items:
        if item.stat is None or item.record is None:
            continue
        details = item.record.details
        entry = item.entry
        fresh = (
            entry is None
            or item.admitted is not None
            or (item.reported and entry.index_key != keys.get(item.key, entry.index_key))
            or details != entry.details
        )
        if not fresh:
            continue
        result = item.result if item.reported else (entry.result if entry else None)
        digest = item.digest or (entry.digest if entry else None)
        if digest is None:
            continue
        key = keys.get(item.key, entry.index_key if entry else "~")
        cache.store(item.key, item.stat, digest, item.outline or Outline(), result, key, details)
    from .cache import files_key

    every = files_key([item.key for item in items])
    if cache.files_key != every:
        cache.files_key, cache.dirty = every, True
    cache.save()


def _read_many(batch: list[tuple[str, frozenset[str]]], hashed: bool, workers: int) -> list[_Read]:
    """Read and gate many files in forked readers while this process loads the engine."""
    from functools import partial

    from .workers import load_engine, map_in_forks

    # Reading (and outlining) ~1,500 files costs about what loading the engine costs here: one
    # reader then finishes alongside it, and more would only compete with it for the cores.
    readers = 1 if len(batch) <= FILES_PER_ENGINE_LOAD else workers
    gate_table()  # read here once, for the readers (the checks are imported only without one kept)
    return map_in_forks(partial(_read_batch, hashed=hashed), batch, readers, load_engine)


def lint_isolated(
    pending: list[LintRequest], workers: int = 1, progress: Progress | None = None
) -> list[FileResult]:
    """Lint each request in an isolated worker process (a crash or a runaway file costs that
    file only, stdin's included); results in request order."""
    if not pending:
        return []
    from .isolation import Failure, run_isolated
    from .workers import load_engine

    load_engine()  # before forking: the workers inherit it
    # Largest first, so no worker is left with a big file at the end.
    order = sorted(range(len(pending)), key=lambda i: -len(pending[i].source))
    with progress(len(pending)) if progress else nullcontext(_noop) as tick:
        results = run_isolated(
            _lint_job,
            pending,
            workers=min(workers, len(pending)),
            order=order,
            tick=tick,
            size=lambda request: len(request.source),
        )
    return [
        FileResult(job.path, error=FileError(job.path, f"too complex to analyse: {r.reason}"))
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


def _fix_job(request: LintRequest) -> FixOutcome:
    from .engine.fix_loop import fix_text

    return fix_text(request)


def fix_isolated(pending: list[LintRequest], workers: int = 1) -> list[FixOutcome | FileError]:
    """Fix each request's text in an isolated worker process; a FileError for a file whose
    worker died or ran out of time."""
    from .isolation import Failure, run_isolated
    from .workers import load_engine

    if not pending:
        return []
    load_engine()
    done = run_isolated(_fix_job, pending, workers=min(workers, len(pending)))
    return [
        FileError(request.path, f"too complex to analyse: {result.reason}")
        if isinstance(result, Failure)
        else result
        for request, result in zip(pending, done, strict=True)
    ]


def fix_files(
    files: Sequence[str | Path],
    config: Config,
    *,
    unsafe: bool,
    jobs: int | None = None,
    project: Sequence[str | Path] = (),
    root: Path | None = None,
) -> tuple[list[FixJob], list[FileError]]:
    """Fix what the files hold, each in an isolated worker; nothing is written here. Returns
    the files that could hold a finding, with their outcome, and the files that could not be
    read. The project index is the one `check` builds, so both see the same findings."""
    from .fix.write import DecodeFailed, decode_source, read_for_fix

    errors: list[FileError] = []
    reads = []
    for path in files:
        try:
            reads.append(read_for_fix(Path(path)))
        except OSError as exc:
            errors.append(FileError(str(path), f"cannot read: {exc.strerror or exc}"))
    given = [record_of(read.path, read.data) for read in reads]
    index = build_index(root, project, [record for record in given if record is not None])
    todo: list[FixJob] = []
    views: list[FileView] = []
    for read in reads:
        enabled = config.enabled_for(read.path)
        view = index.view(str(read.path))
        if not can_hold_findings(read.data, enabled) and not view:
            problem = decode_problem(read.data)  # nothing to fix, but `check` says it too
            if problem is not None:
                errors.append(FileError(str(read.path), problem.message, problem.line, problem.col))
            continue
        job = FixJob(read)
        try:
            job.text = decode_source(read.data)
        except DecodeFailed as exc:
            job.error = FileError(str(read.path), str(exc))
        todo.append(job)
        views.append(view)
    pending = [
        LintRequest(
            j.text,
            str(j.read.path),
            config.settings,
            view,
            config.enabled_for(j.read.path),
            plan="unsafe" if unsafe else "safe",
        )
        for j, view in zip(todo, views, strict=True)
        if j.text is not None
    ]
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    outcomes = iter(fix_isolated(pending, workers))
    for job in todo:
        if job.text is None:
            continue
        result = next(outcomes)
        if isinstance(result, FileError):
            job.error = result
        else:
            job.outcome = result
    return todo, errors
