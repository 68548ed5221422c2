"""A `torch.library` custom op, fixed: the backward hands its gradient to the op itself (whose
kernel gets it contiguous), every op has a fake implementation, and the backward returns a
gradient (or None) for every input of the op. `torch.library.opcheck` passes on both ops: the
fakes let torch.compile and torch.export trace them, and a backward that calls the raw kernel
itself would not be traceable (semantics D13.5)."""

from __future__ import annotations

import torch
from scale_ext import scale_ext


@torch.library.custom_op("agl_examples_fixed::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return scale_ext.raw_scale(x.contiguous(), 2.0)


@double.register_fake
def _(x):
    return torch.empty_like(x)


def _double_backward(ctx, grad):
    return double(grad)


double.register_autograd(_double_backward)


@torch.library.custom_op("agl_examples_fixed::scaled", mutates_args=())
def scaled(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


@scaled.register_fake
def _(x, factor):
    return torch.empty_like(x)


def _scaled_setup(ctx, inputs, output):
    ctx.factor = inputs[1]


def _scaled_backward(ctx, grad):
    return grad * ctx.factor, None


scaled.register_autograd(_scaled_backward, setup_context=_scaled_setup)


def demo() -> tuple[torch.Tensor, torch.Tensor]:
    """The gradient `double` gives its input inside a `torch.cat`, and the true one."""
    x = torch.ones(4, 3, requires_grad=True)
    out = torch.cat([double(x), torch.zeros(4, 5)], dim=1)
    upstream = torch.arange(32.0).reshape(4, 8)
    out.backward(upstream)
    return x.grad, 2 * upstream[:, :3]
