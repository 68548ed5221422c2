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
    from ..engine.door import lint_file
    from ..engine.verify import compile_error
    from ..fix.write import (
        DecodeFailed,
        WriteRefused,
        checked_roots,
        decode_source,
        read_for_fix,
        write_fixed,
    )
    from ..runner import project_index
    from ..text.noqa import add_noqa

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
    index = project_index([(read.path, read.data) for read in reads], project, root)
    for read in reads:
        path = str(read.path)
        try:
            text = decode_source(read.data)
        except DecodeFailed as exc:
            errors.append(FileError(path, str(exc)))
            continue
        now = lint_file(
            text,
            path,
            enabled=config.enabled_for(read.path),
            settings=config.settings,
            project=index.view(path),
        )
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
