"""Family A, buggy: backward recomputes its forward and differentiates it the wrong ways.

`SoftplusRecompute` calls `torch.autograd.grad` on a recomputation done with grad mode off: it
passes gradgradcheck (create_graph=True turns grad mode on) but crashes in ordinary training.
`CubeInnerBackward` runs `.backward()` on the saved input: the outer leaf's `.grad` receives the
gradient twice.
"""

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
        y = F.softplus(x)
        (gx,) = torch.autograd.grad(y, x, grad_output)
        return gx


class CubeInnerBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            y = x**3
            y.backward(grad_output)
        return x.grad


if __name__ == "__main__":
    w = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64, requires_grad=True)
    try:
        SoftplusRecompute.apply(w).sum().backward()
    except RuntimeError as exc:
        print("SoftplusRecompute:", str(exc).splitlines()[0])
    w.grad = None
    CubeInnerBackward.apply(w).sum().backward()
    print("CubeInnerBackward grad:", w.grad.tolist(), "expected:", (3 * w.detach() ** 2).tolist())
