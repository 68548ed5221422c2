"""Fix preconditions: the facts a rewrite rests on, and the verdict they give its safety.

A fix is safe only when every precondition is proven. Each rule with a safe fix names its
preconditions in its YAML (`fix-preconditions`: an id and one sentence each); the check that
builds the fix proves each one from what it can read (the method, the file, the project's other
files, the C++ or Triton source behind a call). One that cannot be proven makes the fix unsafe,
and the fix's note names it and says why, so `fix --unsafe-fixes` users see what to check.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

# The preconditions each safe fix checks, by rule: the YAML states the same ids (a test holds
# the two together), so a sentence can never describe a check that is not made, or the reverse.
CHECKED: dict[str, tuple[str, ...]] = {
    "AGL101": ("graphless", "reaches-call", "nothing-catches", "torch-in-scope"),
    "AGL102": ("graphless", "reaches-call", "nothing-catches", "torch-in-scope"),
    "AGL201": ("callee-does-not-write", "gradient-not-none"),
    "AGL202": ("locals-not-introspected", "torch-in-scope"),
    "AGL204": ("result-not-written",),
    "AGL303": ("cls-not-read",),
    "AGL402": ("no-instance",),
    "AGL406": (
        "locals-not-introspected",
        "whole-gradient-writes",
        "layout-not-read",
        "no-collective-writes",
    ),
    "AGL412": ("locals-not-introspected", "needs-input-grad-guard"),
    "AGL901": ("comment-only",),
    "AGL902": ("comment-only",),
    "AGL903": ("comment-only",),
}


@dataclass(frozen=True)
class Unproven:
    """A precondition of a rule's fix that could not be proven here, and why."""

    rule_id: str
    precondition: str
    why: str

    def __post_init__(self) -> None:
        if self.precondition not in CHECKED.get(self.rule_id, ()):
            raise ValueError(f"{self.rule_id} declares no fix precondition {self.precondition!r}")

    @property
    def note(self) -> str:
        """What the fix's note says: the precondition (the claim its YAML sentence opens
        with, before the colon) and the reason it is not proven here."""
        sentence = declared(self.rule_id).get(self.precondition, self.precondition)
        claim = sentence.split(": ", 1)[0]
        return f"not proven that {_lowered(claim)} ({self.why})"


def verdict(failures: Iterable[Unproven | None]) -> tuple[str, str]:
    """(safety, note): `safe` with no note when nothing failed, else `unsafe` and the note of
    every precondition that failed."""
    notes = [failure.note for failure in failures if failure is not None]
    return ("unsafe", "; ".join(notes)) if notes else ("safe", "")


@functools.cache
def declared(rule_id: str) -> dict[str, str]:
    """A rule's `fix-preconditions` as its YAML states them (read only to write a note)."""
    from .meta import parsed_yaml, rules_dir

    path = rules_dir() / f"{rule_id}.yaml"
    with parsed_yaml() as parse:
        document = parse(path.read_text(encoding="utf-8"))
    found = document.get("fix-preconditions") if isinstance(document, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(key): " ".join(str(value).split()) for key, value in found.items()}


def _lowered(sentence: str) -> str:
    """`The gradient is never None.` -> `the gradient is never None`, to follow "that"."""
    text = sentence.rstrip(".")
    return text[:1].lower() + text[1:] if text[1:2].islower() or len(text) == 1 else text
