"""Fix a generated program as `autogradlint fix` fixes a project: its files written under a
project root, the project index built over all of them, and each file fixed with its view (so
preconditions about the other files, such as instances of a class, are proven or not)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from run import Program, files_of

from autogradlint.engine.fix_loop import fix_text
from autogradlint.runner import project_index


@dataclass
class Fixed:
    files: dict[str, str]
    applied: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def fix_project(
    program: Program, rules: Iterable[str] | None = None, unsafe: bool = False
) -> Fixed:
    """Every file of `program` fixed (the safe tier unless `unsafe`), against the project as
    it was before any fix, as `fix --apply` does."""
    files = files_of(program)
    enabled = frozenset(rules) if rules is not None else None
    with tempfile.TemporaryDirectory(prefix="agl-differential-") as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text("")
        for name, text in files.items():
            (root / name).write_text(text)
        index = project_index(
            [(root / name, text.encode()) for name, text in files.items()], [], root
        )
        out = Fixed({})
        for name, text in files.items():
            path = root / name
            outcome = fix_text(
                text, str(path), unsafe=unsafe, enabled=enabled, project=index.view(str(path))
            )
            out.files[name] = outcome.source
            out.applied += outcome.applied
            if outcome.error is not None:
                out.errors.append(outcome.error)
    return out
