"""The `autogradlint` command group."""

from __future__ import annotations

import os
import sys

import click

from ..version import __version__


class _Group(click.Group):
    """click's group, but Ctrl-C exits 130 (as a shell reports a command stopped by SIGINT),
    where click would print "Aborted!" and exit 1: the status that means "findings"."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            raise SystemExit(130) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
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


def run() -> None:
    """The console entry point: `main`, then an exit that skips tearing the interpreter down.

    Freeing every module and object at exit (libcst's node classes, the project index) takes
    70-100 ms after the report is out, about 5% of a cold run over torch. Everything this
    process writes is flushed or closed by then: the report, the cache (saved explicitly),
    the pools (closed by their context managers)."""
    from ..runtime.collector import for_a_command

    for_a_command()
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    else:  # pragma: no cover - click's standalone mode always exits
        code = 0
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe (`| head`): nothing more can be written anyway
    os._exit(code or 0)
