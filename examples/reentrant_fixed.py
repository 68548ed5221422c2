"""Family A, fixed: recompute under enable_grad, forward create_graph, never `.backward()`."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class SoftplusRecompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return F.softplus(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        create_graph = torch.is_grad_enabled()  # True exactly under create_graph=True
        with torch.enable_grad():
            y = F.softplus(x)
            (gx,) = torch.autograd.grad(y, x, grad_output, create_graph=create_graph)
        return gx


class CubeInnerBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        create_graph = torch.is_grad_enabled()
        with torch.enable_grad():
            y = x**3
            (gx,) = torch.autograd.grad(y, x, grad_output, create_graph=create_graph)
        return gx


if __name__ == "__main__":
    w = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64, requires_grad=True)
    print("gradcheck:", torch.autograd.gradcheck(SoftplusRecompute.apply, (w,)))
    print("gradgradcheck:", torch.autograd.gradgradcheck(CubeInnerBackward.apply, (w,)))
