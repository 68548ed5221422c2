"""What of a file a check reads: each check declares it, and the slicer keeps exactly the union
of what the enabled checks declare (speed/preselect.py from the text, speed/slicing.py from
`ast`), so the slicer holds no knowledge of any one rule."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Reads:
    """The parts of a file a check may read; anything else the slicer may drop.

    `functions`: autograd Function classes (whole), the helpers they call (module-level
    functions that reach a graph call, HELPER_DEPTH calls deep, and the static methods they
    call on the file's other classes) and the statements that load compiled extensions.
    `overrides`: classes with a `__torch_function__` / `__torch_dispatch__` hook (their header
    and the hooks). `handler_ops`: defs registered by decorator for one of these `aten` ops,
    taking `args` and `kwargs` as a dispatch handler does. `call_tails`: statements calling a
    Function class with one of these tails (`.forward(`), and the grad-mode tests of the
    function that makes the call. `apply_arity`: `Fn.apply(...)` calls whose arguments the
    Function's forward may not take. `custom_ops`: `register_autograd(...)` statements, the
    defs they name and the op's own definition. `op_definitions`: the statements that define
    a custom op (`@custom_op`, `custom_op(...)`, `.define(...)`)."""

    functions: bool = False
    overrides: bool = False
    handler_ops: frozenset[str] = frozenset()
    call_tails: tuple[str, ...] = ()
    apply_arity: bool = False
    custom_ops: bool = False
    op_definitions: bool = False

    def __or__(self, other: Reads) -> Reads:
        return Reads(
            self.functions or other.functions,
            self.overrides or other.overrides,
            self.handler_ops | other.handler_ops,
            tuple(sorted(set(self.call_tails) | set(other.call_tails))),
            self.apply_arity or other.apply_arity,
            self.custom_ops or other.custom_ops,
            self.op_definitions or other.op_definitions,
        )

    @property
    def function_names(self) -> bool:
        """Whether the file's Function class names are needed (to keep them, or calls on them)."""
        return self.functions or bool(self.call_tails) or self.apply_arity


def union(reads: Iterable[Reads]) -> Reads:
    """What a set of checks reads together."""
    out = Reads()
    for one in reads:
        out = out | one
    return out
