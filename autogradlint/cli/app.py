"""The `autogradlint` command group."""

from __future__ import annotations

import click

from .. import __version__


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
