"""The confirmer never says "confirmed" on correct code: every RNG is reseeded before each run, so
runs compare like with like; inputs are random draws away from kinks, and a verdict needs every
draw to agree; a dense control that does not reproduce itself proves nothing."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SQUARE_BUG

from autogradlint.cli import main
from autogradlint.confirm.draws import agree
from autogradlint.confirm.plan import Target, module_name
from autogradlint.confirm.run import confirm

torch = pytest.importorskip("torch", reason="the confirmer needs torch")

# Correct code: forward draws a fresh mask, saves it, and backward uses the saved mask. Two
# forward runs give different masks unless the RNG is reseeded before each.
DROPOUT = """
    class Dropout(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            mask = (torch.rand_like(x) > 0.5).to(x.dtype) * 2.0
            ctx.save_for_backward(mask)
            return x * mask

        @staticmethod
        def backward(ctx, g):
            (mask,) = ctx.saved_tensors
            return g * mask
"""

# Correct code with a kink at 1: at x == 1 the one-sided derivatives differ, so gradcheck fails
# there whatever the backward says.
CLAMP = """
    import torch

    class Clamp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(max=1)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x <= 1).to(g.dtype)
"""

# Correct gradients for what forward did, but forward reads a source no seed controls: two runs
# of the same input never agree, so no comparison between runs can show anything.
UNSEEDABLE = """
    import os
    import torch

    class Jitter(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.scale = 1.0 + int.from_bytes(os.urandom(2), "little") / 65536
            return x * ctx.scale

        @staticmethod
        def backward(ctx, g):
            return g * ctx.scale
"""


def _target(tmp_path: Path, source: str, kind: str, name: str) -> Target:
    path = tmp_path / "verdict_mod.py"
    path.write_text(textwrap.dedent(source))
    root, module = module_name(path)
    return Target(kind, str(path), 1, module, name, root)


def test_a_correct_dropout_beside_a_flagged_class_is_not_confirmed(tmp_path: Path) -> None:
    """The dropout class is the clean twin of the flagged `Square` (same file): it used to be
    "confirmed" because forward ran once for autograd.grad and again for .backward(), with two
    masks. The flagged class is still confirmed."""
    source = SQUARE_BUG + textwrap.dedent(DROPOUT)
    (tmp_path / "dropout_twin.py").write_text(source)
    result = CliRunner().invoke(
        main,
        ["confirm", "--device", "cpu", "--output-format", "json", str(tmp_path)],
    )
    rows = {row["target"]: row for row in json.loads(result.stdout)}
    assert rows["dropout_twin:Square"]["verdict"] == "confirmed", rows
    assert rows["dropout_twin:Dropout"]["findings"] == []  # probed as the clean twin
    assert rows["dropout_twin:Dropout"]["verdict"] == "not_reproduced", rows


def test_a_correct_dropout_is_not_confirmed_by_the_layout_probe(tmp_path: Path) -> None:
    """Probe B compares each gradient layout with a contiguous run: both forward runs must draw
    the same mask, or every layout "differs"."""
    source = "import torch\n" + textwrap.dedent(DROPOUT)
    (outcome,) = confirm([_target(tmp_path, source, "B", "Dropout")], ["cpu"], timeout=120)
    assert outcome.verdict == "not_reproduced", outcome.devices


def test_a_correct_clamp_is_not_confirmed_at_its_kink(tmp_path: Path) -> None:
    """The old probe input [0.5, 1.0, 1.5] sat on clamp's kink; random draws do not."""
    (outcome,) = confirm([_target(tmp_path, CLAMP, "A", "Clamp")], ["cpu"], timeout=120)
    assert outcome.verdict == "not_reproduced", outcome.devices


@pytest.mark.parametrize("probe", ["A", "B"])
def test_code_that_no_seed_makes_repeatable_could_not_run(tmp_path: Path, probe: str) -> None:
    """The control (the same dense run twice) must agree before runs are compared."""
    (outcome,) = confirm([_target(tmp_path, UNSEEDABLE, probe, "Jitter")], ["cpu"], timeout=120)
    assert outcome.verdict == "could_not_run", outcome.devices
    assert "identical runs" in outcome.devices["cpu"]["evidence"][0]


def test_a_verdict_needs_every_draw_to_agree() -> None:
    """Evidence on every draw: confirmed; on none: not reproduced; on some only: the values
    decide, so nothing is shown either way."""
    assert agree([["gradcheck failed"], ["gradcheck failed"], ["gradcheck failed"]])[0] == (
        "confirmed"
    )
    assert agree([[], [], []]) == ("not_reproduced", [])
    verdict, evidence = agree([["gradcheck failed"], [], []])
    assert verdict == "could_not_run"
    assert "input draws disagree" in evidence[0]
    assert "draw 1: gradcheck failed" in evidence
