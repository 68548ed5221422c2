"""`autogradlint check`: lint paths (or stdin) and report in the chosen format."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..config import Config
from ..model import FileError, FileResult, printable
from ..runner import discover as discover_files
from ..runner import lint_paths
from ..view import EMPTY
from .app import main
from .common import (
    EXIT_CLEAN,
    EXIT_ERROR,
    EXIT_FINDINGS,
    Console,
    config_options,
    open_cache,
    overrides_of,
    print_error,
    print_errors,
    print_warning,
    progress_bar,
    project_files,
    report_sink,
    setup,
    show_settings,
    stdin_view,
)
from .fix import FixSummary, fix_paths, fixes_applied
from .output import FORMATS, SHOW_FIXES, render_report

if TYPE_CHECKING:  # the confirmer and the cache are imported only by the runs that use them
    from ..cache import Cache
    from ..confirm.run import Outcome


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@config_options
@click.option(
    "--output-format",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    envvar="AUTOGRADLINT_OUTPUT_FORMAT",
    help="text: `path:line:col: CODE message` and a code frame; full: ruff's full format, "
    "with each fix as a diff; concise: one line per finding; json: ruff's keys, absolute "
    "`filename`s; sarif: URIs relative to the current directory; github; junit. Every other "
    "format names files relative to the current directory.",
)
@click.option(
    "-o",
    "--output-file",
    type=click.Path(dir_okay=False, writable=True),
    envvar="AUTOGRADLINT_OUTPUT_FILE",
    help="Write the report to this file instead of stdout.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print findings, but no summary or notes.")
@click.option("-s", "--silent", is_flag=True, help="Print nothing; the exit status tells.")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour the text report (auto: only on a terminal; NO_COLOR is respected).",
)
@click.option("--stdin-filename", help="The path to report for source read from `-`.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: CPUs).")
@click.option("--no-respect-gitignore", is_flag=True, help="Also check files .gitignore lists.")
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply `exclude` to files named on the command line too (for pre-commit).",
)
@click.option("--statistics", is_flag=True, help="Print only the number of findings per rule.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option(
    "--exit-non-zero-on-fix",
    is_flag=True,
    help="With --fix: exit 1 when anything was fixed, even if nothing remains.",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False),
    help="Report only findings not recorded in this baseline file.",
)
@click.option(
    "--write-baseline",
    type=click.Path(dir_okay=False),
    help="Record the current findings in this file (then exit 0).",
)
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar="AUTOGRADLINT_CACHE_DIR",
    help="Where the cache lives (default: .autogradlint_cache beside the config).",
)
@click.option(
    "--confirm",
    "confirm_findings",
    is_flag=True,
    help="Also EXECUTE flagged classes to confirm findings at runtime (see `confirm`).",
)
@click.option("--fix", is_flag=True, help="Apply fixes first (same as `autogradlint fix --apply`).")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff: also unsafe fixes.")
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="Print the fixes as a diff and write nothing (exit 1 when there is one).",
)
@click.option(
    "--add-noqa", is_flag=True, help="Add `# noqa: CODE` comments for every current finding."
)
@click.option(
    "--show-fixes",
    is_flag=True,
    help="Show each finding's fix as a diff (text; `full` always does); with --fix, list the "
    "fixes applied.",
)
@click.option(
    "-w", "--watch", is_flag=True, help="Check again whenever a file changes (Ctrl-C stops)."
)
# For tests: stop after this many checks that follow a change, and poll this often.
@click.option("--watch-rounds", type=click.IntRange(min=1), hidden=True)
@click.option("--watch-interval", type=click.FloatRange(min=0.01), default=0.5, hidden=True)
@click.option(
    "--show-files",
    is_flag=True,
    help="Check, then list every file checked, marking those skipped for having no autograd "
    "code and those that could not be checked.",
)
@click.option(
    "--show-settings", is_flag=True, help="Print the settings the first path is checked with."
)
def check(paths: tuple[str, ...], **options: object) -> None:
    """Check PATHS (files or directories, default `.`; `-` reads stdin) for autograd bugs."""
    overrides = overrides_of(options)
    opts = CheckOptions(**options)  # type: ignore[arg-type]
    err, paths, config = setup(paths, overrides, opts.force_exclude, opts.stdin_filename)
    if opts.silent:
        err = Console(stderr=True, quiet=True)
    respect_gitignore = not opts.no_respect_gitignore
    if opts.show_settings:
        click.echo(show_settings(config, paths[0]))
        sys.exit(EXIT_CLEAN)
    if opts.watch:
        _refuse_with_watch(paths, opts, err)
    # Opened before anything is written: a directory that is not the cache's refuses the run.
    cache = None if opts.no_cache or paths == ("-",) else open_cache(opts.cache_dir, config, err)
    if opts.show_files:
        results, errors, _ = _lint(paths, config, opts, err, respect_gitignore, cache)
        for line in _file_list(results, errors):
            click.echo(line)
        print_errors(err, errors)
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)

    def fixes(apply: bool) -> FixSummary:
        return fix_paths(
            paths,
            config,
            apply=apply,
            unsafe=opts.unsafe_fixes,
            err=err,
            respect_gitignore=respect_gitignore,
            show_diff=not apply,
            quiet=opts.quiet or opts.silent,
        )

    if opts.show_diff and paths != ("-",):
        summary = fixes(apply=False)
        print_errors(err, summary.errors)
        sys.exit(EXIT_ERROR if summary.errors else EXIT_FINDINGS if summary.changed else EXIT_CLEAN)
    fixed = 0
    if opts.fix and paths != ("-",):
        summary = fixes(apply=True)
        if summary.errors:
            print_errors(err, summary.errors)
            sys.exit(EXIT_ERROR)
        fixed = summary.changed
        if (
            opts.show_fixes
            and not opts.silent
            and opts.output_format in ("text", "full", "concise")
        ):
            click.echo(fixes_applied(summary.applied))

    tree = None
    if opts.watch:
        from .watch import Tree

        root, _project = project_files(paths[0], config, respect_gitignore)
        tree = Tree(paths, config, respect_gitignore, root)
        tree.scan()  # before the first check: a change from here on is seen
    results, errors, data = _lint(paths, config, opts, err, respect_gitignore, cache)
    if not results and not errors:
        print_error(err, "no Python files to check in " + ", ".join(paths))
        sys.exit(EXIT_ERROR)

    if opts.add_noqa:
        from .noqa import add_noqa_comments  # rare: not on every run's start-up

        added, noqa_errors = add_noqa_comments(results, config, paths, respect_gitignore)
        if not (opts.quiet or opts.silent):
            err.print(f"Added {added} noqa directive{'s' * (added != 1)}.", highlight=False)
        print_errors(err, errors + noqa_errors)
        sys.exit(EXIT_ERROR if errors or noqa_errors else EXIT_CLEAN)

    if opts.write_baseline or opts.baseline:
        sources = {r.path: _read_lines(r.path, data) for r in results if r.findings}
        _baseline(results, sources, errors, opts, err)

    outcomes: list[Outcome] = []
    if opts.confirm_findings:
        from ..confirm.plan import plan
        from ..confirm.run import confirm as run_confirm

        outcomes = run_confirm(
            plan(results, clean="none"),
            ["cpu", "cuda"],
            config.confirm_timeout or 240.0,
            dict(config.confirm_factories),
        )

    def report(results: list[FileResult], errors: list[FileError]) -> int:
        """Print the report of one check; its exit status."""
        sources = {r.path: _read_lines(r.path, data) for r in results if r.findings}
        if not opts.silent:
            with report_sink(opts.output_file, opts.color) as (echo, console):
                render_report(
                    echo,
                    console,
                    results,
                    errors,
                    sources,
                    fmt=opts.output_format,
                    statistics=opts.statistics,
                    quiet=opts.quiet,
                    unsafe=opts.unsafe_fixes,
                    show_fixes=opts.show_fixes,
                    color=opts.color,
                    to_file=opts.output_file is not None,
                    outcomes=outcomes,
                )
        print_errors(err, errors)
        if errors:
            return EXIT_ERROR
        found_any = any(r.findings for r in results)
        if (found_any and not opts.exit_zero) or (fixed and opts.exit_non_zero_on_fix):
            return EXIT_FINDINGS
        return EXIT_CLEAN

    if tree is not None:
        from .watch import watch

        sys.exit(
            watch(
                tree,
                results,
                report,
                click.echo,
                rounds=opts.watch_rounds,
                interval=opts.watch_interval,
                fixes=_wants(opts) == {"fixes"},
            )
        )
    sys.exit(report(results, errors))


@dataclass(frozen=True)
class CheckOptions:
    """`check`'s own options (the configuration overrides are common.Overrides)."""

    output_format: str
    output_file: str | None
    quiet: bool
    silent: bool
    color: str
    stdin_filename: str | None
    jobs: int | None
    no_respect_gitignore: bool
    force_exclude: bool
    statistics: bool
    exit_zero: bool
    exit_non_zero_on_fix: bool
    baseline: str | None
    write_baseline: str | None
    no_cache: bool
    cache_dir: str | None
    confirm_findings: bool
    fix: bool
    unsafe_fixes: bool
    show_diff: bool
    add_noqa: bool
    show_fixes: bool
    watch: bool
    watch_rounds: int | None
    watch_interval: float
    show_files: bool
    show_settings: bool


