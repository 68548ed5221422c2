"""`check --add-noqa`: write `# noqa: CODE` for the current findings, the way `fix` writes.

Each file is read again and linted once more from those very bytes (with the same project
view), so a file edited since the run cannot get comments on the wrong lines; the write is
fix/write.py's, which refuses a file changed since it was read."""

from __future__ import annotations

from pathlib import Path

from ..config import Config
from ..engine.hygiene import HYGIENE
from ..model import FileError, FileResult
from .common import project_files


def add_noqa_comments(
    results: list[FileResult], config: Config, paths: tuple[str, ...], respect_gitignore: bool
) -> tuple[int, list[FileError]]:
    """(directives added or extended, files that could not be changed)."""
    from ..engine.request import LintRequest
    from ..engine.verify import compile_error
    from ..fix.write import (
        DecodeFailed,
        ReadFile,
        WriteRefused,
        checked_roots,
        decode_source,
        read_for_fix,
        write_fixed,
    )
    from ..runner import lint_isolated
    from ..text.noqa import add_noqa
    from ..view import build_index, record_of

    wanted = [r for r in results if any(f.rule_id not in HYGIENE for f in r.findings)]
    if not wanted:
        return 0, []
    root, project = project_files(paths[0], config, respect_gitignore)
    added, errors = 0, []
    reads = []
    for result in wanted:
        try:
            reads.append(read_for_fix(Path(result.path)))
        except OSError as exc:
            errors.append(FileError(result.path, f"cannot read: {exc.strerror or exc}"))
    given = [record_of(read.path, read.data) for read in reads]
    index = build_index(root, project, [record for record in given if record is not None])
    texts: list[tuple[ReadFile, str | FileError]] = []
    for read in reads:
        try:
            texts.append((read, decode_source(read.data)))
        except DecodeFailed as exc:
            texts.append((read, FileError(str(read.path), str(exc))))
    requests = [
        LintRequest(
            text,
            str(read.path),
            config.settings,
            index.view(str(read.path)),
            config.enabled_for(read.path),
        )
        for read, text in texts
        if isinstance(text, str)
    ]
    linted = iter(lint_isolated(requests))  # the same isolation as the check before
    for read, text in texts:
        path = str(read.path)
        if isinstance(text, FileError):
            errors.append(text)
            continue
        now = next(linted)
        codes = [(f.line, f.rule_id) for f in now.findings if f.rule_id not in HYGIENE]
        new, changed = add_noqa(text, codes)
        if not changed:
            continue
        problem = compile_error(new, path)
        if problem is not None:  # a comment cannot break code, unless something is badly wrong
            errors.append(FileError(path, f"adding noqa comments would not compile: {problem}"))
            continue
        try:
            write_fixed(read, new, roots=checked_roots(paths))  # never through a link out
        except WriteRefused as exc:
            errors.append(FileError(path, str(exc)))
            continue
        added += changed
    return added, errors
