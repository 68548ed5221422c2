"""AGL402: forward / backward / setup_context / jvp / vmap of a Function must be static."""

from __future__ import annotations

import re

from ..analysis.contract import CONTRACT_METHODS, is_static
from ..analysis.facts import ClassInfo
from ..analysis.names import dotted
from .base import Check
from .common import add_decorator_fix


def instantiated(source: str, name: str) -> bool:
    """Whether `Name(` is called anywhere in the text other than its class statement (asked
    only for classes with a non-static method: a literal search each, no whole-file scan)."""
    pattern = re.compile(rf"{re.escape(name)}[ \t]*\(")
    for match in pattern.finditer(source):
        before = source[match.start() - 1 : match.start()]
        if before and (before.isalnum() or before in "._"):
            continue  # `MyName(` or `x.Name(`: another name
        line_start = source.rfind("\n", 0, match.start()) + 1
        if not source[line_start : match.start()].rstrip(" \t").endswith("class"):
            return True
    return False


class StaticMethods(Check):
    """AGL402 over every autograd.Function class."""

    def run(self) -> None:
        for info in self.ctx.contract().classes():
            self.ctx.enter(info.node)
            self._class(info)

    def _class(self, info: ClassInfo) -> None:
        known_instantiated: bool | None = None
        for name in CONTRACT_METHODS:
            method = info.methods.get(name)
            if method is None or is_static(method):
                continue
            if any(dotted(d.decorator) == "classmethod" for d in method.decorators):
                continue  # binds the class wherever it is looked up: works like static (D2.3)
            # Through the class (`apply`, `Fn.forward(ctx, x)`) a plain function and a static
            # method are the same; through an instance the plain one gets the instance as its
            # first argument, so the fix is proven only without instances.
            if known_instantiated is None:
                known_instantiated = instantiated(self.ctx.facts.source, info.name)
            note = (
                f"`{info.name}(...)` is instantiated in this file: looked up on an instance, "
                f"`{name}` gets the instance as its first argument until it is static"
                if known_instantiated
                else ""
            )
            fix = add_decorator_fix(method, "staticmethod", note=note)
            self.report("AGL402", method, anchor=method.name, fix=fix, cls=info.name, method=name)