def _lint(
    paths: tuple[str, ...],
    config: Config,
    opts: CheckOptions,
    err: Console,
    respect_gitignore: bool,
    cache: Cache | None,
) -> tuple[list[FileResult], list[FileError], bytes | None]:
    """Every file's result, the errors, and stdin's bytes when it was read."""
    wants = _wants(opts)
    if paths == ("-",):
        from ..engine.door import lint_file

        name = opts.stdin_filename or "<stdin>"
        data = sys.stdin.buffer.read()
        view = stdin_view(name, data, config, respect_gitignore) if opts.stdin_filename else EMPTY
        result = lint_file(
            data,
            name,
            enabled=config.enabled_for(Path(name)),
            settings=config.settings,
            project=view,
            fixes="fixes" in wants,
        )
        return [result], [result.error] if result.error else [], data
    found = discover_files(paths, config, respect_gitignore=respect_gitignore)
    if found.files:  # with none at all, the one error `check` gives says it
        _warn_empty(paths, found.files, config, err)
    root, project = project_files(paths[0], config, respect_gitignore, paths, found.files)
    show_progress = opts.output_format == "text" and sys.stdout.isatty() and not opts.output_file
    quiet = opts.quiet or opts.silent
    results = lint_paths(
        found.files,
        config,
        jobs=opts.jobs,
        cache=cache,
        progress=progress_bar(err) if show_progress and not quiet else None,
        project=project,
        root=root,
        wants=wants,
    )
    errors = list(found.errors) + [r.error for r in results if r.error is not None]
    return results, errors, None


