"""The oracle's runs: which programs (a derandomised sample for CI, or a random search), both
verdicts for each, the disagreements, and which known class explains each one."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from . import batch, known
from .batch import Result
from .generators import GENERATE, build
from .harms import TIMEOUT, Disagreement, harmful
from .program import Program


def seed_of(family: str, i: int, salt: str = "ci") -> int:
    """A stable seed per (family, index): the CI sample does not move when a family is added."""
    return int(hashlib.sha256(f"{salt}:{family}:{i}".encode()).hexdigest()[:12], 16)


def sample(per_family: dict[str, int], salt: str = "ci") -> list[Program]:
    """`n` programs per family; the first is the family's simplest program (every choice at
    its first option: for most generators, the form without the hazard)."""
    return [
        build(f, seed_of(f, i, salt), simplest=i == 0)
        for f, n in per_family.items()
        for i in range(n)
    ]


def search(n: int, seed: int, families: list[str]) -> Iterator[Program]:
    """`n` programs, round-robin over the families, from random seeds."""
    rng = random.Random(seed)
    for i in range(n):
        family = families[i % len(families)]
        yield build(family, rng.getrandbits(48))


@dataclass
class Found:
    """One disagreement of one program, and the known class that explains it (if any)."""

    result: Result
    disagreement: Disagreement
    known: known.KnownClass | None

    @property
    def program(self) -> Program:
        return self.result.program


@dataclass
class Summary:
    results: list[Result] = field(default_factory=list)
    found: list[Found] = field(default_factory=list)

    def add(self, results: list[Result], classes: list[known.KnownClass]) -> None:
        self.results += results
        for r in results:
            for d in r.disagreements():
                self.found.append(Found(r, d, known.explained_by(d, r.program, classes)))

    def table(self) -> str:
        """Per generator: programs, how many torch shows harm in, flagged, disagreements."""
        rows = ["generator           programs  harmful  flagged  missed  false-alarm  harness"]
        for family in GENERATE:
            rs = [r for r in self.results if r.program.family == family]
            if not rs:
                continue
            harm = sum(harmful(family, r.harms) for r in rs)
            codes = GENERATE_CODES.get(family, set())
            flagged = sum(bool(set(r.codes) & codes) for r in rs)
            missed = sum(any(d.direction == "missed" for d in r.disagreements()) for r in rs)
            false = sum(any(d.direction == "false-alarm" for d in r.disagreements()) for r in rs)
            # a harness failure, or a program that timed out (no verdict: harms.judge)
            broken = sum(any(h.startswith(("harness", TIMEOUT)) for h in r.harms) for r in rs)
            rows.append(
                f"{family:<19} {len(rs):>8} {harm:>8} {flagged:>8} {missed:>7} {false:>12} {broken:>8}"
            )
        return "\n".join(rows)


def _codes() -> dict[str, set[str]]:
    from .harms import GENERATORS

    return {name: set(g.codes) for name, g in GENERATORS.items()}


GENERATE_CODES = _codes()


def run(
    programs: list[Program], classes: list[known.KnownClass], chunk: int = 200, **kw: int
) -> Summary:
    summary = Summary()
    for i in range(0, len(programs), chunk):
        summary.add(batch.run(programs[i : i + chunk], **kw), classes)
    return summary
