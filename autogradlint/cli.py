"""Command line: `autogradlint check`, `autogradlint rule`. Thin: all analysis is in the engine."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click

from . import __version__
from .config import Config, ConfigError, discover, expand_selectors, load_file
from .meta import FAMILIES, all_rules, get_rule
from .model import FileError
from .project import EMPTY
from .runner import discover as discover_files
from .runner import lint_paths

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class Console:
    """rich's Console, imported on first use: a warm run that prints nothing never pays for it."""

    def __init__(self, **options: object) -> None:
        self._options = options
        self._console: object | None = None

    def __getattr__(self, name: str) -> object:
        if self._console is None:
            from rich.console import Console as RichConsole

            self._console = RichConsole(**self._options)  # type: ignore[arg-type]
        return getattr(self._console, name)


def print_error(console: Console, message: str) -> None:
    """`error: message`, the message printed as it is (a path or a hint like
    `pip install 'autogradlint[lsp]'` must not be read as rich markup)."""
    from rich.markup import escape

    console.print(f"[bold red]error[/]: {escape(message)}", soft_wrap=True)


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return tuple(out)


def _load_config(config_file: str | None, paths: tuple[str, ...]) -> Config:
    if config_file:
        loaded = load_file(Path(config_file))
        if loaded is None:
            raise ConfigError(f"{config_file}: no [tool.autogradlint] table")
        return loaded
    start = Path(paths[0]) if paths and paths[0] != "-" else Path.cwd()
    return discover(start if start.exists() else Path.cwd())


def _stdin_anchor(paths: tuple[str, ...], stdin_filename: str | None) -> tuple[str, ...]:
    """Where configuration is looked for: for stdin, from the file it stands for."""
    if paths == ("-",) and stdin_filename:
        return (stdin_filename,)
    return paths


