"""Which files can hold a finding of the enabled rules, from their bytes, without libcst.

The CLI asks this of every file in forked readers before anything is parsed; importing the
check classes (and so libcst) to learn their gates would keep the parent from loading the
engine while the readers read. So each check's rules and gate are listed here as plain data,
in registry order, and checks/registry.py verifies on import that every check declares the
same ones: a gate changed in one place only fails every run, never admits silently less.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from ..settings import DISPATCH_REQUEST_OPS, DISPATCH_SIZED_OPS
from ..text.outline import ClassDecl
from .gates import (
    CUSTOM_OP_AUTOGRAD,
    SUPPRESSION_CODES,
    SUPPRESSIONS,
    Gate,
    Memo,
    admitting,
    declarations,
    declared,
    function_gate,
    pattern,
    subclasses_index,
)

# The ops whose `__torch_dispatch__` handlers AGL306 reads (checks/dispatch_handlers.py).
DISPATCH_READ_OPS = DISPATCH_REQUEST_OPS | DISPATCH_SIZED_OPS

# (check class name, its rules, its gate), in registry order.
GATE_TABLE: tuple[tuple[str, tuple[str, ...], Gate], ...] = (
    (
        "ReentrantAutograd",
        ("AGL101", "AGL102", "AGL103", "AGL104", "AGL105"),
        function_gate(b"def backward", custom_ops=True),
    ),
    ("CompiledGradients", ("AGL201", "AGL202"), function_gate(b"def backward", custom_ops=True)),
    (
        "TorchFunctionConversions",
        ("AGL301", "AGL302"),
        Gate((pattern(b"__torch_", rb"def\s+__torch_(function|dispatch)__"),), (b"__torch_",)),
    ),
    (
        "DispatchHandlers",
        ("AGL306",),
        Gate(
            (
                pattern(b"__torch_dispatch__", rb"def\s+__torch_dispatch__"),
                # a handler registered by decorator for one of the ops (starts with a literal)
                pattern(
                    b"aten.",
                    rb"aten\.(?:" + "|".join(sorted(DISPATCH_READ_OPS)).encode() + rb")\b",
                ),
            )
        ),
    ),
    (
        "TorchFunctionHygiene",
        ("AGL303", "AGL304", "AGL305"),
        Gate((pattern(b"__torch_function__", rb"def\s+__torch_function__"),), (b"__torch_",)),
    ),
    ("GradientCount", ("AGL401",), function_gate(custom_ops=True)),
    ("StaticMethods", ("AGL402",), function_gate()),
    ("SavedState", ("AGL403", "AGL404"), function_gate(custom_ops=True)),
    ("InputMutation", ("AGL405",), function_gate()),
    ("BackwardState", ("AGL406", "AGL408", "AGL409"), function_gate(custom_ops=True)),
    ("DirectCalls", ("AGL407", "AGL410"), function_gate()),
    (
        "CustomOpSetup",
        ("AGL411",),
        Gate((pattern(CUSTOM_OP_AUTOGRAD, rb"register_autograd[ \t]*\("),), (CUSTOM_OP_AUTOGRAD,)),
    ),
    ("UnsetGradients", ("AGL412",), function_gate(custom_ops=True)),
    (
        "CustomOpFake",
        ("AGL413",),
        Gate(
            (pattern(b"custom_op", rb"custom_op[ \t]*\("), pattern(b"define", rb"define[ \t]*\(")),
            (b"torch",),
        ),
    ),
)


def gates_for(enabled: Iterable[str]) -> list[Gate]:
    """The gates of the enabled checks, and the suppression audit's (engine/hygiene.py)."""
    wanted = set(enabled)
    gates = [gate for _name, codes, gate in GATE_TABLE if wanted.intersection(codes)]
    return gates + [SUPPRESSIONS] if wanted.intersection(SUPPRESSION_CODES) else gates


@functools.lru_cache(maxsize=64)
def _admitting_gates(enabled: frozenset[str]) -> tuple[Gate, ...]:
    return admitting(gates_for(enabled))


def can_hold_findings(
    source: bytes,
    enabled: Iterable[str],
    index: frozenset[str] = frozenset(),
    decls: Sequence[ClassDecl] | None = None,
    memo: Memo | None = None,
) -> bool:
    """Whether an enabled gate admits the file, or it subclasses a Function of the index.

    `decls` are the file's class_declarations when the caller already has them; `memo`, what
    earlier tests of the same bytes found (gates.declarations puts the class statements there)."""
    gates = _admitting_gates(frozenset(enabled))
    memo = declared(memo, decls)
    if any(gate.admits(source, memo) for gate in gates):
        return True
    if not index or not any(gate.starts_from_functions for gate in gates):
        return False
    return subclasses_index(declarations(source, memo), index)
