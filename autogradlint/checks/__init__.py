"""The registry of checks, in rule-id order.

Its names are imported on first use: a module that needs only the byte gates
(`checks.admission`, `checks.gates`) must not import every check, and with them libcst."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Check, CheckContext
    from .registry import REGISTRY, can_hold_findings, checks_for, reads_for

__all__ = ["REGISTRY", "Check", "CheckContext", "can_hold_findings", "checks_for", "reads_for"]

_HOME = {"Check": ".base", "CheckContext": ".base"}


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME.get(name, ".registry"), __name__), name)
