"""`autogradlint clean`: remove the cache and what interrupted fixes left behind."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..config import ConfigError
from ..model import printable
from .app import main
from .common import EXIT_ERROR, Console, load_config, print_error


@main.command()
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar="AUTOGRADLINT_CACHE_DIR",
    help="The cache to remove (default: .autogradlint_cache beside the config). Only files "
    "autogradlint wrote are removed, and only from a directory with its signature.",
)
def clean(cache_dir: str | None) -> None:
    """Remove the result cache, and temporary files a killed `fix` left in the project."""
    from ..cache import DIR_NAME
    from ..cache_dir import CacheDirRefused
    from ..cache_dir import clean as clean_cache
    from ..fix.write import remove_stale_temps_below

    try:
        config = load_config(None, (".",))
    except ConfigError as exc:
        print_error(Console(stderr=True), str(exc))
        sys.exit(EXIT_ERROR)
    directory = Path(cache_dir) if cache_dir else config.root / DIR_NAME
    try:
        removed, kept = clean_cache(directory)
    except CacheDirRefused as exc:
        print_error(Console(stderr=True), str(exc))
        sys.exit(EXIT_ERROR)
    where = printable(str(directory))
    click.echo(f"Removed {removed} cache file{'s' * (removed != 1)} from {where}")
    if kept:
        shown = ", ".join(printable(name) for name in kept)
        click.echo(f"Kept what autogradlint did not write in {where}: {shown}")
    temps = remove_stale_temps_below(config.root, config.excludes_name)
    if temps:
        click.echo(f"Removed {temps} temporary file{'s' * (temps != 1)} of interrupted fixes")
