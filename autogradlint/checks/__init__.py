"""The registry of checks, in rule-id order."""

from __future__ import annotations

from .base import Check, CheckContext, Settings
from .compiled_grads import CompiledGradients
from .reentrant import ReentrantAutograd
from .torch_function import TorchFunctionConversions

ALL_CHECKS: tuple[type[Check], ...] = (
    ReentrantAutograd,
    CompiledGradients,
    TorchFunctionConversions,
)

__all__ = ["ALL_CHECKS", "Check", "CheckContext", "Settings"]
