"""Family B on the shapes the real-bug batches (benchmarks/realbugs/) missed: bad code, the
finding, the fixed code.

Each case is the smallest form of a labelled bug site: a Triton kernel that `tl.store`s into
the incoming gradient (unsloth's RoPE and RMS-norm backward, Megatron's MLA rotary backward).
"""

from __future__ import annotations

from autogradlint import lint_source


def _b(code: str) -> list[tuple[str, int]]:
    """(rule, line) of every family-B finding."""
    return sorted(
        (f.rule_id, f.line) for f in lint_source(code).findings if f.rule_id.startswith("AGL2")
    )


# unsloth/kernels/rope_embedding.py (b02-unsloth-1): the kernel rotates the gradient in place
# and backward returns it; autograd shares that buffer with every other consumer (B2.1).
ROPE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _rope(Q, Q_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    q = tl.load(Q + row * Q_row_stride + cols, mask=cols < n_cols)
    tl.store(Q + row * Q_row_stride + cols, q * 2, mask=cols < n_cols)


class Rope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, dY):
        n_rows, n_cols = dY.shape
        {guard}
        _rope[(n_rows,)](dY, dY.stride(0), n_cols, BLOCK=1024)
        return dY
"""


def test_agl202_a_triton_kernel_that_stores_into_the_gradient() -> None:
    bad = ROPE.format(guard="dY = dY.reshape(n_rows, n_cols)")
    assert _b(bad) == [("AGL202", 23)]
    fixed = ROPE.format(guard="dY = dY.clone(memory_format=torch.contiguous_format)")
    assert _b(fixed) == []


def test_agl202_a_triton_kernel_store_through_a_keyword_argument() -> None:
    bad = ROPE.format(guard="pass").replace(
        "](dY, dY.stride(0), n_cols,", "](Q=dY, Q_row_stride=dY.stride(0), n_cols=n_cols,"
    )
    assert _b(bad) == [("AGL202", 23)]


def test_agl202_a_gradient_that_is_copied_only_on_one_branch() -> None:
    # unsloth: `dQ.clone() if not dQ.is_contiguous else dQ` (the bound method is always true,
    # so it is always dQ itself): a copy on one branch guards nothing.
    bad = ROPE.format(guard="dY = dY.clone() if not dY.is_contiguous else dY")
    assert _b(bad) == [("AGL202", 23)]
    fixed = ROPE.format(guard="dY = dY.clone() if dY.is_contiguous() else dY.clone()")
    assert _b(fixed) == []
    # FIX-B1's own form passes a None gradient on as it came: that branch holds no tensor
    fixed = ROPE.format(guard="dY = dY if dY is None else dY.clone()")
    assert _b(fixed) == []


# unsloth/kernels/rms_layernorm.py (c02-unsloth-1): `dX = dY` names the gradient again, and the
# kernel stores the input gradient through dX, over the incoming gradient.
RMS = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_backward(dY, dY_row_stride, dX, dX_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    dy = tl.load(dY + row * dY_row_stride + cols, mask=cols < n_cols)
    tl.store(dX + row * dX_row_stride + cols, dy * 2, mask=cols < n_cols)


class RMS(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, dY):
        n_rows, n_cols = dY.shape
        dX = {out}
        _rms_backward[(n_rows,)](dY, dY.stride(0), dX, dX.stride(0), n_cols, BLOCK=1024)
        return dX
"""


def test_agl202_the_kernel_output_is_the_gradient_itself() -> None:
    assert _b(RMS.format(out="dY")) == [("AGL202", 23)]
    assert _b(RMS.format(out="torch.empty_like(dY)")) == []


def test_agl202_a_helper_launches_the_kernel_that_stores_into_the_gradient() -> None:
    # the launch one call deeper, in a function of the file (unsloth's `_rope_embedding`
    # wrappers), still writes into the buffer backward was handed
    helper = ROPE.replace(
        "class Rope(",
        "def rotate(t):\n"
        "    _rope[(t.shape[0],)](t, t.stride(0), t.shape[1], BLOCK=1024)\n"
        "    return t\n\n\nclass Rope(",
    ).replace(
        "        _rope[(n_rows,)](dY, dY.stride(0), n_cols, BLOCK=1024)\n",
        "        dY = rotate(dY)\n",
    )
    assert _b(helper.format(guard="pass")) == [("AGL202", 28)]
    fixed = helper.format(guard="dY = dY.clone(memory_format=torch.contiguous_format)")
    assert _b(fixed) == []
