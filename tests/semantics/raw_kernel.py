"""What a hand-written kernel does with a tensor: read or write `numel` floats at `data_ptr()`,
ignoring strides (ctypes here; the same pointer arithmetic as a C++ `data_ptr<float>()` loop)."""

from __future__ import annotations

import ctypes

import torch


def in_bounds(t: torch.Tensor) -> bool:
    """Whether numel elements from data_ptr stay inside the tensor's storage."""
    used = (t.storage_offset() + t.numel()) * t.element_size()
    return used <= t.untyped_storage().nbytes()


def raw_read(t: torch.Tensor) -> list[float]:
    assert t.dtype == torch.float32 and in_bounds(t), "a read past the storage is undefined"
    return list((ctypes.c_float * t.numel()).from_address(t.data_ptr()))


def raw_scale_(t: torch.Tensor, s: float) -> None:
    """Scale in place through the raw pointer: no version bump, no aliasing checks."""
    assert t.dtype == torch.float32 and in_bounds(t), "a write past the storage is undefined"
    values = (ctypes.c_float * t.numel()).from_address(t.data_ptr())
    for i in range(t.numel()):
        values[i] *= s
