"""Family B, buggy: a Function hands its incoming gradients to a C++ kernel unguarded.

`Scale` lets `raw_scale` read the gradient through its raw pointer: the gradient of `out.sum()`
is a stride-0 view of one element, so the kernel reads out of bounds. `ScaleInPlace` lets
`raw_scale_` write into the gradient buffer that autograd also hands to other consumers.
"""

from __future__ import annotations

import torch
from scale_ext import scale_ext


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return scale_ext.raw_scale(x.contiguous(), 2.0)

    @staticmethod
    def backward(ctx, grad_output):
        return scale_ext.raw_scale(grad_output, 2.0)


class ScaleInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, grad_output):
        grad = grad_output.contiguous()  # not a copy: the same buffer when already dense
        scale_ext.raw_scale_(grad, 2.0)
        return grad


def demo() -> dict[str, torch.Tensor]:
    """Gradients the two Functions give; the true values are 2 everywhere."""
    x = torch.ones(4, 8, requires_grad=True)
    Scale.apply(x).sum().backward()  # stride-0 gradient
    read = x.grad.clone()
    a = torch.ones(3, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    victim = b * 1.0  # created first, so its backward runs after the writer's
    loss = ScaleInPlace.apply(a) + victim
    loss.backward(torch.ones(3))
    return {"scale": read, "victim": b.grad.clone()}


if __name__ == "__main__":
    for name, grad in demo().items():
        print(name, grad.flatten()[:8].tolist())
