"""Family B, fixed: `.contiguous()` before a reading kernel, a private copy before a writing one."""

from __future__ import annotations

import torch
from scale_ext import scale_ext


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return scale_ext.raw_scale(x.contiguous(), 2.0)

    @staticmethod
    def backward(ctx, grad_output):
        return scale_ext.raw_scale(grad_output.contiguous(), 2.0)


class ScaleInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, grad_output):
        grad = grad_output.clone(memory_format=torch.contiguous_format)
        scale_ext.raw_scale_(grad, 2.0)
        return grad


def demo() -> dict[str, torch.Tensor]:
    """Gradients the two Functions give; the true values are 2 and 1."""
    x = torch.ones(4, 8, requires_grad=True)
    Scale.apply(x).sum().backward()
    read = x.grad.clone()
    a = torch.ones(3, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    victim = b * 1.0
    loss = ScaleInPlace.apply(a) + victim
    loss.backward(torch.ones(3))
    return {"scale": read, "victim": b.grad.clone()}


if __name__ == "__main__":
    for name, grad in demo().items():
        print(name, grad.flatten()[:8].tolist())
