"""What every command shares: consoles, exit codes, configuration, the project the paths belong to."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from ..config import Config, ConfigError, discover, expand_selectors, load_file
from ..project import EMPTY
from ..runner import discover as discover_files

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


def setup(
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
    config = load_config(config_file, paths)
    if select:
        config = replace(config, select=_split(select))
    if extend_select:
        config = replace(config, extend_select=config.extend_select + _split(extend_select))
    if ignore:
        config = replace(config, ignore=config.ignore + _split(ignore))
    expand_selectors(config.select + config.extend_select + config.ignore)
    return config


def project_files(
    anchor: str,
    config: Config,
    respect_gitignore: bool,
    named: tuple[str, ...] = (),
    found: list[Path] | None = None,
) -> tuple[Path | None, list[Path]]:
    """The project the named paths belong to, and all its Python files: every front end
    builds the same index from them, whatever paths were named (project.py). When the root
    itself was named, its files were just found: they are not walked again."""
    from ..project import project_root

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
    from ..outline import outline
    from ..runner import project_index
    from ..source_io import decode

    root, project = project_files(name, config, respect_gitignore)
    text = decode(data)
    if root is None or not isinstance(text, str):
        return EMPTY
    index = project_index([], project, root)
    return index.view(name, text=text, outline=outline(data))


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
