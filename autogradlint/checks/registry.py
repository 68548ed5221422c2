"""Which check reports which rules, and the byte gate of the files that can hold them.

Adding a rule is its YAML file, its check module, and a line here; no check imports the speed
layer, and the speed layer never imports a check (it must stay free of libcst)."""

from __future__ import annotations

from collections.abc import Iterable

from . import gates
from .backward_state import BackwardState
from .base import Check
from .compiled_grads import CompiledGradients
from .custom_op_setup import CustomOpSetup
from .direct_calls import DirectCalls
from .dispatch_handlers import DispatchHandlers
from .gradient_count import GradientCount
from .input_mutation import InputMutation
from .reentrant import ReentrantAutograd
from .saved_state import SavedState
from .static_methods import StaticMethods
from .torch_function import TorchFunctionConversions
from .torch_function_hygiene import TorchFunctionHygiene

REGISTRY: tuple[tuple[type[Check], gates.Gate], ...] = (
    (ReentrantAutograd, gates.REENTRANT),
    (CompiledGradients, gates.COMPILED_GRADS),
    (TorchFunctionConversions, gates.TORCH_FUNCTION),
    (DispatchHandlers, gates.DISPATCH_HANDLERS),
    (TorchFunctionHygiene, gates.OVERRIDES),
    (GradientCount, gates.GRADIENT_COUNT),
    (StaticMethods, gates.STATIC_METHODS),
    (SavedState, gates.SAVED_STATE),
    (InputMutation, gates.INPUT_MUTATION),
    (BackwardState, gates.BACKWARD_STATE),
    (DirectCalls, gates.DIRECT_CALLS),
    (CustomOpSetup, gates.CUSTOM_OP_SETUP),
)


def checks_for(enabled: Iterable[str]) -> list[tuple[type[Check], gates.Gate]]:
    """The checks that report at least one enabled rule, with their gates."""
    wanted = set(enabled)
    return [(check, gate) for check, gate in REGISTRY if wanted.intersection(gate.ids)]
