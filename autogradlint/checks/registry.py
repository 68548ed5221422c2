"""The one list of checks, in the order they run. Each check declares beside its code the rules
it reports (`codes`), the byte gate of the files that can hold them (`gate`) and what of a file
it reads (`reads`); everything else (the gate table, checks/admission.py; what the slicer
keeps) is derived from the enabled checks. Adding a rule is its YAML file, its check module, and
a line here."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from .backward_state import BackwardState
from .base import Check
from .compiled_grads import CompiledGradients
from .custom_op_fake import CustomOpFake
from .custom_op_setup import CustomOpSetup
from .direct_calls import DirectCalls
from .dispatch_handlers import DispatchHandlers
from .gradient_count import GradientCount
from .input_mutation import InputMutation
from .reads import Reads, union
from .reentrant import ReentrantAutograd
from .saved_inputs import SavedInputs
from .saved_state import SavedState
from .static_methods import StaticMethods
from .torch_function import TorchFunctionConversions
from .torch_function_hygiene import TorchFunctionHygiene
from .unset_gradients import UnsetGradients

REGISTRY: tuple[type[Check], ...] = (
    ReentrantAutograd,
    CompiledGradients,
    SavedInputs,
    TorchFunctionConversions,
    DispatchHandlers,
    TorchFunctionHygiene,
    GradientCount,
    StaticMethods,
    SavedState,
    InputMutation,
    BackwardState,
    DirectCalls,
    CustomOpSetup,
    UnsetGradients,
    CustomOpFake,
)


def checks_for(enabled: Iterable[str]) -> list[type[Check]]:
    """The checks that report at least one enabled rule, in registry order."""
    wanted = set(enabled)
    return [check for check in REGISTRY if wanted.intersection(check.codes)]


# What every check reads: what the slicer keeps when no rule is disabled.
EVERY_CHECK_READS = union(check.reads for check in REGISTRY)


@functools.lru_cache(maxsize=64)
def reads_for(enabled: frozenset[str]) -> Reads:
    """What the enabled checks read together: all the slicer keeps."""
    return union(check.reads for check in checks_for(enabled))
