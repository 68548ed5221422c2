"""`autogradlint check`: lint paths (or stdin) and report in the chosen format."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..model import FileError
from ..project import EMPTY
from ..runner import discover as discover_files
from ..runner import lint_paths
from .app import main
from .common import (
    EXIT_CLEAN,
    EXIT_ERROR,
    EXIT_FINDINGS,
    Console,
    print_error,
    progress_bar,
    project_files,
    setup,
    stdin_view,
)
from .fix import fix_paths


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--select", multiple=True, help="Rules to enable: ALL, AGL101, AGL1, or a name.")
@click.option("--extend-select", multiple=True, help="Rules to enable on top of the selection.")
@click.option("--ignore", multiple=True, help="Rules to disable: code, prefix or name.")
@click.option(
    "--output-format",
    type=click.Choice(["text", "concise", "json", "sarif", "github", "junit"]),
    default="text",
    show_default=True,
    envvar="AUTOGRADLINT_OUTPUT_FORMAT",
)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="Config file.")
@click.option("--stdin-filename", help="The path to report for source read from `-`.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: CPUs).")
@click.option("--no-respect-gitignore", is_flag=True, help="Also check files .gitignore lists.")
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply `exclude` to files named on the command line too (for pre-commit).",
)
@click.option("--statistics", is_flag=True, help="Print the number of findings per rule.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
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
@click.option("--unsafe-fixes", is_flag=True, help="With --fix: also apply unsafe fixes.")
def check(
    paths: tuple[str, ...],
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    output_format: str,
    config_file: str | None,
    stdin_filename: str | None,
    jobs: int | None,
    no_respect_gitignore: bool,
    force_exclude: bool,
    statistics: bool,
    exit_zero: bool,
    baseline: str | None,
    write_baseline: str | None,
    no_cache: bool,
    cache_dir: str | None,
    confirm_findings: bool,
    fix: bool,
    unsafe_fixes: bool,
) -> None:
    """Check PATHS (files or directories, default `.`; `-` reads stdin) for autograd bugs."""
    out = Console(highlight=False, soft_wrap=True)
    err, paths, config = setup(
        paths, config_file, select, extend_select, ignore, force_exclude, stdin_filename
    )
    if fix and paths != ("-",):
        fix_errors, _ = fix_paths(
            paths,
            config,
            apply=True,
            unsafe=unsafe_fixes,
            err=err,
            respect_gitignore=not no_respect_gitignore,
        )
        if fix_errors:
            sys.exit(EXIT_ERROR)

    errors: list[FileError] = []
    sources: dict[str, list[str]] = {}
    respect_gitignore = not no_respect_gitignore
    # Machine-readable formats carry each fixable finding's fix (ruff's `fix`, SARIF `fixes`),
    # computed in the same analysis as the finding.
    wants = frozenset({"fixes"}) if output_format in ("json", "sarif") else frozenset()
    if paths == ("-",):
        name = stdin_filename or "<stdin>"
        from ..lint import lint_file

        data = sys.stdin.buffer.read()
        view = stdin_view(name, data, config, respect_gitignore) if stdin_filename else EMPTY
        results = [
            lint_file(
                data,
                name,
                enabled=config.enabled_for(Path(name)),
                settings=config.settings,
                project=view,
                fixes="fixes" in wants,
            )
        ]
    else:
        found = discover_files(paths, config, respect_gitignore=respect_gitignore)
        errors.extend(found.errors)
        root, project = project_files(paths[0], config, respect_gitignore, paths, found.files)
        cache = None
        if not no_cache:
            from ..cache import DIR_NAME, Cache

            directory = Path(cache_dir) if cache_dir else config.root / DIR_NAME
            cache = Cache(directory, config.fingerprint())
        show_progress = output_format == "text" and sys.stdout.isatty()
        results = lint_paths(
            found.files,
            config,
            jobs=jobs,
            cache=cache,
            progress=progress_bar(err) if show_progress else None,
            project=project,
            root=root,
            wants=wants,
        )
    errors.extend(r.error for r in results if r.error is not None)
    stdin_data = data if paths == ("-",) else None
    for result in results:
        if result.findings:
            sources[result.path] = _read_lines(result.path, stdin_data)

    if write_baseline or baseline:
        from .. import baseline as baseline_mod

        if write_baseline:
            target = Path(write_baseline)
            target.write_text(baseline_mod.build(results, sources, target.parent))
            count = sum(len(r.findings) for r in results)
            err.print(f"Recorded {count} finding{'s' * (count != 1)} in {target}.")
            sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)
        assert baseline is not None
        try:
            recorded = baseline_mod.load(Path(baseline).read_text(), baseline)
        except (OSError, baseline_mod.BaselineError) as exc:
            print_error(err, str(exc))
            sys.exit(EXIT_ERROR)
        dropped = baseline_mod.apply(results, recorded, sources, Path(baseline).parent)
        if dropped and output_format == "text":
            err.print(f"{dropped} finding{'s' * (dropped != 1)} recorded in {baseline} not shown.")

    outcomes = []
    if confirm_findings:
        from ..confirm.plan import plan
        from ..confirm.run import confirm as run_confirm

        outcomes = run_confirm(
            plan(results, include_clean=False),
            ["cpu", "cuda"],
            config.confirm_timeout or 240.0,
            dict(config.confirm_factories),
        )
    if output_format == "json":
        from ..report.json_format import render_json

        click.echo(render_json(results, outcomes))
    elif output_format == "concise":
        from ..report.json_format import render_concise

        text = render_concise(results)
        if text:
            click.echo(text)
    elif output_format == "sarif":
        from ..report.sarif import render_sarif

        click.echo(render_sarif(results, errors, config.root))
    elif output_format == "github":
        from ..report.ci_formats import render_github

        click.echo(render_github(results, errors))
    elif output_format == "junit":
        from ..report.ci_formats import render_junit

        click.echo(render_junit(results, errors))
    else:
        from ..report.text import render_text

        render_text(out, results, errors, sources, statistics=statistics)
        if outcomes:
            from ..confirm.report import render_confirm_table

            render_confirm_table(out, outcomes, ["cpu", "cuda"])
    for error in errors:
        print_error(err, error.describe())
    if errors:
        sys.exit(EXIT_ERROR)
    if any(r.findings for r in results) and not exit_zero:
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_CLEAN)


def _read_lines(path: str, data: bytes | None) -> list[str]:
    try:
        raw = data if data is not None else Path(path).read_bytes()
    except OSError:
        return []
    return raw.decode("utf-8", errors="replace").splitlines()
