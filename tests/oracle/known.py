"""The known disagreement classes, read from known.md.

Each class in known.md has a `match:` line and a `replay:` line:

    match: generator=AGL401 direction=missed code=AGL401 returns=tensors-only sig=default-passed
    replay: AGL401 {"math": 0, "sig": 2, "returns": 2}

`match:` says which disagreements the class explains: the disagreement's generator,
direction and code, and conditions on the program's tags (`tag=a|b` one of these values,
`tag=!a|b` none of them). `replay:` rebuilds a representative program from its generator and
recorded choices; the CI test checks that it still disagrees that way, so fixing the linter
makes the test fail until known.md is updated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .harms import Disagreement
from .program import Program

KNOWN_MD = Path(__file__).with_name("known.md")
FIELDS = ("generator", "direction", "code")


@dataclass(frozen=True)
class KnownClass:
    name: str
    conditions: tuple[tuple[str, tuple[str, ...], bool], ...]  # (key, values, negated)
    replay: tuple[str, dict[str, int]] | None

    def explains(self, d: Disagreement, program: Program) -> bool:
        fields = {"generator": d.generator, "direction": d.direction, "code": d.code}
        for key, values, negated in self.conditions:
            value = fields[key] if key in fields else program.tags.get(key)
            if (value in values) == negated:
                return False
        return True


def _conditions(text: str) -> tuple[tuple[str, tuple[str, ...], bool], ...]:
    out = []
    for token in text.split():
        key, _, value = token.partition("=")
        negated = value.startswith("!")
        out.append((key, tuple(value.lstrip("!").split("|")), negated))
    return tuple(out)


def load(path: Path = KNOWN_MD) -> list[KnownClass]:
    """Every class of known.md, in order. A heading `### Kn ...` starts a class."""
    classes: list[KnownClass] = []
    name, match, replay = None, None, None

    def close() -> None:
        if name is not None and match is not None:
            classes.append(KnownClass(name, _conditions(match), replay))

    for line in path.read_text().splitlines():
        heading = re.match(r"###\s+(K\d+)\b", line)
        if heading:
            close()
            name, match, replay = heading.group(1), None, None
        elif line.startswith("match:"):
            match = line[len("match:") :].strip().strip("`")
        elif line.startswith("replay:"):
            generator, _, choices = line[len("replay:") :].strip().strip("`").partition(" ")
            replay = (generator, json.loads(choices))
    close()
    return classes


def explained_by(d: Disagreement, program: Program, classes: list[KnownClass]) -> KnownClass | None:
    return next((k for k in classes if k.explains(d, program)), None)
