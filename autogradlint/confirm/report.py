"""The confirmer's report: a table a person reads at a glance, or JSON."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from .run import NOT_RUN, Outcome

STYLE = {
    "confirmed": "bold red",
    "not_reproduced": "green",
    "could_not_run": "yellow",
    NOT_RUN: "dim",
}


def render_confirm_json(outcomes: list[Outcome]) -> str:
    return json.dumps([o.to_json() for o in outcomes], indent=2)


def render_confirm_table(console: Console, outcomes: list[Outcome], devices: list[str]) -> None:
    """One row per class and probe with a verdict per device; the evidence follows the table."""
    table = Table(title="autogradlint confirm", expand=False)
    table.add_column("#", justify="right")
    table.add_column("class")
    table.add_column("probe")
    table.add_column("finding")
    for dev in devices:
        table.add_column(dev)
    for number, outcome in enumerate(outcomes, start=1):
        t = outcome.target
        cells = []
        for dev in devices:
            verdict = outcome.devices.get(dev, {"verdict": NOT_RUN})["verdict"]
            cells.append(f"[{STYLE[verdict]}]{verdict.replace('_', ' ')}[/]")
        findings = ", ".join(sorted({f.rule_id for f in t.findings})) or "[dim]none[/dim]"
        table.add_row(
            str(number),
            f"{escape(Path(t.path).name)}:{t.line} {escape(t.qualname)}",
            t.kind,
            findings,
            *cells,
        )
    # A terminal gets the table at its width; a pipe or a file gets it whole, never a name cut
    # short to fit 80 columns (rich's width when it sees no terminal).
    if console.is_terminal:
        console.print(table)
    else:
        unbounded = console.options.update_width(1 << 20)
        width = console.width
        console.width = max(width, Measurement.get(console, unbounded, table).maximum)
        try:
            console.print(table)
        finally:
            console.width = width
    for number, outcome in enumerate(outcomes, start=1):
        lines = []
        if outcome.disagreement:
            lines.append("devices disagree")
        for dev, result in outcome.devices.items():
            if result["verdict"] == NOT_RUN:
                continue
            lines += [f"{dev}: {line}" for line in result["evidence"][:4]]
        if lines:
            console.print(f"[bold]#{number}[/bold] {escape(outcome.target.spec)}", highlight=False)
            for line in lines:
                console.print(f"    {escape(line)}", highlight=False, soft_wrap=True)
    counts = {v: 0 for v in ("confirmed", "not_reproduced", "could_not_run")}
    for outcome in outcomes:
        counts[outcome.verdict] += 1
    not_run = sorted(
        {dev for o in outcomes for dev, r in o.devices.items() if r["verdict"] == NOT_RUN}
    )
    summary = (
        f"{counts['confirmed']} confirmed, {counts['not_reproduced']} not reproduced, "
        f"{counts['could_not_run']} could not run"
    )
    if not_run:
        summary += f"; {', '.join(not_run)} not run (no such device on this machine)"
    console.print(summary, highlight=False, soft_wrap=True)
