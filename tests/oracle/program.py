"""A generated program: the files a user would write, plus what the oracle needs to run it (the
plain-autograd reference, the input shapes, the driver), and the choices that made it.

Programs are a few modules of one package. Their text writes `__PKG__` where the package's
own name goes (absolute imports, custom-op namespaces); the batch gives each program a fresh
package name when it writes it out.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

PKG = "__PKG__"


class Chooser:
    """Every decision a generator makes, by name. Replaying the recorded choices rebuilds the
    program; forcing one to 0 (each list puts its simplest option first) is how shrinking
    simplifies a program."""

    def __init__(
        self, seed: int, forced: dict[str, int] | None = None, simplest: bool = False
    ) -> None:
        self.rng = random.Random(seed)
        self.forced = dict(forced or {})
        self.simplest = simplest  # every choice not forced takes its first (simplest) option
        self.made: dict[str, int] = {}
        self.tags: dict[str, str] = {}

    def pick(self, name: str, options: list[str]) -> str:
        """One of `options` (labels), recorded under `name` as a tag of the program."""
        if name in self.made:
            raise ValueError(f"choice {name!r} made twice")
        if name in self.forced:
            index = min(self.forced[name], len(options) - 1)
        elif self.simplest:
            index = 0
        else:
            index = self.rng.randrange(len(options))
        self.made[name] = index
        self.tags[name] = options[index]
        return options[index]

    def flag(self, name: str) -> bool:
        return self.pick(name, ["no", "yes"]) == "yes"


@dataclass
class Program:
    """One generated program and how to run it."""

    family: str  # the generator: a rule code, or the name of a rule not written yet
    files: dict[str, str]  # path inside the package -> source; `main.py` defines `model`
    reference: str = ""  # harness code: `reference(*xs)`, plain autograd on the same math
    inputs: list[list[int]] = field(default_factory=list)  # float64 tensor shapes
    nograd: list[int] = field(default_factory=list)  # inputs that never require grad
    driver: str = "function"  # function | customop | override
    function: str | None = None  # the Function class in main (the instance scenario)
    mode: bool = False  # override driver: `make_mode()` instead of `wrap(t)`
    world: int = 0  # > 0: runs in a gloo process group of that many ranks
    tags: dict[str, str] = field(default_factory=dict)
    choices: dict[str, int] = field(default_factory=dict)
    seed: int = 0

    def spec(self, package: str) -> dict[str, Any]:
        """What the torch side needs (`torch_side.py`), for the package it was written as."""
        return {
            "package": package,
            "driver": self.driver,
            "reference": self.reference.replace(PKG, package),
            "inputs": self.inputs,
            "nograd": self.nograd,
            "function": self.function,
            "mode": self.mode,
        }

    def text(self) -> str:
        """All files, for reports (the package as `pkg`)."""
        out = []
        for path in sorted(self.files, key=lambda p: (p != "main.py", p)):
            out.append(f"# --- {path}\n" + self.files[path].replace(PKG, "pkg").rstrip() + "\n")
        return "\n".join(out)