def _setup(
    paths: tuple[str, ...],
    config_file: str | None,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    force_exclude: bool = False,
    stdin_filename: str | None = None,
) -> tuple[Console, tuple[str, ...], Config]:
    """The stderr console, the paths (default `.`) and the effective config; exits 2 on a
    configuration error, which is reported with the file at fault."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    paths = paths or (".",)
    try:
        anchor = _stdin_anchor(paths, stdin_filename)
        config = _config_from_options(config_file, anchor, select, extend_select, ignore)
    except ConfigError as exc:
        print_error(err, str(exc))
        sys.exit(EXIT_ERROR)
    if force_exclude:
        paths = _without_excluded(paths, config)
    return err, paths, config


def _without_excluded(paths: tuple[str, ...], config: Config) -> tuple[str, ...]:
    """`--force-exclude`: drop named files that `exclude` matches (pre-commit names each file)."""
    if paths == ("-",):
        return paths
    kept = tuple(p for p in paths if not (Path(p).is_file() and config.is_excluded(Path(p))))
    if not kept:
        sys.exit(EXIT_CLEAN)  # everything pre-commit passed is excluded
    return kept


def _config_from_options(
    config_file: str | None,
    paths: tuple[str, ...],
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
) -> Config:
    config = _load_config(config_file, paths)
    if select:
        config = replace(config, select=_split(select))
    if extend_select:
        config = replace(config, extend_select=config.extend_select + _split(extend_select))
    if ignore:
        config = replace(config, ignore=config.ignore + _split(ignore))
    expand_selectors(config.select + config.extend_select + config.ignore)
    return config


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autogradlint")
def main() -> None:
    """A static linter for custom PyTorch autograd code.

    `check`, `fix`, `rule` and `lsp` only read source: they never import or execute the code
    they analyse.
    """
    _exit_cleanly_on_sigterm()


def _exit_cleanly_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so `finally` blocks remove temporary files: an interrupted
    `fix --apply` leaves every file either old or new, and the cache file is never partial."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (e.g. under a test runner's worker)
        pass


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
    err, paths, config = _setup(
        paths, config_file, select, extend_select, ignore, force_exclude, stdin_filename
    )
    if fix and paths != ("-",):
        fix_errors, _ = _fix_paths(
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
        from .lint import lint_file

        data = sys.stdin.buffer.read()
        view = _stdin_view(name, data, config, respect_gitignore) if stdin_filename else EMPTY
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
        root, project = _project(paths[0], config, respect_gitignore, paths, found.files)
        cache = None
        if not no_cache:
            from .cache import DIR_NAME, Cache

            directory = Path(cache_dir) if cache_dir else config.root / DIR_NAME
            cache = Cache(directory, config.fingerprint())
        show_progress = output_format == "text" and sys.stdout.isatty()
        results = lint_paths(
            found.files,
            config,
            jobs=jobs,
            cache=cache,
            progress=_progress(err) if show_progress else None,
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
        from . import baseline as baseline_mod

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
        from .confirm.plan import plan
        from .confirm.run import confirm as run_confirm

        outcomes = run_confirm(
            plan(results, include_clean=False),
            ["cpu", "cuda"],
            config.confirm_timeout or 240.0,
            dict(config.confirm_factories),
        )
    if output_format == "json":
        from .report.json_format import render_json

        click.echo(render_json(results, outcomes))
    elif output_format == "concise":
        from .report.json_format import render_concise

        text = render_concise(results)
        if text:
            click.echo(text)
    elif output_format == "sarif":
        from .report.sarif import render_sarif

        click.echo(render_sarif(results, errors, config.root))
    elif output_format == "github":
        from .report.ci_formats import render_github

        click.echo(render_github(results, errors))
    elif output_format == "junit":
        from .report.ci_formats import render_junit

        click.echo(render_junit(results, errors))
    else:
        from .report.text import render_text

        render_text(out, results, errors, sources, statistics=statistics)
        if outcomes:
            from .confirm.report import render_confirm_table

            render_confirm_table(out, outcomes, ["cpu", "cuda"])
    for error in errors:
        print_error(err, error.describe())
    if errors:
        sys.exit(EXIT_ERROR)
    if any(r.findings for r in results) and not exit_zero:
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_CLEAN)


def _project(
    anchor: str,
    config: Config,
    respect_gitignore: bool,
    named: tuple[str, ...] = (),
    found: list[Path] | None = None,
) -> tuple[Path | None, list[Path]]:
    """The project the named paths belong to, and all its Python files: every front end
    builds the same index from them, whatever paths were named (project.py). When the root
    itself was named, its files were just found: they are not walked again."""
    from .project import project_root

    root = project_root(Path(anchor), config.source)
    if root is None:
        return None, []  # a loose file: the named paths are the project
    if Config(root=root, exclude=config.exclude, extend_exclude=config.extend_exclude).is_excluded(
        Path(anchor).resolve()
    ):
        return None, []  # a package in a virtualenv, say: not part of the project around it
    if found is not None and any(Path(p).resolve() == root.resolve() for p in named):
        return root, []
    return root, discover_files([str(root)], config, respect_gitignore=respect_gitignore).files


def _stdin_view(name: str, data: bytes, config: Config, respect_gitignore: bool):  # type: ignore[no-untyped-def]
    """What the project says about source read from stdin as the file `name`."""
    from .outline import outline
    from .runner import project_index
    from .source_io import decode

    root, project = _project(name, config, respect_gitignore)
    text = decode(data)
    if root is None or not isinstance(text, str):
        return EMPTY
    index = project_index([], project, root)
    return index.view(name, text=text, outline=outline(data))


def _progress(console: Console):  # type: ignore[no-untyped-def]
    """A rich progress bar for long runs (only on a terminal; transient)."""
    from contextlib import contextmanager

    @contextmanager
    def factory(total: int):  # type: ignore[no-untyped-def]
        if total < 20:
            yield lambda: None
            return
        from rich.console import Console as RichConsole
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=RichConsole(stderr=True),
            transient=True,
        ) as bar:
            task = bar.add_task("Analysing", total=total)
            yield lambda: bar.advance(task)

    return factory


@main.command()
@click.option("--cache-dir", type=click.Path(file_okay=False), envvar="AUTOGRADLINT_CACHE_DIR")
def clean(cache_dir: str | None) -> None:
    """Remove the result cache, and temporary files a killed `fix` left in the project."""
    from .cache import DIR_NAME
    from .cache import clean as clean_cache
    from .fix.write import remove_stale_temps_below

    config = _load_config(None, (".",))
    directory = Path(cache_dir) if cache_dir else config.root / DIR_NAME
    removed = clean_cache(directory)
    click.echo(f"Removed {removed} cache file{'s' * (removed != 1)} from {directory}")
    temps = remove_stale_temps_below(config.root, config.excludes_name)
    if temps:
        click.echo(f"Removed {temps} temporary file{'s' * (temps != 1)} of interrupted fixes")


def _read_lines(path: str, data: bytes | None) -> list[str]:
    try:
        raw = data if data is not None else Path(path).read_bytes()
    except OSError:
        return []
    return raw.decode("utf-8", errors="replace").splitlines()


@main.command()
@click.argument("rule_id", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule(rule_id: str | None, show_all: bool, output_format: str) -> None:
    """Show a rule's documentation (by code or name), or list all rules."""
    out = Console(highlight=False, soft_wrap=True)
    rules = all_rules()
    if show_all or rule_id is None:
        if output_format == "json":
            import json

            click.echo(
                json.dumps(
                    [
                        {
                            "code": m.id,
                            "name": m.name,
                            "family": m.family,
                            "severity": m.severity,
                            "fix": m.fix,
                            "summary": m.summary,
                        }
                        for m in rules.values()
                    ],
                    indent=2,
                )
            )
            return
        for family, title in FAMILIES.items():
            members = [m for m in rules.values() if m.family == family]
            if not members:
                continue
            out.print(f"[bold]{family}: {title}[/bold]")
            for m in members:
                out.print(f"  {m.id}  {m.name:<42} {m.severity:<8} fix:{m.fix:<7} {m.summary}")
        return
    meta = get_rule(rule_id)
    if meta is None:
        print_error(Console(stderr=True), f"unknown rule {rule_id!r}")
        sys.exit(EXIT_ERROR)
    if output_format == "json":
        import json

        click.echo(
            json.dumps(
                {
                    "code": meta.id,
                    "name": meta.name,
                    "family": meta.family,
                    "severity": meta.severity,
                    "fix": meta.fix,
                    "summary": meta.summary,
                    "docs": meta.docs,
                    "semantics": list(meta.semantics),
                },
                indent=2,
            )
        )
        return
    click.echo(f"# {meta.name} ({meta.id})\n")
    click.echo(
        f"Family {meta.family} ({FAMILIES[meta.family]}); severity: {meta.severity}; "
        f"fix: {meta.fix}.\n"
    )
    click.echo(meta.summary + "\n")
    click.echo(meta.docs + "\n")
    click.echo(_evidence(meta.semantics))
    click.echo("## Example\n")
    click.echo("```python\n" + meta.invalid[0].code.rstrip() + "\n```")
    if meta.invalid[0].fixed:
        click.echo("\nUse instead:\n\n```python\n" + meta.invalid[0].fixed.rstrip() + "\n```")


