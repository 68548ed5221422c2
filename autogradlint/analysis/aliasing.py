"""Which tensor methods can return (a view of) the same storage."""

from __future__ import annotations

# Methods whose result can share storage with the receiver: views, and conversions that return
# the tensor itself when nothing changes (`.float()` on a float32 tensor, `.contiguous()` on a
# contiguous one). Writing through the result writes into the original.
# Methods that return a view of their receiver (a tensor in, a tensor out, the same storage).
VIEW_METHODS = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "flatten",
        "unflatten",
        "squeeze",
        "unsqueeze",
        "expand",
        "expand_as",
        "t",
        "transpose",
        "permute",
        "narrow",
        "select",
    }
)
ALIASING_METHODS = VIEW_METHODS | frozenset(
    {
        "as_strided",
        "movedim",
        "moveaxis",
        "swapaxes",
        "swapdims",
        "diagonal",
        "unfold",
        "detach",
        "to",
        "float",
        "half",
        "bfloat16",
        "double",
        "type",
        "cuda",
        "cpu",
        "type_as",
        "requires_grad_",
    }
)
