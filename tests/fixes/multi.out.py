"""A module with several fixable bugs in several Functions (no `import torch` at the top)."""

from torch.autograd import Function, grad
import torch
import fused_rope_cuda


class Recompute(Function):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        # recompute the activation
        with torch.enable_grad():
            y = x.sigmoid() * x
            return grad(y, x, g)[0]


class Rope(Function):
    @staticmethod
    def backward(ctx, grad_q, grad_k):
        cos, sin = ctx.saved_tensors
        dq = fused_rope_cuda.backward(grad_q, cos, sin)
        dk = fused_rope_cuda.backward(grad_k.view(-1), cos, sin)  # keep this comment
        return dq, dk


class InPlace(Function):
    @staticmethod
    def backward(ctx, g):
        if g is not None:
            g = g.clone(memory_format=torch.contiguous_format)
        fused_rope_cuda.scale_(g, 2.0)
        return g