def _evidence(row_ids: tuple[str, ...]) -> str:
    """The rows of docs/semantics.md a rule cites, as PyTorch 2.13 showed them."""
    from .evidence import semantics_rows

    rows = semantics_rows()
    lines = ["## Evidence (docs/semantics.md, verified by tests/semantics)\n"]
    for row_id in row_ids:
        row = rows.get(row_id)
        lines.append(f"- {row_id}: {row.describe()}" if row else f"- {row_id}")
    return "\n".join(lines) + "\n"


def _fix_paths(
    paths: tuple[str, ...],
    config: Config,
    *,
    apply: bool,
    unsafe: bool,
    err: Console,
    respect_gitignore: bool = True,
    show_diff: bool = False,
) -> tuple[list[FileError], int]:
    """Fix every file under `paths`; print diffs or write. Returns (errors, findings left)."""
    import difflib
    from collections import Counter

    from .fix.write import WriteRefused, write_fixed
    from .runner import fix_files

    found = discover_files(paths, config, respect_gitignore=respect_gitignore)
    root, project = _project(paths[0], config, respect_gitignore, paths, found.files)
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
    return errors, remaining


@main.command("fix")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--apply", "apply_", is_flag=True, help="Write the fixes (default: show a diff).")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that change behaviour.")
@click.option("--select", multiple=True, help="Rules to fix: ALL, AGL101, AGL1, or a name.")
@click.option("--extend-select", multiple=True)
@click.option("--ignore", multiple=True, help="Rules not to fix.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="Config file.")
@click.option("--stdin-filename", help="The path to report for source read from `-`.")
@click.option("--no-respect-gitignore", is_flag=True)
@click.option("--force-exclude", is_flag=True, help="Apply `exclude` to named files too.")
def fix_command(
    paths: tuple[str, ...],
    apply_: bool,
    unsafe_fixes: bool,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    config_file: str | None,
    stdin_filename: str | None,
    no_respect_gitignore: bool,
    force_exclude: bool,
) -> None:
    """Show (or with --apply, write) the fixes for PATHS; `-` fixes stdin to stdout.

    Safe fixes never change what correct code computes; --unsafe-fixes adds the rewrites that
    fix the bug itself and so change values. Every fix is re-parsed and re-linted before it is
    written, writes are atomic, and a file changed since it was read is never overwritten.
    """
    err, paths, config = _setup(
        paths, config_file, select, extend_select, ignore, force_exclude, stdin_filename
    )
    if paths == ("-",):
        from .fix.loop import fix_text
        from .fix.write import DecodeFailed, decode_source
        from .source_io import detect_encoding

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
            project=_stdin_view(name, data, config, True) if stdin_filename else EMPTY,
        )
        sys.stdout.buffer.write(outcome.source.encode(encoding))
        sys.stdout.flush()
        if outcome.error is not None:
            print_error(err, outcome.error)
            sys.exit(EXIT_ERROR)
        sys.exit(EXIT_FINDINGS if outcome.remaining else EXIT_CLEAN)
    errors, remaining = _fix_paths(
        paths,
        config,
        apply=apply_,
        unsafe=unsafe_fixes,
        err=err,
        respect_gitignore=not no_respect_gitignore,
        show_diff=not apply_,
    )
    for error in errors:
        print_error(err, error.describe())
    if errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if remaining else EXIT_CLEAN)


