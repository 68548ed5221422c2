"""`autogradlint rule`: a rule's documentation and evidence, or the list of rules."""

from __future__ import annotations

import sys

import click

from ..meta import FAMILIES, all_rules, get_rule
from .app import main
from .common import EXIT_ERROR, Console, print_error


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
    from ..evidence import semantics_rows

    rows = semantics_rows()
    lines = ["## Evidence (docs/semantics.md, verified by tests/semantics)\n"]
    for row_id in row_ids:
        row = rows.get(row_id)
        lines.append(f"- {row_id}: {row.describe()}" if row else f"- {row_id}")
    return "\n".join(lines) + "\n"
