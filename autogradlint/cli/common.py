"""What every command shares: consoles, exit codes, configuration, the project the paths belong to."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..config import Config, ConfigError, discover, expand_selectors, load_file
from ..model import FileError
from ..runner import discover as discover_files
from ..view import EMPTY

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


class _LazyConsole:
    """rich's Console, imported on first use: a warm run that prints nothing never pays for it."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console as RichConsole

            self._console = RichConsole(**self._options)
        return getattr(self._console, name)


if TYPE_CHECKING:
    # The proxy stands for a rich Console: type-check its callers against the real one.
    from rich.console import Console

    from ..cache import Cache
else:
    Console = _LazyConsole


def print_error(console: Console, message: str) -> None:
    """`error: message`, the message printed as it is (a path or a hint like
    `pip install 'autogradlint[lsp]'` must not be read as rich markup)."""
    from rich.markup import escape

    console.print(f"[bold red]error[/]: {escape(message)}", soft_wrap=True)


def print_errors(console: Console, errors: list[FileError]) -> None:
    """Each error, naming its file as the text report does (relative to the current directory)."""
    from dataclasses import replace

    from ..report.paths import relative

    for error in errors:
        print_error(console, replace(error, path=relative(error.path)).describe())


def open_cache(cache_dir: str | None, config: Config, err: Console) -> Cache:
    """The result cache in `cache_dir` (default: beside the configuration). Exits 2, having
    written nothing, when that directory holds files autogradlint did not write; says when a
    cache file was ignored or the cache is off."""
    from ..cache import DIR_NAME, Cache
    from ..cache_dir import CacheDirRefused

    directory = Path(cache_dir) if cache_dir else config.root / DIR_NAME
    try:
        cache = Cache(directory, config.fingerprint())
    except CacheDirRefused as exc:
        print_error(err, str(exc))
        sys.exit(EXIT_ERROR)
    if cache.warning is not None:
        print_warning(err, cache.warning)
    return cache


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return tuple(out)


def load_config(config_file: str | None, paths: tuple[str, ...]) -> Config:
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


@dataclass(frozen=True)
class Overrides:
    """What the command line changes in the configuration file's settings (ruff's flags)."""

    config_file: str | None = None
    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[str, ...] = ()  # "pattern:CODE,CODE"
    extend_per_file_ignores: tuple[str, ...] = ()

    def apply(self, config: Config) -> Config:
        # (flag values, the setting they change, whether they add to it, how they are read),
        # in the order ruff applies them: `--per-file-ignores` replaces, then the extension adds.
        changes = (
            (self.select, "select", False, _split),
            (self.extend_select, "extend_select", True, _split),
            (self.ignore, "ignore", True, _split),
            (self.exclude, "exclude", False, _split),
            (self.extend_exclude, "extend_exclude", True, _split),
            (self.per_file_ignores, "per_file_ignores", False, _per_file),
            (self.extend_per_file_ignores, "per_file_ignores", True, _per_file),
        )
        for given, setting, adds, read in changes:
            if given:
                value: Any = read(given)
                value = getattr(config, setting) + value if adds else value
                config = replace(config, **{setting: value})
        expand_selectors(config.select + config.extend_select + config.ignore)
        for _pattern, codes in config.per_file_ignores:
            expand_selectors(codes)
        return config