def _wants(opts: CheckOptions) -> frozenset[str]:
    """Formats that show each fixable finding's fix (ruff's `fix`, SARIF `fixes`, a diff) get
    it from the same analysis as the finding."""
    shown = opts.output_format in SHOW_FIXES or (opts.show_fixes and opts.output_format == "text")
    return frozenset({"fixes"}) if shown and not opts.statistics else frozenset()


def _warn_empty(paths: tuple[str, ...], files: list[str], config: Config, err: Console) -> None:
    """Say which named directories held no Python file to check (a typo, a venv, an exclude)."""
    # Discovery keeps the named prefix, so a lexical match settles almost every directory;
    # resolving (a syscall per path component) is only for the rare `..` or symlinked name.
    resolved: list[Path] | None = None
    for named in paths:
        where = Path(named)
        if not where.is_dir():
            continue
        depth = len(where.parts)
        if any(Path(f).parts[:depth] == where.parts for f in files):
            continue  # usually the first file: the rest are never made Paths
        if resolved is None:
            resolved = [Path(f).resolve() for f in files]
        base = where.resolve()
        if not any(base == f or base in f.parents for f in resolved):
            print_warning(err, f"no Python files to check under {named}")


def _baseline(
    results: list[FileResult],
    sources: dict[str, list[str]],
    errors: list[FileError],
    opts: CheckOptions,
    err: Console,
) -> None:
    from .. import baseline as baseline_mod

    if opts.write_baseline:
        target = Path(opts.write_baseline)
        target.write_text(baseline_mod.build(results, sources, target.parent))
        count = sum(len(r.findings) for r in results)
        if not (opts.quiet or opts.silent):
            err.print(f"Recorded {count} finding{'s' * (count != 1)} in {target}.")
        print_errors(err, errors)
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)
    assert opts.baseline is not None
    path = Path(opts.baseline)
    if not path.is_file():
        print_error(
            err,
            f"{opts.baseline}: no such baseline file; record one with "
            f"`autogradlint check --write-baseline {opts.baseline}`",
        )
        sys.exit(EXIT_ERROR)
    try:
        recorded = baseline_mod.load(path.read_text(encoding="utf-8"), opts.baseline)
    except (OSError, UnicodeDecodeError, baseline_mod.BaselineError) as exc:
        print_error(err, f"{opts.baseline}: {exc}" if opts.baseline not in str(exc) else str(exc))
        sys.exit(EXIT_ERROR)
    dropped = baseline_mod.apply(results, recorded, sources, path.parent)
    if dropped and opts.output_format == "text" and not (opts.quiet or opts.silent):
        err.print(f"{dropped} finding{'s' * (dropped != 1)} recorded in {path} not shown.")


