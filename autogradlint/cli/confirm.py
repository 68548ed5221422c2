"""`autogradlint confirm`: execute flagged code to confirm findings at runtime."""

from __future__ import annotations

import sys

import click

from ..runner import discover as discover_files
from ..runner import lint_paths
from .app import main
from .common import (
    EXIT_CLEAN,
    EXIT_ERROR,
    EXIT_FINDINGS,
    Console,
    Overrides,
    print_error,
    project_files,
    setup,
)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda", "all"]),
    default="all",
    show_default=True,
    help="Where to run the probes.",
)
@click.option(
    "--timeout",
    type=float,
    help="Seconds for each module's import and for each probe (default 240).",
)
@click.option(
    "--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--select", multiple=True, help="Only findings of these rules.")
@click.option("--ignore", multiple=True)
@click.option("--config", "config_file", type=click.Path(dir_okay=False))
@click.option(
    "--all",
    "probe_all",
    is_flag=True,
    help="Probe every Function, custom op and override class, flagged or not.",
)
@click.option("--no-clean", is_flag=True, help="Probe only the classes with findings.")
def confirm(
    paths: tuple[str, ...],
    device: str,
    timeout: float | None,
    output_format: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    config_file: str | None,
    probe_all: bool,
    no_clean: bool,
) -> None:
    """EXECUTE flagged code to confirm findings at runtime (families A, B, C and AGL401).

    Unlike every other command this imports and runs the code under PATHS, in a child process
    with a timeout. It needs torch (`pip install 'autogradlint[confirm]'`). Verdicts per class
    and device: confirmed (on each of 3 random input draws, every RNG reseeded before each run),
    not_reproduced or could_not_run. Besides the classes with findings, their clean twins are
    probed (the clean classes in the same files, and those named like a flagged class
    elsewhere: a fixed copy), so that a clean verdict is evidence as well; --all probes every
    class, --no-clean none but the flagged.

    The child runs in its own session (what it starts is killed at the end, also what left the
    session), with memory, file-size and process limits, in a private temporary directory. It
    is NOT kept from reading or writing your files outside that directory, nor from the
    network: run it only on code you trust.
    """
    import importlib.util

    err, paths, config = setup(paths, Overrides(config_file, select=select, ignore=ignore))
    if probe_all and no_clean:
        print_error(err, "--all and --no-clean contradict each other: pass one")
        sys.exit(EXIT_ERROR)
    if importlib.util.find_spec("torch") is None:
        print_error(
            err,
            "the confirmer needs torch: "
            "`pip install 'autogradlint[confirm]'` (or `pip install torch`)",
        )
        sys.exit(EXIT_ERROR)
    from ..confirm.plan import plan
    from ..confirm.run import DEVICE_CHOICES
    from ..confirm.run import confirm as run_confirm

    found = discover_files(paths, config)
    root, project = project_files(paths[0], config, True, paths, found.files)
    results = lint_paths(
        found.files, config, project=project, root=root, wants=frozenset({"classes"})
    )
    errors = list(found.errors) + [r.error for r in results if r.error is not None]
    targets = plan(results, clean="all" if probe_all else "none" if no_clean else "twins")
    if not targets and output_format == "text":
        click.echo(
            "Nothing to probe: no finding the confirmer can run in these files "
            "(`--all` probes every class)."
        )
        for error in errors:
            print_error(err, error.describe())
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)
    devices = DEVICE_CHOICES[device]
    outcomes = run_confirm(
        targets,
        devices,
        timeout or config.confirm_timeout or 240.0,
        dict(config.confirm_factories),
    )
    if output_format == "json":
        from ..confirm.report import render_confirm_json

        click.echo(render_confirm_json(outcomes))
    else:
        from ..confirm.report import render_confirm_table

        render_confirm_table(Console(highlight=False), outcomes, devices)
    for error in errors:
        print_error(err, error.describe())
    if errors:
        sys.exit(EXIT_ERROR)
    confirmed = any(o.verdict == "confirmed" and o.target.findings for o in outcomes)
    sys.exit(EXIT_FINDINGS if confirmed else EXIT_CLEAN)
