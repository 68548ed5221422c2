"""AGL402: forward / backward / setup_context / jvp / vmap of a Function must be static."""

from __future__ import annotations

from ..analysis.contract import CONTRACT_METHODS, is_static
from ..analysis.facts import ClassInfo
from ..analysis.names import dotted
from ..preconditions import Unproven
from .base import Check
from .common import add_decorator_fix
from .fix_proofs import instances_of
from .gates import function_gate
from .reads import Reads


class StaticMethods(Check):
    """AGL402 over every autograd.Function class."""

    codes = ("AGL402",)
    gate = function_gate()
    reads = Reads(functions=True)

    def run(self) -> None:
        for info in self.ctx.contract().backward_classes():
            self.ctx.enter(info.node)
            self._class(info)

    def _class(self, info: ClassInfo) -> None:
        asked = False
        unproven: Unproven | None = None
        for name in CONTRACT_METHODS:
            method = info.methods.get(name)
            if method is None or is_static(method):
                continue
            if any(dotted(d.decorator) == "classmethod" for d in method.decorators):
                continue  # binds the class wherever it is looked up: works like static (D2.3)
            # Through the class (`apply`, `Fn.forward(ctx, x)`) a plain function and a static
            # method are the same; through an instance the plain one gets the instance as its
            # first argument, so the fix is proven only where no instance can exist: of the
            # class or a subclass, in this file or another of the project (`no-instance`).
            if not asked:
                asked = True
                why = instances_of(self.ctx, info.name)
                unproven = (
                    Unproven(
                        "AGL402",
                        "no-instance",
                        f"{why}; looked up on an instance, a "
                        "plain method gets the instance as its first argument",
                    )
                    if why
                    else None
                )
            fix = add_decorator_fix(method, "staticmethod", unproven=[unproven])
            self.report("AGL402", method, anchor=method.name, fix=fix, cls=info.name, method=name)
