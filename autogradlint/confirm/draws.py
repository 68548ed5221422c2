"""Input draws for the probes (runs in the child): every RNG reseeded before each run, inputs in
general position, and the rule that turns per-draw evidence into one verdict.

Why: a probe compares runs of the code (autograd.grad with .backward(), a layout with its
contiguous copy, gradcheck's perturbed calls). Code that draws random numbers (dropout) differs
between two runs unless every RNG starts from the same state; code with a kink (clamp, relu,
abs) fails gradcheck on the kink whatever its backward. So: the same seed before every run of
one draw, random inputs kept away from round numbers and from each other, and several draws
that must all agree.
"""

from __future__ import annotations

import importlib.util
import random
from typing import Any

CONFIRMED, NOT_REPRODUCED, COULD_NOT_RUN = "confirmed", "not_reproduced", "could_not_run"

SEEDS = (11, 23, 37)  # one draw per seed; three, so one draw's accident is outvoted
LOW, HIGH = 0.25, 1.75  # positive, as the old [0.5, 1, 1.5] was (log, sqrt stay defined)
# Kinks sit on round numbers (0, 0.5, 1: clamp, relu, hardtanh); gradcheck perturbs by 1e-6.
# A value this close to a multiple of 1/4, or to another value, is drawn again.
MARGIN = 1e-3


def reseed(seed: int) -> None:
    """Every RNG the code under test may draw from, to the same state: torch's CPU generator
    and every CUDA device's (torch.manual_seed seeds both), Python's `random`, and numpy's
    global one where numpy is installed."""
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    numpy = _numpy()
    if numpy is not None:
        numpy.random.seed(seed)


_NUMPY: list[Any] = []


def prepare() -> None:
    """Import what reseeding needs now, before the project's root is on sys.path."""
    _numpy()


def _numpy() -> Any:
    """numpy if it is installed (imported once: the code under test may import it lazily)."""
    if not _NUMPY:
        found = importlib.util.find_spec("numpy") is not None
        _NUMPY.append(importlib.import_module("numpy") if found else None)
    return _NUMPY[0]


def general_values(count: int, seed: int) -> list[float]:
    """`count` values in [LOW, HIGH), none within MARGIN of a multiple of 1/4 or of another."""
    rng = random.Random(seed)
    values: list[float] = []
    while len(values) < count:
        v = rng.uniform(LOW, HIGH)
        if abs(v * 4 - round(v * 4)) / 4 < MARGIN:
            continue
        if any(abs(v - w) < MARGIN for w in values):
            continue
        values.append(v)
    return values


def probe_tensor(dtype: Any, device: str, shape: tuple[int, ...], seed: int) -> Any:
    """The probe's tensor input for one draw: values in general position, in `shape`."""
    import torch

    count = 1
    for size in shape:
        count *= size
    values = torch.tensor(general_values(count, seed), dtype=torch.float64)
    return values.reshape(shape).to(dtype=dtype, device=device)


def agree(draws: list[list[str]]) -> tuple[str, list[str]]:
    """One verdict from each draw's evidence: confirmed when every draw shows evidence (the
    first draw's is given), not reproduced when none does, and could_not_run when they
    disagree: the input values decide (a kink, a tolerance), which proves nothing either way."""
    shown = [i for i, evidence in enumerate(draws) if evidence]
    if not shown:
        return NOT_REPRODUCED, []
    if len(shown) == len(draws):
        note = [f"(every one of the {len(draws)} input draws shows this; draw 1's evidence)"]
        return CONFIRMED, [*draws[0], *note] if len(draws) > 1 else list(draws[0])
    quiet = [str(i + 1) for i, evidence in enumerate(draws) if not evidence]
    head = (
        f"the {len(draws)} input draws disagree: draw{'s' * (len(quiet) > 1)} "
        f"{', '.join(quiet)} show{'s' * (len(quiet) == 1)} nothing; the values decide "
        "(a kink or a tolerance), so this proves nothing either way"
    )
    return COULD_NOT_RUN, [head, *(f"draw {i + 1}: {line}" for i in shown for line in draws[i])]