@main.command()
def lsp() -> None:
    """Run the language server over stdio (needs the `lsp` extra: pygls, lsprotocol)."""
    import importlib.util

    missing = [name for name in ("pygls", "lsprotocol") if importlib.util.find_spec(name) is None]
    if missing:  # pragma: no cover - depends on the environment
        exc = f"{' and '.join(missing)} not installed"
        print_error(
            Console(stderr=True),
            f"the language server needs pygls and lsprotocol ({exc}); "
            "install them with `pip install 'autogradlint[lsp]'`",
        )
        sys.exit(EXIT_ERROR)
    from .lsp.server import run

    run()


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda", "all"]),
    default="all",
    show_default=True,
    help="Where to run the probes.",
)
@click.option("--timeout", type=float, help="Seconds per probe subprocess (default 240).")
@click.option(
    "--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--select", multiple=True, help="Only findings of these rules.")
@click.option("--ignore", multiple=True)
@click.option("--config", "config_file", type=click.Path(dir_okay=False))
@click.option("--no-clean", is_flag=True, help="Do not probe classes without findings.")
def confirm(
    paths: tuple[str, ...],
    device: str,
    timeout: float | None,
    output_format: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    config_file: str | None,
    no_clean: bool,
) -> None:
    """EXECUTE flagged code to confirm findings at runtime (families A, B, C and AGL401).

    Unlike every other command this imports and runs the code under PATHS: each probe runs in a
    fresh subprocess with a timeout. It needs torch (`pip install 'autogradlint[confirm]'`).
    Verdicts per class and device: confirmed, not_reproduced or could_not_run. Classes without
    findings are probed too (unless --no-clean), so that a clean verdict is evidence as well.
    """
    import importlib.util

    err, paths, config = _setup(paths, config_file, select, (), ignore)
    if importlib.util.find_spec("torch") is None:
        print_error(
            err,
            "the confirmer needs torch: "
            "`pip install 'autogradlint[confirm]'` (or `pip install torch`)",
        )
        sys.exit(EXIT_ERROR)
    from .confirm.plan import plan
    from .confirm.run import DEVICE_CHOICES
    from .confirm.run import confirm as run_confirm

    found = discover_files(paths, config)
    root, project = _project(paths[0], config, True, paths, found.files)
    results = lint_paths(
        found.files, config, project=project, root=root, wants=frozenset({"classes"})
    )
    errors = list(found.errors) + [r.error for r in results if r.error is not None]
    targets = plan(results, include_clean=not no_clean)
    devices = DEVICE_CHOICES[device]
    outcomes = run_confirm(
        targets,
        devices,
        timeout or config.confirm_timeout or 240.0,
        dict(config.confirm_factories),
    )
    if output_format == "json":
        from .confirm.report import render_confirm_json

        click.echo(render_confirm_json(outcomes))
    else:
        from .confirm.report import render_confirm_table

        render_confirm_table(Console(highlight=False), outcomes, devices)
    for error in errors:
        print_error(err, error.describe())
    if errors:
        sys.exit(EXIT_ERROR)
    confirmed = any(o.verdict == "confirmed" and o.target.findings for o in outcomes)
    sys.exit(EXIT_FINDINGS if confirmed else EXIT_CLEAN)
