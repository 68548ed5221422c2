"""What a tensor can be asked for: the attributes and methods of `torch.Tensor` and
`torch.nn.Parameter` (tensor_api.txt, read once; tests/semantics holds it to torch). A value
forward reads something else of is not a tensor."""

from __future__ import annotations

import functools
from pathlib import Path


@functools.cache
def tensor_attributes() -> frozenset[str]:
    text = (Path(__file__).parent / "tensor_api.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def is_tensor_attribute(name: str) -> bool:
    """Whether a tensor has `name` (dunder names count: every object has some)."""
    return name.startswith("__") or name in tensor_attributes()
