"""`autogradlint clean`: remove the cache and what interrupted fixes left behind."""

from __future__ import annotations

from pathlib import Path

import click

from .app import main
from .common import load_config


@main.command()
@click.option("--cache-dir", type=click.Path(file_okay=False), envvar="AUTOGRADLINT_CACHE_DIR")
def clean(cache_dir: str | None) -> None:
    """Remove the result cache, and temporary files a killed `fix` left in the project."""
    from ..cache import DIR_NAME
    from ..cache import clean as clean_cache
    from ..fix.write import remove_stale_temps_below

    config = load_config(None, (".",))
    directory = Path(cache_dir) if cache_dir else config.root / DIR_NAME
    removed = clean_cache(directory)
    click.echo(f"Removed {removed} cache file{'s' * (removed != 1)} from {directory}")
    temps = remove_stale_temps_below(config.root, config.excludes_name)
    if temps:
        click.echo(f"Removed {temps} temporary file{'s' * (temps != 1)} of interrupted fixes")
