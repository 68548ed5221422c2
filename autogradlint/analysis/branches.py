"""Where each statement of a method sits: the branches (`if`, loops, `try`) around it, so a
check can tell which earlier definitions of a name may still hold at a later statement, and
what an `if` test says about a name inside its branch."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import libcst as cst

# One enclosing branch: the compound statement and which of its suites holds the statement
# ("body", "orelse", a handler's position, ...).
Step = tuple[int, str]
Path = tuple[Step, ...]


class Branches:
    """The enclosing branches of every statement of one function body (nested functions and
    classes are not entered: they run at another time)."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.paths: dict[int, Path] = {}
        self.tests: dict[int, cst.If] = {}  # id(If) -> the If, for what its test says
        self._suite(function.body, ())

    def path(self, node: cst.CSTNode) -> Path | None:
        """The branches around a statement (or a call that is a whole statement)."""
        return self.paths.get(id(node))

    def dominates(self, earlier: cst.CSTNode | None, later: cst.CSTNode) -> bool:
        """Whether `earlier` (a statement before `later`) runs on every path to `later`: it
        sits in `later`'s block or one around it. None (a parameter) always does."""
        if earlier is None:
            return True
        before, after = self.path(earlier), self.path(later)
        if before is None or after is None:
            return False
        return after[: len(before)] == before

    def conditions(self, node: cst.CSTNode) -> list[tuple[cst.If, bool]]:
        """The `if` statements around a statement, each with whether it is in the body (the
        test held) or in the else branch (it did not)."""
        found = []
        for key, suite in self.path(node) or ():
            test = self.tests.get(key)
            if test is not None:
                found.append((test, suite == "body"))
        return found

    # --- building -------------------------------------------------------------------------
    def _block(self, statements: Sequence[cst.BaseStatement], path: Path) -> None:
        for statement in statements:
            self._statement(statement, path)

    def _small(self, statements: Iterable[cst.BaseSmallStatement], path: Path) -> None:
        for small in statements:
            self.paths[id(small)] = path
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                self.paths[id(small.value)] = path  # a call on its own line

    def _suite(self, suite: cst.BaseSuite, path: Path) -> None:
        if isinstance(suite, cst.IndentedBlock):
            self._block(suite.body, path)
        elif isinstance(suite, cst.SimpleStatementSuite):
            self._small(suite.body, path)

    def _statement(self, statement: cst.BaseStatement, path: Path) -> None:
        self.paths[id(statement)] = path
        if isinstance(statement, cst.SimpleStatementLine):
            self._small(statement.body, path)
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return
        elif isinstance(statement, cst.If):
            key = id(statement)
            self.tests[key] = statement
            self._suite(statement.body, (*path, (key, "body")))
            orelse = statement.orelse
            if isinstance(orelse, cst.If):  # elif: an `if` inside the else branch
                self._statement(orelse, (*path, (key, "orelse")))
            elif isinstance(orelse, cst.Else):
                self._suite(orelse.body, (*path, (key, "orelse")))
        elif isinstance(statement, cst.With):
            self._suite(statement.body, path)  # its body always runs
        elif isinstance(statement, cst.Try):
            key = id(statement)
            self._suite(statement.body, (*path, (key, "body")))
            for index, handler in enumerate(statement.handlers):
                self._suite(handler.body, (*path, (key, f"except{index}")))
            if statement.orelse is not None:
                self._suite(statement.orelse.body, (*path, (key, "orelse")))
            if statement.finalbody is not None:
                self._suite(statement.finalbody.body, path)  # always runs
        elif isinstance(statement, (cst.For, cst.While)):
            key = id(statement)
            self._suite(statement.body, (*path, (key, "body")))
            if statement.orelse is not None:
                self._suite(statement.orelse.body, (*path, (key, "orelse")))
        else:  # match, try*, and whatever comes next: every suite is conditional
            key = id(statement)
            for index, suite in enumerate(_suites(statement)):
                self._suite(suite, (*path, (key, f"suite{index}")))


def _suites(statement: cst.CSTNode) -> list[cst.BaseSuite]:
    found: list[cst.BaseSuite] = []
    body = getattr(statement, "body", None)
    if isinstance(body, cst.BaseSuite):
        found.append(body)
    for case in getattr(statement, "cases", ()):
        found.append(case.body)
    for handler in getattr(statement, "handlers", ()):
        found.append(handler.body)
    for name in ("orelse", "finalbody"):
        extra = getattr(statement, name, None)
        if extra is not None and isinstance(getattr(extra, "body", None), cst.BaseSuite):
            found.append(extra.body)
    return found
