"""`autogradlint fix`: show or write the fixes of the chosen tier."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click

from ..config import Config
from ..model import FileError
from ..project import EMPTY
from ..runner import discover as discover_files
from .app import main
from .common import (
    EXIT_CLEAN,
    EXIT_ERROR,
    EXIT_FINDINGS,
    Console,
    config_options,
    overrides_of,
    print_error,
    project_files,
    setup,
    stdin_view,
)


@dataclass
class FixSummary:
    errors: list[FileError]
    remaining: int  # findings left after fixing
    changed: int  # files fixed (or, without apply, that would be)


def fix_paths(
    paths: tuple[str, ...],
    config: Config,
    *,
    apply: bool,
    unsafe: bool,
    err: Console,
    respect_gitignore: bool = True,
    show_diff: bool = False,
    quiet: bool = False,
) -> FixSummary:
    """Fix every file under `paths`; print diffs or write."""
    import difflib
    from collections import Counter

    from ..fix.write import WriteRefused, write_fixed
    from ..runner import fix_files

    found = discover_files(paths, config, respect_gitignore=respect_gitignore)
    root, project = project_files(paths[0], config, respect_gitignore, paths, found.files)
    jobs, errors = fix_files(found.files, config, unsafe=unsafe, project=project, root=root)
    errors = list(found.errors) + errors
    fixed: Counter[str] = Counter()
    files_changed = 0
    remaining = 0
    for job in jobs:
        path = job.read.path
        outcome = job.outcome
        if job.error is not None or outcome is None:
            errors.append(job.error or FileError(str(path), "not analysed"))
            continue
        if outcome.error is not None:
            errors.append(FileError(str(path), outcome.error.removeprefix(f"{path}: ")))
            continue
        remaining += len(outcome.remaining)
        if not outcome.changed:
            continue
        if apply:
            try:
                write_fixed(job.read, outcome.source)
            except WriteRefused as exc:
                errors.append(FileError(str(path), str(exc)))
                continue
        elif show_diff:
            diff = difflib.unified_diff(
                (job.text or "").splitlines(keepends=True),
                outcome.source.splitlines(keepends=True),
                fromfile=str(path) if path.is_absolute() else f"a/{path}",
                tofile=str(path) if path.is_absolute() else f"b/{path}",
            )
            click.echo("".join(diff), nl=False)
        files_changed += 1
        fixed.update(outcome.applied)
    total = sum(fixed.values())
    if quiet:
        return FixSummary(errors, remaining, files_changed)
    if total:
        verb = "Fixed" if apply else "Would fix"
        detail = ", ".join(f"{code} x{count}" for code, count in sorted(fixed.items()))
        err.print(
            f"{verb} {total} finding{'s' * (total != 1)} in {files_changed} "
            f"file{'s' * (files_changed != 1)} ({detail}).",
            highlight=False,
        )
    if remaining:
        err.print(
            f"{remaining} finding{' remains' if remaining == 1 else 's remain'} after fixing.",
            highlight=False,
        )
    return FixSummary(errors, remaining, files_changed)


@main.command("fix")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--apply", "apply_", is_flag=True, help="Write the fixes (default: show a diff).")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that change behaviour.")
@config_options
@click.option("--stdin-filename", help="The path to report for source read from `-`.")
@click.option("--no-respect-gitignore", is_flag=True)
@click.option("--force-exclude", is_flag=True, help="Apply `exclude` to named files too.")
@click.option("-q", "--quiet", is_flag=True, help="Print diffs only, no summary.")
def fix_command(
    paths: tuple[str, ...],
    apply_: bool,
    unsafe_fixes: bool,
    stdin_filename: str | None,
    no_respect_gitignore: bool,
    force_exclude: bool,
    quiet: bool,
    **options: object,
) -> None:
    """Show (or with --apply, write) the fixes for PATHS; `-` fixes stdin to stdout.

    Safe fixes never change what correct code computes; --unsafe-fixes adds the rewrites that
    fix the bug itself and so change values. Every fix is re-parsed and re-linted before it is
    written, writes are atomic, and a file changed since it was read is never overwritten.
    """
    err, paths, config = setup(paths, overrides_of(options), force_exclude, stdin_filename)
    if paths == ("-",):
        from ..fix.loop import fix_text
        from ..fix.write import DecodeFailed, decode_source
        from ..source_io import detect_encoding

        name = stdin_filename or "<stdin>"
        data = sys.stdin.buffer.read()
        try:
            text = decode_source(data)
        except DecodeFailed as exc:
            print_error(err, f"{name}: {exc}")
            sys.exit(EXIT_ERROR)
        encoding = detect_encoding(data)
        outcome = fix_text(
            text,
            name,
            unsafe=unsafe_fixes,
            enabled=config.enabled_for(Path(name)),
            settings=config.settings,
            project=stdin_view(name, data, config, True) if stdin_filename else EMPTY,
        )
        sys.stdout.buffer.write(outcome.source.encode(encoding))
        sys.stdout.flush()
        if outcome.error is not None:
            print_error(err, outcome.error)
            sys.exit(EXIT_ERROR)
        sys.exit(EXIT_FINDINGS if outcome.remaining else EXIT_CLEAN)
    summary = fix_paths(
        paths,
        config,
        apply=apply_,
        unsafe=unsafe_fixes,
        err=err,
        respect_gitignore=not no_respect_gitignore,
        show_diff=not apply_,
        quiet=quiet,
    )
    for error in summary.errors:
        print_error(err, error.describe())
    if summary.errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if summary.remaining else EXIT_CLEAN)
