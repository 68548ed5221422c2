"""The registry of checks, in rule-id order."""

from __future__ import annotations

from ..settings import Settings
from .base import Check, CheckContext
from .compiled_grads import CompiledGradients
from .contract import FunctionContract
from .reentrant import ReentrantAutograd
from .torch_function import TorchFunctionConversions
from .torch_function_hygiene import TorchFunctionHygiene

ALL_CHECKS: tuple[type[Check], ...] = (
    ReentrantAutograd,
    CompiledGradients,
    TorchFunctionConversions,
    TorchFunctionHygiene,
    FunctionContract,
)

__all__ = ["ALL_CHECKS", "Check", "CheckContext", "Settings"]
