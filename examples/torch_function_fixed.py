"""Family C, fixed: the override only observes; numerics stay in the caller's dtype."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class UpcastTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        return super().__torch_function__(func, types, args, kwargs)


def demo() -> torch.dtype:
    """The true dtype of F.linear on float16 inputs wrapped in the subclass."""
    x = torch.randn(4, 8, dtype=torch.float16).as_subclass(UpcastTensor)
    w = torch.randn(3, 8, dtype=torch.float16)
    y = F.linear(x, w)
    with torch._C.DisableTorchFunction():
        return y.dtype


if __name__ == "__main__":
    print("F.linear on float16 returned", demo())
