"""Score autogradlint on the real-bug snapshots: recall over labelled bugs, precision over every finding.

    python -m benchmarks.realbugs.score [--batch a01 ...] [--record-first-run]

Each case's two snapshots (written by `materialize.py`) are checked as a user would check them:
`autogradlint check --output-format json --no-cache` on the snapshot folder, in a subprocess.
A finding of family F is a true positive when it sits inside a `bug` or `risk` site of family F,
a false positive inside an `ok` site of family F, and *untriaged* anywhere else: untriaged is
never correct, so precision is (findings on bug/risk sites) / (all findings).

`--record-first-run` appends the batch's scores to `first_runs.tsv`, once: a batch already
recorded there is refused, because the first run is the score and is never rewritten. Without
it, the scores go to `tuned_runs.tsv` (rewritten by every scoring run).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.realbugs.materialize import BATCHES, HERE, Case, cases, snapshot_root

FAMILY_OF_PREFIX = {"AGL1": "A", "AGL2": "B", "AGL3": "C", "AGL4": "D"}
FAMILIES = ("A", "B", "C", "D")
FIELDS = (
    "date",
    "batch",
    "tool_commit",
    "family",
    "tp",
    "fn",
    "fp",
    "untriaged",
    "unlabelled_findings",
)


@dataclass(frozen=True)
class Label:
    """One hand-labelled site of one side of a case."""

    id: str
    side: str
    path: str
    line: int
    end_line: int
    family: str
    rule: str
    verdict: str

    @property
    def harmful(self) -> bool:
        return self.verdict in ("bug", "risk")


@dataclass(frozen=True)
class Hit:
    """One finding of the tool on one side of a case."""

    id: str
    side: str
    path: str
    line: int
    code: str

    @property
    def family(self) -> str | None:
        return FAMILY_OF_PREFIX.get(self.code[:4])

    def where(self) -> str:
        return f"{self.id}/{self.side}/{self.path}:{self.line}:{self.code}"


@dataclass
class Score:
    """The cells of one family over some cases."""

    tp: int = 0  # harmful sites with a finding of their family
    fn: int = 0  # harmful sites without one
    fp: int = 0  # findings on ok sites
    on_harmful: int = 0  # findings on harmful sites (the precision numerator)
    untriaged: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)  # the harmful sites without a finding
    false_alarms: list[str] = field(default_factory=list)  # the findings on ok sites

    @property
    def findings(self) -> int:
        return self.on_harmful + self.fp + len(self.untriaged)

    def recall(self) -> str:
        total = self.tp + self.fn
        return f"{self.tp / total:.2f}" if total else "-"

    def precision(self) -> str:
        return f"{self.on_harmful / self.findings:.2f}" if self.findings else "-"


def labels_of(batch: str) -> list[Label]:
    path = BATCHES / batch / "labels.tsv"
    with open(path, newline="") as handle:
        return [
            Label(
                row["id"],
                row["side"],
                row["path"],
                int(row["line"]),
                int(row["end_line"] or row["line"]),
                row["family"],
                row["rule"],
                row["verdict"],
            )
            for row in csv.DictReader(handle, delimiter="\t")
        ]


def run_tool(case: Case, side: str, root: Path) -> list[Hit]:
    """autogradlint's findings on one snapshot, as a user's `check` reports them."""
    folder = root / case.id / side
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is missing: run benchmarks/realbugs/materialize.py")
    proc = subprocess.run(
        [sys.executable, "-m", "autogradlint", "check", "--output-format", "json", "--no-cache"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{case.id}/{side}: exit {proc.returncode}: {proc.stderr.strip()}")
    hits = []
    for item in json.loads(proc.stdout or "[]"):
        path = Path(item["filename"])
        relative = path.relative_to(folder) if path.is_absolute() else path
        hits.append(Hit(case.id, side, relative.as_posix(), item["location"]["row"], item["code"]))
    return hits


def score(labels: Iterable[Label], hits: Iterable[Hit]) -> dict[str, Score]:
    """Per family: recall over harmful labels, every finding triaged or listed as untriaged."""
    scores = {family: Score() for family in FAMILIES}
    labels = list(labels)
    hits = [hit for hit in hits if hit.family is not None]
    found: set[Label] = set()
    for hit in hits:
        assert hit.family is not None
        covering = [
            label
            for label in labels
            if (label.id, label.side, label.path, label.family)
            == (hit.id, hit.side, hit.path, hit.family)
            and label.line <= hit.line <= label.end_line
        ]
        cell = scores[hit.family]
        if any(label.harmful for label in covering):
            cell.on_harmful += 1
            found.update(label for label in covering if label.harmful)
        elif covering:
            cell.fp += 1
            cell.false_alarms.append(hit.where())
        else:
            cell.untriaged.append(hit.where())
    for label in labels:
        if label.harmful and label.family in scores:
            if label in found:
                scores[label.family].tp += 1
            else:
                scores[label.family].fn += 1
                scores[label.family].missed.append(
                    f"{label.id}/{label.side}/{label.path}:{label.line}:{label.rule} ({label.verdict})"
                )
    return scores


def tool_commit() -> str:
    proc = subprocess.run(
        ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(HERE), "status", "--porcelain", "--", "autogradlint", "rules"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return proc.stdout.strip() + ("+dirty" if dirty else "")


def rows(batch: str, scores: dict[str, Score], commit: str) -> list[dict[str, str]]:
    today = datetime.date.today().isoformat()
    return [
        {
            "date": today,
            "batch": batch,
            "tool_commit": commit,
            "family": family,
            "tp": str(cell.tp),
            "fn": str(cell.fn),
            "fp": str(cell.fp),
            "untriaged": str(len(cell.untriaged)),
            "unlabelled_findings": " ".join(cell.untriaged),
        }
        for family, cell in scores.items()
        if cell.tp + cell.fn + cell.findings
    ]


def read_rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def write_rows(
    path: Path, all_rows: list[dict[str, str]], fields: tuple[str, ...] = FIELDS
) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fields, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows(all_rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", action="append", help="only these batches (repeatable)")
    parser.add_argument(
        "--record-first-run",
        action="store_true",
        help="append to first_runs.tsv (refused for a batch already recorded)",
    )
    parser.add_argument(
        "--details",
        action="store_true",
        help="also list every missed harmful site and every finding on an ok site",
    )
    args = parser.parse_args(argv)
    batches = args.batch or sorted(p.name for p in BATCHES.iterdir() if p.is_dir())
    first = HERE / "first_runs.tsv"
    if args.record_first_run:
        again = sorted(set(batches) & {row["batch"] for row in read_rows(first)})
        if again:
            print(f"first run already recorded for {', '.join(again)}: never rewritten")
            return 2
    root, commit = snapshot_root(), tool_commit()
    total = {family: Score() for family in FAMILIES}
    out: list[dict[str, str]] = []
    for batch in batches:
        batch_cases = list(cases([batch]))
        hits = [
            hit
            for case in batch_cases
            for side in ("before", "after")
            for hit in run_tool(case, side, root)
        ]
        scores = score(labels_of(batch), hits)
        out.extend(rows(batch, scores, commit))
        for family, cell in scores.items():
            into = total[family]
            into.tp, into.fn, into.fp = into.tp + cell.tp, into.fn + cell.fn, into.fp + cell.fp
            into.on_harmful += cell.on_harmful
            into.untriaged.extend(cell.untriaged)
            into.missed.extend(cell.missed)
            into.false_alarms.extend(cell.false_alarms)
    print(
        f"{'family':<7} {'tp':>4} {'fn':>4} {'fp':>4} {'untr':>5} {'recall':>7} {'precision':>10}"
    )
    for family, cell in total.items():
        print(
            f"{family:<7} {cell.tp:>4} {cell.fn:>4} {cell.fp:>4} {len(cell.untriaged):>5}"
            f" {cell.recall():>7} {cell.precision():>10}"
        )
    for family, cell in total.items():
        for where in cell.untriaged:
            print(f"untriaged {family}: {where}")
        for where in cell.missed if args.details else ():
            print(f"missed {family}: {where}")
        for where in cell.false_alarms if args.details else ():
            print(f"false alarm {family}: {where}")
    # first runs only ever grow; a tuned run replaces the earlier tuned rows of its batches
    target = first if args.record_first_run else HERE / "tuned_runs.tsv"
    kept = read_rows(target)
    if not args.record_first_run:
        kept = [row for row in kept if row["batch"] not in batches]
    write_rows(target, kept + out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