def _per_file(values: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`--per-file-ignores 'tests/*:AGL4,AGL5'` (ruff's form), one mapping per value."""
    out = []
    for value in values:
        pattern, colon, codes = value.rpartition(":")
        if not colon or not pattern or not codes.strip():
            raise ConfigError(
                f"--per-file-ignores {value!r}: expected PATTERN:CODES, e.g. 'tests/*:AGL4'"
            )
        out.append((pattern, _split((codes,))))
    return tuple(out)


def config_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options every linting command takes to change the configuration."""
    options = [
        click.option(
            "--config", "config_file", type=click.Path(dir_okay=False), help="Config file."
        ),
        click.option(
            "--select", multiple=True, help="Rules to enable: ALL, AGL101, AGL1, or a name."
        ),
        click.option(
            "--extend-select", multiple=True, help="Rules to enable on top of the selection."
        ),
        click.option("--ignore", multiple=True, help="Rules to disable: code, prefix or name."),
        click.option("--exclude", multiple=True, help="Patterns to exclude (replaces `exclude`)."),
        click.option(
            "--extend-exclude", multiple=True, help="Patterns to exclude, on top of `exclude`."
        ),
        click.option(
            "--per-file-ignores",
            multiple=True,
            metavar="PATTERN:CODES",
            help="Rules to disable in matching files (replaces `per-file-ignores`).",
        ),
        click.option(
            "--extend-per-file-ignores",
            multiple=True,
            metavar="PATTERN:CODES",
            help="Like --per-file-ignores, on top of the configuration's.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def overrides_of(options: dict[str, object]) -> Overrides:
    """The Overrides in a command's keyword arguments (removed from them)."""
    fields = Overrides.__dataclass_fields__
    return Overrides(**{name: options.pop(name) for name in list(options) if name in fields})  # type: ignore[arg-type]


def setup(
    paths: tuple[str, ...],
    overrides: Overrides,
    force_exclude: bool = False,
    stdin_filename: str | None = None,
) -> tuple[Console, tuple[str, ...], Config]:
    """The stderr console, the paths (default `.`) and the effective config; exits 2 on a
    configuration error, which is reported with the file at fault."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    paths = paths or (".",)
    try:
        anchor = _stdin_anchor(paths, stdin_filename)
        config = overrides.apply(load_config(overrides.config_file, anchor))
    except ConfigError as exc:
        print_error(err, str(exc))
        sys.exit(EXIT_ERROR)
    for note in config.notes:
        print_warning(err, note)
    if force_exclude:
        paths = _without_excluded(paths, config)
    return err, paths, config


def print_warning(console: Console, message: str) -> None:
    from rich.markup import escape

    console.print(f"[bold yellow]warning[/]: {escape(message)}", soft_wrap=True)


def _without_excluded(paths: tuple[str, ...], config: Config) -> tuple[str, ...]:
    """`--force-exclude`: drop named files that `exclude` matches (pre-commit names each file)."""
    if paths == ("-",):
        return paths
    kept = tuple(p for p in paths if not (Path(p).is_file() and config.is_excluded(Path(p))))
    if not kept:
        sys.exit(EXIT_CLEAN)  # everything pre-commit passed is excluded
    return kept


def project_files(
    anchor: str,
    config: Config,
    respect_gitignore: bool,
    named: tuple[str, ...] = (),
    found: list[str] | None = None,
) -> tuple[Path | None, list[str]]:
    """The project the named paths belong to, and all its Python files: every front end
    builds the same index from them, whatever paths were named (view.py). When the root
    itself was named, its files were just found: they are not walked again."""
    from ..view import project_root

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


def stdin_view(name: str, data: bytes, config: Config, respect_gitignore: bool):  # type: ignore[no-untyped-def]
    """What the project says about source read from stdin as the file `name`."""
    from ..source_io import decode
    from ..text.outline import outline
    from ..view import build_index

    root, project = project_files(name, config, respect_gitignore)
    text = decode(data)
    if root is None or not isinstance(text, str):
        return EMPTY
    return build_index(root, project).view(name, text=text, outline=outline(data))


def progress_bar(console: Console):  # type: ignore[no-untyped-def]
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


@contextmanager
def report_sink(
    output_file: str | None, color: str
) -> Iterator[tuple[Callable[[str], None], Console]]:
    """Where the report goes: stdout, or `-o FILE` (created with its directories; never
    coloured unless --color=always). Yields a line printer and a rich console on one stream."""
    if output_file is None:
        yield (
            click.echo,
            Console(
                highlight=False,
                soft_wrap=True,
                force_terminal=True if color == "always" else None,
                no_color=True if color == "never" else None,
            ),
        )
        return
    target = Path(output_file)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle = target.open("w", encoding="utf-8")
    except OSError as exc:
        print_error(Console(stderr=True), f"{output_file}: cannot write: {exc.strerror or exc}")
        sys.exit(EXIT_ERROR)
    with handle:
        console = Console(
            file=handle,
            highlight=False,
            soft_wrap=True,
            force_terminal=color == "always",
            no_color=color != "always",
            width=10_000,
        )
        yield (lambda text: click.echo(text, file=handle)), console


def show_settings(config: Config, path: str) -> str:
    """What `check` uses for `path`: where the configuration came from, the rules it enables
    there, and every value as the configuration file would set it (a valid TOML table)."""
    from ..config import to_toml

    target = Path(path)
    enabled = sorted(config.enabled_for(target)) if path != "-" else sorted(config.enabled_rules())
    source = str(config.source.resolve()) if config.source else "(none: defaults)"
    if config.extended:
        source += " (extends " + ", then ".join(str(p) for p in config.extended) + ")"
    lines = [
        f"# Resolved settings for: {target.resolve() if path != '-' else '<stdin>'}",
        f"# Settings path: {source}",
        f"# Project root: {config.root.resolve()}",
        f"# Enabled rules for this path: {', '.join(enabled) or '(none)'}",
        "",
        to_toml(config),
    ]
    if config.confirm_timeout is None:
        lines.append("# timeout: not set (`confirm` waits 240 s per probe)")
    return "\n".join(lines)
