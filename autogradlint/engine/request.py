"""What a front end asks of the engine about one file (`LintRequest`): light to import, so the
runner and the language server build requests without loading libcst."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..settings import Settings
from ..view import EMPTY, FileView

Tier = Literal["safe", "unsafe"]


@dataclass(frozen=True)
class LintRequest:
    """One file's source, what it is linted with, and what is wanted besides its findings.

    `fixes`: each fixable finding's fix on its own, as edits (JSON, SARIF, the editor's quick
    fixes). `plan`: every fix of that tier at once, as one set of edits (a pass of the fix
    loop). `classes`: the classes the confirmer can execute. `suppress=False` leaves
    suppression comments unapplied and unaudited (the language server's partial runs only).
    `record_depends=False` leaves out what else the result depends on (only a cache reads it)."""

    source: bytes | str
    path: str = "<stdin>"
    settings: Settings = Settings()
    view: FileView = EMPTY
    enabled: frozenset[str] | None = None  # None: every rule
    fixes: bool = False
    plan: Tier | None = None
    classes: bool = False
    suppress: bool = True
    record_depends: bool = True