def _file_list(results: list[FileResult], errors: list[FileError]) -> list[str]:
    """`--show-files`: every file given, absolute, as ruff lists them; a file skipped for having
    no autograd code, or that could not be checked, says so."""
    from ..report.paths import absolute

    failed = {absolute(e.path) for e in errors}
    lines = []
    for result in results:
        path = absolute(result.path)
        mark = ""
        if path in failed:
            mark = "  (not checked: see the error)"
        elif not result.parsed:
            mark = "  (skipped: no autograd code)"
        lines.append((path, printable(path) + mark))
    listed = {path for path, _ in lines}
    lines += [
        (absolute(e.path), f"{printable(absolute(e.path))}  (not checked: see the error)")
        for e in errors
        if absolute(e.path) not in listed and e.path.endswith((".py", ".pyi"))
    ]
    return [line for _, line in sorted(lines)]


def _refuse_with_watch(paths: tuple[str, ...], opts: CheckOptions, err: Console) -> None:
    """--watch re-checks and reports; what writes files or reads stdin once does not combine."""
    clashes = {
        "-": paths == ("-",),
        "--fix": opts.fix,
        "--diff": opts.show_diff,
        "--add-noqa": opts.add_noqa,
        "--write-baseline": opts.write_baseline is not None,
        "--baseline": opts.baseline is not None,
        "--confirm": opts.confirm_findings,
        "--show-files": opts.show_files,
    }
    named = [name for name, clash in clashes.items() if clash]
    if named:
        print_error(err, f"--watch cannot be combined with {', '.join(named)}")
        sys.exit(EXIT_ERROR)


def _read_lines(path: str, data: bytes | None) -> list[str]:
    """The file's lines as Python numbers them: broken at \\r\\n, \\r and \\n only
    (str.splitlines also breaks at form feeds, \\x1c-\\x1e, \\x85 and \\u2028, and every
    code frame after one would quote the line above the finding)."""
    try:
        raw = data if data is not None else Path(path).read_bytes()
    except OSError:
        return []
    lines = re.split(r"\r\n|\r|\n", raw.decode("utf-8", errors="replace"))
    if lines[-1] == "":
        lines.pop()  # the text ends with a line break: no line after it
    return lines
