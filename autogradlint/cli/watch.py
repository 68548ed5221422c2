"""`check --watch`: check, then check again whenever a file of the project changes.

Changes are found by polling each file's stat (no dependency, no inotify limits). A changed
file is linted through the incremental linter the language server uses (incremental.py), in
one long-lived worker process: only the classes an edit touched are analysed again. A change
can also alter what the project says about another file (a Function it subclasses, say): every
named file whose view of the project changed is linted again too. The report is then printed
whole, as a fresh `check` would print it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..checks.admission import can_hold_findings
from ..config import Config
from ..engine.request import LintRequest
from ..model import FileError, FileResult
from ..runner import discover as discover_files
from ..source_io import decode, read_source
from ..view import FileView, ProjectIndex, Record, build_index, record_of, view_key

Stamp = tuple[int, int, int]  # mtime_ns, size, inode
Report = Callable[[list[FileResult], list[FileError]], int]  # prints; returns the exit status


def stamp(path: str) -> Stamp | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


@dataclass
class Tree:
    """The files a watch covers (the named ones, and the rest of their project), as last seen."""

    paths: tuple[str, ...]
    config: Config
    respect_gitignore: bool
    root: Path | None
    named: dict[str, str] = field(default_factory=dict)  # absolute -> as named
    project: dict[str, str] = field(default_factory=dict)  # absolute -> as found
    errors: list[FileError] = field(default_factory=list)  # what discovery could not read
    stamps: dict[str, Stamp | None] = field(default_factory=dict)

    def scan(self) -> set[str]:
        """Discover again; the absolute paths added, removed or changed since the last scan."""
        found = discover_files(self.paths, self.config, respect_gitignore=self.respect_gitignore)
        self.errors = list(found.errors)
        self.named = {os.path.abspath(p): p for p in found.files}
        project: dict[str, str] = {}
        if self.root is not None:
            listed = discover_files(
                [str(self.root)], self.config, respect_gitignore=self.respect_gitignore
            )
            project = {os.path.abspath(p): p for p in listed.files}
        self.project = {**project, **self.named}
        stamps = {key: stamp(key) for key in self.project}
        every = stamps.keys() | self.stamps.keys()
        changed = {key for key in every if stamps.get(key) != self.stamps.get(key)}
        self.stamps = stamps
        return changed


def _records(paths: Iterable[tuple[str, str]]) -> dict[str, Record]:
    """The index's records of the files that can be read, by absolute path."""
    return {key: record for key, path in paths if (record := record_of(path)) is not None}


class Watcher:
    """The state between two checks: each named file's result and the view it was linted with."""

    def __init__(self, tree: Tree, results: list[FileResult], fixes: bool = False) -> None:
        from ..isolation import Persistent
        from ..lsp.jobs import PRELOAD
        from ..lsp.jobs import run as run_job

        self.tree = tree
        self.fixes = fixes  # the report shows each finding's fix: compute them too
        self.worker = Persistent(run_job, preload=PRELOAD)
        self.results = {os.path.abspath(r.path): r for r in results}
        # The tree was scanned before the first check: a change since then is seen next time.
        self.records = _records(tree.project.items())
        index = self.index()
        self.keys = {key: view_key(index.view(path)) for key, path in tree.named.items()}

    def index(self) -> ProjectIndex:
        return build_index(self.tree.root, records=self.records.values())

    def update(self) -> bool:
        """Lint what changed since the last call; whether anything did."""
        changed = self.tree.scan()
        if not changed:
            return False
        for key in changed:
            record = record_of(self.tree.project[key]) if key in self.tree.project else None
            if record is not None:
                self.records[key] = record
            elif key in self.tree.project:
                self.records.pop(key, None)  # unreadable now: as if it were not there
            else:
                self.records.pop(key, None)
                self.results.pop(key, None)
                self.keys.pop(key, None)
        index = self.index()
        for key, path in self.tree.named.items():
            view = index.view(path)
            current = view_key(view)
            if key in changed or key not in self.results or self.keys.get(key) != current:
                self.results[key] = self.lint(path, view)
                self.keys[key] = current
        return True

    def lint(self, path: str, view: FileView) -> FileResult:
        from ..isolation import Failure

        data = read_source(path)
        if isinstance(data, FileError):
            return FileResult(path, error=data)
        text = decode(data)
        if not isinstance(text, str):
            return FileResult(path, error=FileError(path, text.message, text.line, text.col))
        enabled = self.tree.config.enabled_for(path)
        if not view and not can_hold_findings(data, enabled):
            return FileResult(path)  # no autograd code: nothing to analyse
        request = LintRequest(text, path, self.tree.config.settings, view, enabled)
        result = self.worker.run(("lint", request))
        if isinstance(result, Failure):
            reason = f"too complex to analyse: {result.reason}"
            return FileResult(path, error=FileError(path, reason))
        assert isinstance(result, FileResult)
        if self.fixes and any(f.fixable for f in result.findings):
            single = self.worker.run(("fixes", request))
            if isinstance(single, FileResult):
                result.fixes = single.fixes
        return result

    def current(self) -> tuple[list[FileResult], list[FileError]]:
        results = sorted(self.results.values(), key=lambda r: r.path)
        errors = list(self.tree.errors) + [r.error for r in results if r.error is not None]
        return results, errors

    def close(self) -> None:
        self.worker.close()


def watch(
    tree: Tree,
    results: list[FileResult],
    report: Report,
    status: Callable[[str], None],
    *,
    rounds: int | None = None,
    interval: float = 0.5,
    fixes: bool = False,
) -> int:
    """Poll until interrupted (or, for tests, until `rounds` checks after the first); the exit
    status of the last check. `fixes`: the report shows each finding's fix."""
    watcher = Watcher(tree, results, fixes)
    try:
        code = report(*watcher.current())
        status(_stamped("Watching for file changes."))
        done = 0
        while rounds is None or done < rounds:
            time.sleep(interval)
            if not watcher.update():
                continue
            done += 1
            status(_stamped("File change detected: checking again."))
            code = report(*watcher.current())
            status(_stamped("Watching for file changes."))
        return code
    finally:
        watcher.close()


def _stamped(text: str) -> str:
    return f"[{time.strftime('%H:%M:%S')}] {text}"
