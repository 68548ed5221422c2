"""The registry of checks, in rule-id order."""

from __future__ import annotations

from .base import Check, CheckContext
from .registry import REGISTRY, can_hold_findings, checks_for, reads_for

__all__ = ["REGISTRY", "Check", "CheckContext", "can_hold_findings", "checks_for", "reads_for"]
