"""A `torch.library` custom op, buggy: its backward hands the gradient to a raw C++ kernel.

`torch.library.custom_op` is what PyTorch recommends for new code, and its backward (registered
with `register_autograd`) gets gradients in every layout a `Function.backward` gets: the narrow
view `torch.cat`'s backward hands each input, the stride-0 gradient of `out.sum()`. gradcheck
and opcheck feed contiguous gradients only, so neither sees this. `scaled` also returns one
gradient for its two inputs, which raises at the first backward, and has no fake, so
torch.compile and torch.export cannot trace it.
"""

from __future__ import annotations

import torch
from scale_ext import scale_ext


@torch.library.custom_op("agl_examples::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return scale_ext.raw_scale(x.contiguous(), 2.0)


@double.register_fake
def _(x):
    return torch.empty_like(x)


def _double_backward(ctx, grad):
    return scale_ext.raw_scale(grad, 2.0)


double.register_autograd(_double_backward)


@torch.library.custom_op("agl_examples::scaled", mutates_args=())
def scaled(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


def _scaled_setup(ctx, inputs, output):
    ctx.factor = inputs[1]


def _scaled_backward(ctx, grad):
    return grad * ctx.factor


scaled.register_autograd(_scaled_backward, setup_context=_scaled_setup)


def demo() -> tuple[torch.Tensor, torch.Tensor]:
    """The gradient `double` gives its input inside a `torch.cat`, and the true one."""
    x = torch.ones(4, 3, requires_grad=True)
    out = torch.cat([double(x), torch.zeros(4, 5)], dim=1)
    upstream = torch.arange(32.0).reshape(4, 8)
    out.backward(upstream)
    return x.grad, 2 * upstream[:, :3]
