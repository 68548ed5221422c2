"""The registry of checks, in rule-id order."""

from __future__ import annotations

from .base import Check, CheckContext
from .registry import REGISTRY, checks_for

__all__ = ["REGISTRY", "Check", "CheckContext", "checks_for"]
