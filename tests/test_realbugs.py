"""The real-bug corpus: every batch well formed, and the scorer counting every finding."""

from __future__ import annotations

import csv

import pytest

from benchmarks.realbugs.materialize import BATCHES, cases
from benchmarks.realbugs.score import Hit, Label, score

VERDICTS = {"bug", "risk", "ok"}
FAMILIES = {"A", "B", "C", "D"}


def _batches() -> list[str]:
    return sorted(p.name for p in BATCHES.iterdir() if p.is_dir()) if BATCHES.is_dir() else []


@pytest.mark.parametrize("batch", _batches())
def test_batch_is_well_formed(batch: str) -> None:
    """Each label names a case of its batch, a side, a family, a verdict and a site in order."""
    ids = {case.id for case in cases([batch])}
    assert ids, f"{batch} has no cases"
    for case in cases([batch]):
        assert len(case.fix_commit) >= 7 and len(case.parent_commit) >= 7, case.id
        assert case.paths, case.id
    with open(BATCHES / batch / "labels.tsv", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert rows, f"{batch} has no labels"
    for row in rows:
        where = f"{batch}: {row}"
        assert row["id"] in ids, where
        assert row["side"] in ("before", "after"), where
        assert row["family"] in FAMILIES, where
        assert row["verdict"] in VERDICTS, where
        assert 1 <= int(row["line"]) <= int(row["end_line"] or row["line"]), where
        assert row["rule"] == "-" or row["rule"].startswith("AGL"), where
        assert row["reason"].strip(), where
    harmful = {row["id"] for row in rows if row["verdict"] in ("bug", "risk")}
    assert harmful == ids, f"{batch}: every case labels its bug ({sorted(ids - harmful)})"


def _label(line: int, verdict: str, family: str = "B") -> Label:
    return Label("c1", "before", "ops.py", line, line + 1, family, "AGL201", verdict)


def _hit(line: int, code: str = "AGL201") -> Hit:
    return Hit("c1", "before", "ops.py", line, code)


def test_every_finding_is_counted() -> None:
    """A finding on a bug is a hit, on an ok site a false alarm, elsewhere untriaged; a bug
    with no finding of its family is a miss, whatever other families say there."""
    labels = [_label(10, "bug"), _label(20, "ok"), _label(30, "risk"), _label(40, "bug", "D")]
    hits = [_hit(11), _hit(20), _hit(50), _hit(40)]
    b, d = score(labels, hits)["B"], score(labels, hits)["D"]
    assert (b.tp, b.fn, b.fp, b.on_harmful) == (1, 1, 1, 1)
    assert b.untriaged == ["c1/before/ops.py:50:AGL201", "c1/before/ops.py:40:AGL201"]
    assert b.precision() == "0.25" and b.recall() == "0.50"
    assert (d.tp, d.fn) == (0, 1)
