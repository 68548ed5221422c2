"""Every rule held to torch: generated programs, with the hazard and without it, run under torch
(CPU, float64) and through `autogradlint check`, and the two verdicts compared (harms.py says
what each rule predicts torch will show).

CI runs a fixed, derandomised sample (CI_SAMPLE programs per generator) and asserts that its
disagreements are EXACTLY the known ones of known.md:
- a disagreement no known class explains fails `test_sample_disagrees_only_as_known` (a new
  linter bug, or a regression: shrink it with `python -m tests.oracle` and fix it, or add it to
  known.md with the reason it is out of reach of a static tool);
- a known class whose representative (its `replay:` line) no longer disagrees fails
  `test_known_classes_still_disagree` (the linter was fixed: delete the class from known.md).
`python -m tests.oracle --n 2000` searches further and prints each new class as a minimal
program.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from . import known
from .generators import GENERATE, build
from .harms import harmful
from .oracle import Found, Summary, run, sample

CI_SAMPLE = {family: 12 for family in GENERATE} | {"collectives": 6, "collective-layout": 8}


@dataclass
class Outcome:
    classes: list[known.KnownClass]
    sample: Summary
    replays: dict[str, Summary]


@pytest.fixture(scope="module")
def outcome() -> Iterator[Outcome]:
    classes = known.load()
    programs = sample(CI_SAMPLE)
    replayed = [k for k in classes if k.replay]
    replays = [build(k.replay[0], 0, k.replay[1]) for k in replayed]  # type: ignore[index]
    both = run(programs + replays, classes, chunk=len(programs) + len(replays))
    mine = Summary(
        both.results[: len(programs)],
        [f for f in both.found if f.result in both.results[: len(programs)]],
    )
    per_class = {}
    for k, result in zip(replayed, both.results[len(programs) :], strict=True):
        per_class[k.name] = Summary([result], [f for f in both.found if f.result is result])
    yield Outcome(classes, mine, per_class)


def _show(found: list[Found]) -> str:
    return "\n\n".join(
        f"{f.disagreement.key} tags={f.program.tags}\ntorch: {sorted(set(f.disagreement.harms))[:4]}\n"
        f"linter: {f.result.codes}\n{f.program.text()}"
        for f in found[:5]
    )


def test_known_md_parses() -> None:
    classes = known.load()
    assert classes, "known.md lists no class"
    for k in classes:
        assert k.replay is not None, f"{k.name} has no replay line"
        assert k.replay[0] in GENERATE, f"{k.name} replays an unknown generator {k.replay[0]}"
        keys = {c[0] for c in k.conditions}
        assert {"generator", "direction", "code"} <= keys, (
            f"{k.name}: match needs generator, direction, code"
        )


@pytest.mark.slow
def test_sample_disagrees_only_as_known(outcome: Outcome) -> None:
    new = [f for f in outcome.sample.found if f.known is None]
    assert not new, f"{len(new)} disagreements no class of known.md explains:\n\n" + _show(new)


@pytest.mark.slow
def test_known_classes_still_disagree(outcome: Outcome) -> None:
    fixed = []
    for k in outcome.classes:
        summary = outcome.replays.get(k.name)
        if summary is None or not any(k.explains(f.disagreement, f.program) for f in summary.found):
            fixed.append(k.name)
    assert not fixed, f"these known classes no longer disagree (update known.md): {fixed}"


@pytest.mark.slow
def test_every_generator_shows_harm_and_no_harm(outcome: Outcome) -> None:
    """The sample holds programs torch shows the hazard in and programs it does not, for
    every generator; and the harness itself never fails."""
    for family in GENERATE:
        results = [r for r in outcome.sample.results if r.program.family == family]
        verdicts = {harmful(family, r.harms) for r in results}
        assert verdicts == {True, False}, f"{family}: torch verdicts {verdicts} in the sample"
    broken = [
        (r.program.text(), h)
        for r in outcome.sample.results
        for h in r.harms
        if h.startswith("harness")
    ]
    assert not broken, broken[:2]
