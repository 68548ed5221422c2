"""`autogradlint fix`: show or write the fixes of the chosen tier."""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

from ..config import Config
from ..model import FileError, printable
from ..runner import discover as discover_files
from ..view import EMPTY
from .app import main
from .common import (
    EXIT_CLEAN,
    EXIT_ERROR,
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    Console,
    config_options,
    overrides_of,
    print_error,
    print_errors,
    project_files,
    setup,
    stdin_view,
)


@dataclass
class FixSummary:
    errors: list[FileError]
    remaining: int  # findings left after fixing
    changed: int  # files fixed (or, without apply, that would be)
    applied: list[tuple[str, list[str]]] = field(default_factory=list)  # path, rule ids fixed


def fixes_applied(applied: list[tuple[str, list[str]]]) -> str:
    """ruff's `--show-fixes` list: per file, how many findings of each rule were fixed."""
    from collections import Counter

    from ..meta import rule_names
    from ..report.paths import relative

    total = sum(len(codes) for _, codes in applied)
    if not total:
        return "No findings fixed."
    names = rule_names()
    lines = [f"Fixed {total} finding{'s' * (total != 1)}:"]
    for path, codes in sorted(applied):
        if not codes:
            continue
        lines.append(f"- {printable(relative(path))}:")
        for code, count in sorted(Counter(codes).items()):
            lines.append(f"    {count} × {code} ({names.get(code, '?')})")
    return "\n".join(lines)


def outcome_error(path: Path, message: str) -> FileError:
    """The FileError of a file the fix loop gave up on: its message names the file (`path:
    ...` or `path:line:col: ...`), which the error prints once."""
    match = re.match(rf"{re.escape(str(path))}:(\d+):(\d+): (.*)", message, re.S)
    if match is not None:
        line, col, rest = match.groups()
        return FileError(str(path), rest, int(line), int(col) - 1)
    return FileError(str(path), message.removeprefix(f"{path}: "))


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
    follow_symlinks_outside: bool = False,
) -> FixSummary:
    """Fix every file under `paths`; print diffs or write. Ctrl-C exits 130, saying which
    files were already written."""
    from ..fix.write import checked_roots

    progress = _Progress()
    try:
        return _fix_paths(
            paths,
            config,
            apply=apply,
            unsafe=unsafe,
            err=err,
            respect_gitignore=respect_gitignore,
            show_diff=show_diff,
            quiet=quiet,
            roots=None if follow_symlinks_outside else checked_roots(paths),
            progress=progress,
        )
    except KeyboardInterrupt:
        _report_interrupt(err, progress)
        sys.exit(EXIT_INTERRUPTED)


@dataclass
class _Progress:
    """How far writing got: the files written, of how many to write (once that is known)."""

    written: list[Path] = field(default_factory=list)
    planned: int | None = None


def _report_interrupt(err: Console, progress: _Progress) -> None:
    """One line that says how far the run got, then the files it wrote (the rest are as they
    were: each file is written whole or not at all)."""
    written = progress.written
    if not written:
        err.print("Interrupted: no file was written.", markup=False, highlight=False)
        return
    count = len(written)
    of = f" of {progress.planned}" if progress.planned is not None else ""
    err.print(
        f"Interrupted: {count}{of} fixed file{'s' * (count != 1)} written, the others "
        f"unchanged. Written:",
        markup=False,
        highlight=False,
    )
    for path in written:
        err.print(f"  {printable(str(path))}", markup=False, highlight=False)


def _fix_paths(
    paths: tuple[str, ...],
    config: Config,
    *,
    apply: bool,
    unsafe: bool,
    err: Console,
    respect_gitignore: bool,
    show_diff: bool,
    quiet: bool,
    roots: tuple[Path, ...] | None,
    progress: _Progress,
) -> FixSummary:
    import difflib
    from collections import Counter

    from ..fix.write import WriteRefused, write_fixed
    from ..runner import fix_files

    found = discover_files(paths, config, respect_gitignore=respect_gitignore)
    root, project = project_files(paths[0], config, respect_gitignore, paths, found.files)
    jobs, errors = fix_files(found.files, config, unsafe=unsafe, project=project, root=root)
    errors = list(found.errors) + errors
    fixed: Counter[str] = Counter()
    applied: list[tuple[str, list[str]]] = []
    files_changed = 0
    remaining = 0
    progress.planned = sum(1 for j in jobs if j.outcome is not None and j.outcome.changed)
    for job in jobs:
        path = job.read.path
        outcome = job.outcome
        if job.error is not None or outcome is None:
            errors.append(job.error or FileError(str(path), "not analysed"))
            continue
        if outcome.error is not None:
            errors.append(outcome_error(path, outcome.error))
            continue
        remaining += len(outcome.remaining)
        if not outcome.changed:
            continue
        if apply:
            try:
                write_fixed(
                    job.read,
                    outcome.source,
                    roots=roots,
                    on_written=functools.partial(progress.written.append, path),
                )
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
        applied.append((str(path), list(outcome.applied)))
    total = sum(fixed.values())
    if quiet:
        return FixSummary(errors, remaining, files_changed, applied)
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
    return FixSummary(errors, remaining, files_changed, applied)


@main.command("fix")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--apply", "apply_", is_flag=True, help="Write the fixes (default: show a diff).")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that change behaviour.")
@config_options
@click.option("--stdin-filename", help="The path to report for source read from `-`.")
@click.option("--no-respect-gitignore", is_flag=True)
@click.option("--force-exclude", is_flag=True, help="Apply `exclude` to named files too.")
@click.option("-q", "--quiet", is_flag=True, help="Print diffs only, no summary.")
@click.option(
    "--follow-symlinks-outside",
    is_flag=True,
    help="With --apply: also write files that a symlink inside PATHS leads to outside them "
    "(refused by default, naming each file).",
)
def fix_command(
    paths: tuple[str, ...],
    apply_: bool,
    unsafe_fixes: bool,
    stdin_filename: str | None,
    no_respect_gitignore: bool,
    force_exclude: bool,
    quiet: bool,
    follow_symlinks_outside: bool,
    **options: object,
) -> None:
    """Show (or with --apply, write) the fixes for PATHS; `-` fixes stdin to stdout.

    Safe fixes never change what correct code computes; --unsafe-fixes adds the rewrites that
    fix the bug itself and so change values. Every fix is re-parsed and re-linted before it is
    written, writes are atomic, and a file changed since it was read is never overwritten. A
    file that a symlink leads to outside PATHS is not written (--follow-symlinks-outside). On
    Ctrl-C the run exits 130 and lists the files it had already written.
    """
    err, paths, config = setup(paths, overrides_of(options), force_exclude, stdin_filename)
    if paths == ("-",):
        from ..engine.fix_loop import fix_text
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
        follow_symlinks_outside=follow_symlinks_outside,
    )
    print_errors(err, summary.errors)
    if summary.errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if summary.remaining else EXIT_CLEAN)
