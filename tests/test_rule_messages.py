"""Rule messages that fit the case in front of them: AGL403 when the tensor is already saved,
and the counts PyTorch quotes for a custom op's AGL401 (one more on each side, semantics D11.1)."""

from __future__ import annotations

from conftest import ROOT

from autogradlint.engine.door import lint_file

SAVED_AND_STASHED = """\
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        ctx.w = w  # AGL403
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, _ = ctx.saved_tensors
        return g * ctx.w, g * x
"""

STASHED_ONLY = """\
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor):
        ctx.w = w  # AGL403
        return x * w

    @staticmethod
    def backward(ctx, g):
        return g * ctx.w, None
"""

# `scaled` returns one gradient for its two inputs (`x` and `factor`).
CUSTOM_OP = (ROOT / "examples" / "custom_op_bug.py").read_text()


def _help(source: str, code: str) -> str:
    (finding,) = [f for f in lint_file(source, "m.py").findings if f.rule_id == code]
    return finding.help


def test_agl403_on_a_tensor_already_saved_says_to_read_it_back() -> None:
    text = _help(SAVED_AND_STASHED, "AGL403")
    assert text.startswith(
        "In `Scale.forward`: `w` is already saved with `ctx.save_for_backward`: read it back "
        "from `ctx.saved_tensors` instead of `ctx.w`, and drop this assignment."
    )
    assert "use `ctx.save_for_backward`" not in text


def test_agl403_on_a_tensor_not_saved_says_to_save_it() -> None:
    assert _help(STASHED_ONLY, "AGL403").startswith(
        "In `Scale.forward`: save `w` with `ctx.save_for_backward` and read it back from "
        "`ctx.saved_tensors`."
    )


def test_agl401_of_a_custom_op_explains_pytorchs_counts() -> None:
    text = _help(CUSTOM_OP, "AGL401")
    assert "(expected 3, got 2)" in text
    assert (
        "PyTorch counts one more on each side: torch.library calls its generated autograd "
        "Function with the op's inputs and one hidden metadata argument, and appends a `None` "
        "for it to what this backward returns."
    ) in text
