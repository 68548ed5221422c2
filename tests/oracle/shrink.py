"""Shrinking a disagreeing program to a minimal one: first its choices (each forced to its
simplest option while the disagreement holds), then its statements (each line dropped, or
replaced by `pass`, while the disagreement holds). Every step runs the candidates of a round
as one batch, on both sides."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import replace

from . import batch
from .batch import Result
from .generators import build
from .harms import GENERATORS, Disagreement
from .program import PKG, Program

Still = Callable[[Result], bool]


def holds(original: Result, target: Disagreement) -> Still:
    """Whether a result still shows the same disagreement, for the same reason: the same
    findings, and the same harms in the generator's scope (so shrinking cannot drift into
    another bug, such as dropping `@staticmethod` or a whole return)."""
    scope = GENERATORS[original.program.family].scope()

    def in_scope(r: Result) -> set[str]:
        return {h for h in r.harms if scope.search(h)}

    codes, harms = set(original.codes), in_scope(original)
    return lambda r: (
        any(d.key == target.key for d in r.disagreements())
        and set(r.codes) == codes
        and in_scope(r) == harms
    )


def _choice_candidates(prog: Program) -> list[Program]:
    out = []
    for name, index in prog.choices.items():
        if index == 0:
            continue
        for simpler in sorted({0, index - 1}):
            forced = dict(prog.choices, **{name: simpler})
            try:
                out.append(build(prog.family, prog.seed, forced))
            except Exception:  # noqa: BLE001 - a combination the generator cannot build
                continue
    return out


def _parses(text: str) -> bool:
    try:
        ast.parse(text.replace(PKG, "pkg"))
    except SyntaxError:
        return False
    return True


# Lines whose loss changes what a program is about rather than making it smaller.
KEEP = ("return", "@", "class ", "def ")
Edit = tuple[str, int, str | None]  # (file, line index, replacement: None drops the line)


def _apply(prog: Program, edits: list[Edit]) -> Program | None:
    files = dict(prog.files)
    for path in {e[0] for e in edits}:
        lines = files[path].splitlines()
        for _, i, repl in sorted((e for e in edits if e[0] == path), key=lambda e: -e[1]):
            lines[i : i + 1] = [] if repl is None else [repl]
        files[path] = "\n".join(lines) + "\n"
        if not _parses(files[path]):
            return None
    return replace(prog, files=files)


def _line_edits(prog: Program) -> list[tuple[Edit, Program]]:
    out = []
    for path, text in prog.files.items():
        for i, line in enumerate(text.splitlines()):
            if not line.strip() or line.strip() == "pass" or line.lstrip().startswith(KEEP):
                continue
            for repl in (None, line[: len(line) - len(line.lstrip())] + "pass"):
                candidate = _apply(prog, [(path, i, repl)])
                if candidate is not None:
                    out.append(((path, i, repl), candidate))
                    break
    return out


def _first(candidates: list[Program], still: Still, jobs: int, world: int) -> Program | None:
    """The first candidate that still disagrees (one batch for all)."""
    if not candidates:
        return None
    for result in batch.run(candidates, jobs=jobs, world=world):
        if still(result):
            return result.program
    return None


def shrink(
    original: Result, target: Disagreement, rounds: int = 12, jobs: int = 2, world: int = 2
) -> tuple[Program, Program]:
    """Smaller programs showing the same disagreement: the simplest choices (a program the
    generator replays), and that program with every statement it can spare dropped."""
    still = holds(original, target)
    prog = original.program
    for _ in range(rounds):
        smaller = _first(_choice_candidates(prog), still, jobs, world)
        if smaller is None:
            break
        prog = smaller
    chosen = prog
    for _ in range(rounds * 2 if rounds else 0):
        edits = _line_edits(prog)
        if not edits:
            break
        results = batch.run([c for _, c in edits], jobs=jobs, world=world)
        good = [e for (e, _), r in zip(edits, results, strict=True) if still(r)]
        if not good:
            break
        together = _apply(prog, good) if len(good) > 1 else None
        if together is not None and still(batch.run([together], jobs=1, world=world)[0]):
            prog = together
        else:
            prog = next(c for e, c in edits if e == good[0])
    return chosen, prog
