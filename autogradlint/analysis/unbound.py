"""Names a function may read before any path assigned them (UnboundLocalError).

The body is walked path by path: each path carries the names it has bound and the branch
conditions it has taken, so a second `if ctx.sequence_parallel:` follows the first one's
branch instead of every combination (Megatron's backward assigns under one test and returns
under the same); `and` / `or` / `not` are taken apart, so `if a or not b:` ... `elif b:` binds
under the same test as a later `if b and not a:`, and `assert` and `x = None` are facts too. A
condition is forgotten when a name in it is assigned again. A loop body is walked twice (from
what holds before the loop, then from what the first pass left, its conditions forgotten); a
`for` loop runs at least once; `x = None`, `flag = True` and `flag = False` are facts about
`x is None` and `flag`. An exception handler starts from what was bound before its
`try`, and a `match` without an irrefutable case may match nothing. Reads inside a conditional expression or after
`and` / `or` count only on the branch that evaluates them. A function with more paths than
MAX_PATHS is not judged (nothing reported), so a report is never a guess.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

import libcst as cst

from .walk import FastVisitor, children

MAX_PATHS = 256

Fact = tuple[str, bool]  # (condition as text, whether the path took it as true)


@dataclass(frozen=True)
class Path:
    bound: frozenset[str]
    facts: frozenset[Fact] = frozenset()

    def bind(self, names: Iterable[str]) -> Path:
        names = set(names)
        if not names:
            return self
        kept = frozenset(f for f in self.facts if not _mentions(f[0], names))
        return Path(self.bound | names, kept)

    def unbind(self, names: Iterable[str]) -> Path:
        return Path(self.bound - set(names), self.facts)

    def fact(self, condition: str | None, value: bool) -> Path:
        if condition is None:
            return self
        return Path(self.bound, self.facts | {(condition, value)})

    def known(self, condition: str | None) -> bool | None:
        if condition is None:
            return None
        if (condition, True) in self.facts:
            return True
        if (condition, False) in self.facts:
            return False
        return None

    def evaluate(self, test: cst.BaseExpression, whole: bool = True) -> bool | None:
        """The test's value on this path, from the conditions taken (three-valued); from its
        parts alone when not `whole`."""
        negated = _negation(test)
        if negated is not None:
            inner = self.evaluate(negated, whole)
            return None if inner is None else not inner
        if isinstance(test, cst.BooleanOperation):
            left, right = self.evaluate(test.left), self.evaluate(test.right)
            stop = isinstance(test.operator, cst.Or)  # the value that decides alone
            if left is stop or right is stop:
                return stop
            if left is not None and right is not None:
                return not stop
        return self.known(condition_key(test)) if whole else None

    def consistent(self) -> bool:
        """Whether no compound condition taken contradicts what its parts are known to be (a
        path that took `a or not b` as true cannot have taken `a` false and `b` true)."""
        for key, value in self.facts:
            test = _COMPOUND.get(key)
            if test is not None and self.evaluate(test, whole=False) == (not value):
                return False
        return True

    def assume(self, test: cst.BaseExpression, value: bool) -> Path:
        """This path, having found `test` to be `value`: what that says of its parts too."""
        negated = _negation(test)
        if negated is not None:
            return self.assume(negated, not value)
        key = condition_key(test)
        path = self.fact(key, value)
        if isinstance(test, cst.BooleanOperation):
            if key is not None and len(_COMPOUND) < 4096:
                _COMPOUND.setdefault(key, test)
            both = value == isinstance(test.operator, cst.And)  # `a and b` true, `a or b` false
            if both:
                return path.assume(test.left, value).assume(test.right, value)
            # one side decides: known only once the other side is known not to
            for side, other in ((test.left, test.right), (test.right, test.left)):
                if path.evaluate(other) == (not value):
                    path = path.assume(side, value)
        return path


def _forget(path: Path, names: set[str]) -> Path:
    """`path` with every condition on one of `names` forgotten (a loop may assign them)."""
    return Path(path.bound, frozenset(f for f in path.facts if not _mentions(f[0], names)))


# Compound conditions by their text, so a path can check them against what it learns later
# (the text says everything about the test: the same text is the same test in any file).
_COMPOUND: dict[str, cst.BooleanOperation] = {}


@dataclass(frozen=True)
class UnboundRead:
    """A read in a `return` of a name no assignment on some path reached."""

    name: str
    node: cst.Name
    facts: frozenset[Fact]  # the conditions that path took
    # ... those of them that decide a branch holding an assignment of the name: why it is unset
    skipped: frozenset[Fact] = frozenset()


class TooManyPaths(Exception):
    pass


@dataclass
class _Loop:
    breaks: list[Path] = field(default_factory=list)
    continues: list[Path] = field(default_factory=list)


class _Walker:
    def __init__(self, local: set[str], returns_only: bool = False) -> None:
        self.local = local
        self.returns_only = returns_only
        self.found: dict[str, UnboundRead] = {}
        self.loops: list[_Loop] = []

    # --- blocks and statements --------------------------------------------------------------
    def block(self, body: cst.BaseSuite | None, paths: set[Path]) -> set[Path]:
        if body is None:
            return paths
        statements: Iterable[cst.CSTNode]
        if isinstance(body, cst.IndentedBlock):
            statements = body.body
        elif isinstance(body, cst.SimpleStatementSuite):
            statements = body.body
        else:
            statements = [body]
        for statement in statements:
            if not paths:
                return paths
            paths = self.statement(statement, paths)
            if len(paths) > MAX_PATHS:
                raise TooManyPaths
        return paths

    def statement(self, node: cst.CSTNode, paths: set[Path]) -> set[Path]:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                paths = self.small(small, paths)
            return paths
        if isinstance(node, cst.If):
            return self.branch(node, paths)
        if isinstance(node, (cst.For, cst.While)):
            return self.loop(node, paths)
        if isinstance(node, (cst.Try, cst.TryStar)):
            return self.attempt(node, paths)
        if isinstance(node, cst.With):
            self.read_all([item.item for item in node.items], paths)
            for item in node.items:
                paths = {p.bind(_walrus(item.item)) for p in paths}
                if item.asname is not None:
                    paths = {p.bind(_targets(item.asname.name)) for p in paths}
            return self.block(node.body, paths)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return {p.bind([node.name.value]) for p in paths}
        if isinstance(node, cst.Match):
            return self.match(node, paths)
        return paths

    def read_all(
        self, exprs: Iterable[cst.BaseExpression | None], paths: set[Path], returned: bool = False
    ) -> None:
        if self.returns_only and not returned:
            return
        # The first path that leaves a name unset is the one the message tells: take the paths
        # in an order of their own, not the set's (which changes with the hash seed).
        ordered = sorted(paths, key=lambda p: (sorted(p.facts), sorted(p.bound)))
        for expr in exprs:
            if expr is not None:
                for path in ordered:
                    self.reads(expr, path)

    def small(self, node: cst.CSTNode, paths: set[Path]) -> set[Path]:
        if isinstance(node, cst.Return):
            self.read_all([node.value], paths, returned=True)
            return set()
        if isinstance(node, cst.Raise):
            self.read_all([node.exc, node.cause.item if node.cause else None], paths)
            return set()
        if isinstance(node, (cst.Break, cst.Continue)):
            if self.loops:
                kept = self.loops[-1].breaks if isinstance(node, cst.Break) else None
                (kept if kept is not None else self.loops[-1].continues).extend(paths)
            return set()
        if isinstance(node, cst.Assign):
            self.read_all([node.value, *(_target_reads(t.target) for t in node.targets)], paths)
            names = set(_walrus(node.value))
            for target in node.targets:
                names |= _targets(target.target)
            paths = {p.bind(names) for p in paths}
            literal = node.value.value if isinstance(node.value, cst.Name) else None
            for target in node.targets:
                if not isinstance(target.target, cst.Name):
                    continue
                name = target.target.value
                if literal == "None":
                    # `x = None` then `if x is None:` takes that branch (a cache filled on the
                    # first pass of a loop)
                    paths = {p.fact(f"({name} is None)", True) for p in paths}
                elif literal in ("True", "False"):
                    # `reshape = True` beside an assignment, then `if reshape:` (a flag)
                    paths = {p.fact(name, literal == "True") for p in paths}
            return paths
        if isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            value = node.value
            if value is None:
                return paths
            read = node.target if isinstance(node, cst.AugAssign) else _target_reads(node.target)
            self.read_all([value, read], paths)
            return {p.bind(_targets(node.target) | _walrus(value)) for p in paths}
        if isinstance(node, cst.Expr):
            self.read_all([node.value], paths)
            return {p.bind(_walrus(node.value)) for p in paths}
        if isinstance(node, cst.Assert):  # the paths that go on are those where it holds
            self.read_all([node.test, node.msg], paths)
            held = {p.assume(node.test, True) for p in paths if p.evaluate(node.test) is not False}
            return {p for p in held if p.consistent()}
        if isinstance(node, cst.Del):
            self.read_all([node.target], paths)
            return {p.unbind(_targets(node.target)) for p in paths}
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            return {p.bind(_imported(node)) for p in paths}
        return paths

    def branch(self, node: cst.If, paths: set[Path]) -> set[Path]:
        self.read_all([node.test], paths)
        out: set[Path] = set()
        taken: set[Path] = set()
        skipped: set[Path] = set()
        for path in paths:
            path = path.bind(_walrus(node.test))
            decided = path.evaluate(node.test)
            if decided is not False:
                taken.add(path.assume(node.test, True))
            if decided is not True:
                skipped.add(path.assume(node.test, False))
        taken = {p for p in taken if p.consistent()}
        skipped = {p for p in skipped if p.consistent()}
        out |= self.block(node.body, taken)
        orelse = node.orelse
        if isinstance(orelse, cst.If):
            out |= self.branch(orelse, skipped)
        elif isinstance(orelse, cst.Else):
            out |= self.block(orelse.body, skipped)
        else:
            out |= skipped
        return out

    def loop(self, node: cst.For | cst.While, paths: set[Path]) -> set[Path]:
        """The first pass starts from what holds before the loop; a second starts from what
        the first left, with every condition on a name the loop assigns forgotten; later passes
        start with at least what the second had bound, so they read nothing new unbound."""
        assigned = _assigned_in(node)
        forever = isinstance(node, cst.While) and _always_true(node.test)
        if isinstance(node, cst.For):
            self.read_all([node.iter], paths)
        # A `for` loop is taken to run at least once: backward loops over chunks, rings or
        # inputs, and a name it assigns on every pass is set afterwards (pyright's "possibly
        # unbound" for an empty iterable is noise there). A `while` loop exits on its test.
        zero = set() if forever or isinstance(node, cst.For) else self._enter(node, paths, False)
        exits: set[Path] = set()
        breaks: set[Path] = set()
        start = self._enter(node, paths, True)
        for _ in range(2):
            self.loops.append(_Loop())
            ended = self.block(node.body, start)
            loop = self.loops.pop()
            breaks |= set(loop.breaks)
            again = {_forget(p, assigned) for p in ended | set(loop.continues)}
            if not forever:
                exits |= self._enter(node, again, False)
            start = self._enter(node, again, True)
            if len(start) > MAX_PATHS:
                raise TooManyPaths
        orelse = node.orelse.body if node.orelse is not None else None
        return self.block(orelse, zero | exits) | {_forget(p, assigned) for p in breaks}

    def _enter(self, node: cst.For | cst.While, paths: set[Path], enter: bool) -> set[Path]:
        """The paths that run the body once more (`enter`), or leave the loop, from `paths`."""
        if isinstance(node, cst.For):
            return {p.bind(_targets(node.target)) for p in paths} if enter else set(paths)
        self.read_all([node.test], paths)
        out = set()
        for path in paths:
            path = path.bind(_walrus(node.test))
            if path.evaluate(node.test) is not (not enter):
                taken = path.assume(node.test, enter)
                if taken.consistent():
                    out.add(taken)
        return out

    def attempt(self, node: cst.Try | cst.TryStar, paths: set[Path]) -> set[Path]:
        body = self.block(node.body, paths)
        out = self.block(node.orelse.body if node.orelse is not None else None, body)
        for handler in node.handlers:
            start = paths
            if handler.name is not None:
                start = {p.bind(_targets(handler.name.name)) for p in paths}
            ended = self.block(handler.body, start)
            if handler.name is not None:  # `except E as e` unbinds e at the end
                ended = {p.unbind(_targets(handler.name.name)) for p in ended}
            out |= ended
        if node.finalbody is not None:
            out = self.block(node.finalbody.body, out)
        return out

    def match(self, node: cst.Match, paths: set[Path]) -> set[Path]:
        self.read_all([node.subject], paths)
        out: set[Path] = set()
        irrefutable = False
        for case in node.cases:
            bound = _pattern_names(case.pattern)
            out |= self.block(case.body, {p.bind(bound) for p in paths})
            if case.guard is None and _irrefutable(case.pattern):
                irrefutable = True
        return out if irrefutable else out | paths

    # --- reads ----------------------------------------------------------------------------------
    def reads(
        self, expr: cst.BaseExpression, path: Path, shadowed: frozenset[str] = frozenset()
    ) -> None:
        if isinstance(expr, cst.Name):
            name = expr.value
            if name in self.local and name not in path.bound and name not in shadowed:
                self.found.setdefault(name, UnboundRead(name, expr, path.facts))
            return
        if isinstance(expr, cst.IfExp):
            self.reads(expr.test, path, shadowed)
            decided = path.evaluate(expr.test)
            if decided is not False:
                self.reads(expr.body, path.assume(expr.test, True), shadowed)
            if decided is not True:
                self.reads(expr.orelse, path.assume(expr.test, False), shadowed)
            return
        if isinstance(expr, cst.BooleanOperation):
            self.reads(expr.left, path, shadowed)
            when = isinstance(expr.operator, cst.And)  # the right side runs when left is this
            if path.evaluate(expr.left) in (None, when):
                self.reads(expr.right, path.assume(expr.left, when), shadowed)
            return
        if isinstance(expr, cst.Attribute):  # `.attr` is no read of a name
            self.reads(expr.value, path, shadowed)
            return
        if isinstance(expr, cst.Lambda):
            params = {p.name.value for p in _all_params(expr.params)}
            self.reads(expr.body, path, shadowed | params)
            return
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            inner = shadowed | _comprehension_names(expr.for_in)
            for child in children(expr):
                if isinstance(child, cst.BaseExpression):
                    self.reads(child, path, inner)
                elif isinstance(child, cst.CompFor):
                    self._comp_for(child, path, inner)
            return
        for child in children(expr):
            if isinstance(child, cst.BaseExpression):
                self.reads(child, path, shadowed)
            else:
                for grandchild in _expressions_below(child):
                    self.reads(grandchild, path, shadowed)

    def _comp_for(self, node: cst.CompFor, path: Path, shadowed: frozenset[str]) -> None:
        self.reads(node.iter, path, shadowed)
        for condition in node.ifs:
            self.reads(condition.test, path, shadowed)
        if node.inner_for_in is not None:
            self._comp_for(node.inner_for_in, path, shadowed)


def unbound_reads(function: cst.FunctionDef, returns_only: bool = False) -> list[UnboundRead]:
    """The local names `function` reads on some path that never bound them (one per name, its
    first read), in source order of those reads; [] when not judged. `returns_only`: only the
    reads of its `return` statements (what a helper hands back)."""
    local = _locals(function)
    if not local:
        return []
    params = {p.name.value for p in _all_params(function.params)}
    walker = _Walker(local - params, returns_only)
    token = _ALIASES.set(_condition_aliases(function))
    memo = _MEMO.set({})
    try:
        walker.block(function.body, {Path(frozenset(params))})
        found = [
            replace(read, skipped=frozenset(f for f in read.facts if f[0] in guards))
            for read in walker.found.values()
            for guards in [_assignment_guards(function, read.name)]
        ]
    except (TooManyPaths, RecursionError):
        return []
    finally:
        _MEMO.reset(memo)
        _ALIASES.reset(token)
    return sorted(found, key=lambda r: _position(function, r.node))


def returns_bound(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether `ast` alone shows that `unbound_reads(returns_only=True)` of this function finds
    nothing: every name a `return` reads (nested functions' too: more names, never fewer) is a
    parameter, or bound nowhere in it (not a local), or bound by a top-level assignment before
    the first top-level statement holding a `return`, and never deleted or bound by `except
    ... as` (which unbinds it). Every path to a return has bound it then, so the libcst parse
    and the path walk a helper would cost can be skipped."""
    args = function.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    read: set[str] = set()
    bound: set[str] = set()
    unbound: set[str] = set()  # deleted, or an except clause's name
    for node in ast.walk(function):
        if isinstance(node, ast.Return) and node.value is not None:
            read |= {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            (unbound if isinstance(node.ctx, ast.Del) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node is not function:  # its own name is the module's
                bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).partition(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            unbound.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    locals_read = (read & (bound | unbound)) - params
    if not locals_read:
        return True
    if locals_read & unbound:
        return False
    early: set[str] = set()
    for statement in function.body:
        if any(isinstance(n, ast.Return) for n in ast.walk(statement)):
            break
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets = [statement.target]
        early |= {
            n.id
            for target in targets
            for n in ast.walk(target)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
    return locals_read <= early


class _Guards(FastVisitor):
    """The conditions (and their parts) of the `if` statements enclosing each assignment of
    a name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stack: list[set[str]] = []
        self.found: set[str] = set()

    def visit_If(self, node: cst.If) -> None:
        self.stack.append(condition_parts(node.test))

    def leave_If(self, original_node: cst.If) -> None:
        self.stack.pop()

    def _assigns(self, target: cst.BaseExpression) -> None:
        if self.name in _targets(target):
            self.found.update(k for keys in self.stack for k in keys)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._assigns(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._assigns(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assigns(node.target)


def _assignment_guards(function: cst.FunctionDef, name: str) -> set[str]:
    visitor = _Guards(name)
    visitor.walk(function.body)
    return visitor.found


# --- conditions as text ----------------------------------------------------------------------
def condition_key(expr: cst.BaseExpression) -> str | None:
    """A condition as canonical text (`ctx.needs_input_grad[0]`, `not z is None`), without
    reading the source; None for what it cannot spell (then no path remembers it). A name
    assigned once from such a condition is spelled as that condition (`needs_x` after
    `needs_x, needs_w = ctx.needs_input_grad`)."""
    key = _memoized("key", expr, lambda: _key_or_none(expr))
    return key if isinstance(key, str) else None


def _key_or_none(expr: cst.BaseExpression) -> str | None:
    try:
        return _key(expr)
    except (ValueError, RecursionError):
        return None


# Names the function assigns once from a condition, spelled as it (set while one is walked).
_ALIASES: ContextVar[dict[str, str] | None] = ContextVar("unbound_aliases", default=None)

# What the walk of one function asks again and again of the same nodes (each statement once
# per path, a loop body twice): a test's key and negation, an expression's `:=` names. By the
# node's id, the node kept beside the answer so no other node takes its id; set while one
# function is walked, like _ALIASES, which the keys depend on.
_MEMO: ContextVar[dict[tuple[str, int], tuple[cst.CSTNode, object]] | None] = ContextVar(
    "unbound_memo", default=None
)
_ABSENT = object()


def _memoized(kind: str, node: cst.CSTNode, compute: Callable[[], object]) -> object:
    memo = _MEMO.get()
    if memo is None:
        return compute()
    kept = memo.get((kind, id(node)))
    if kept is not None and kept[0] is node:
        return kept[1]
    value = compute()
    memo[(kind, id(node))] = (node, value)
    return value


class _Assignments(FastVisitor):
    """Every (target, value) the function assigns, nested scopes left out."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.function = function
        self.pairs: list[tuple[cst.BaseExpression, cst.BaseExpression | None]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.function

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.pairs.append((target.target, node.value))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.pairs.append((node.target, None))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.pairs.append((node.target, node.value))

    def visit_For(self, node: cst.For) -> None:
        self.pairs.append((node.target, None))

    def visit_AsName(self, node: cst.AsName) -> None:
        if isinstance(node.name, cst.BaseExpression):
            self.pairs.append((node.name, None))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.pairs.append((node.target, None))


def _condition_aliases(function: cst.FunctionDef) -> dict[str, str]:
    visitor = _Assignments(function)
    visitor.walk(function)
    counts: dict[str, int] = {}
    for target, _ in visitor.pairs:
        for name in _targets(target):
            counts[name] = counts.get(name, 0) + 1
    out: dict[str, str] = {}
    for target, value in visitor.pairs:
        if value is None:
            continue
        if isinstance(target, cst.Name):
            key = condition_key(value)
            if key is not None:
                out[target.value] = key
        elif isinstance(target, (cst.Tuple, cst.List)):
            base = _sequence_key(value)
            if base is None:
                continue
            for index, element in enumerate(target.elements):
                if isinstance(element.value, cst.Name):
                    out[element.value.value] = f"{base}[{index}]"
    return {name: key for name, key in out.items() if counts.get(name) == 1}


def _sequence_key(value: cst.BaseExpression) -> str | None:
    """`ctx.needs_input_grad` for itself and for `ctx.needs_input_grad[:3]` (a prefix)."""
    if isinstance(value, cst.Subscript) and len(value.slice) == 1:
        piece = value.slice[0].slice
        if isinstance(piece, cst.Slice) and piece.step is None:
            lower = piece.lower
            if lower is None or (isinstance(lower, cst.Integer) and lower.value == "0"):
                return condition_key(value.value)
        return None
    return condition_key(value)


def condition_parts(test: cst.BaseExpression) -> set[str]:
    """The keys of a test and of the parts a path may learn separately (`a`, `b` of
    `not (a or b)`): what a fact about that test can be recorded under."""
    negated = _negation(test)
    if negated is not None:
        return condition_parts(negated)
    key = condition_key(test)
    out = {key} if key is not None else set()
    if isinstance(test, cst.BooleanOperation):
        out |= condition_parts(test.left) | condition_parts(test.right)
    return out


_NEGATED: dict[type, Callable[[], cst.BaseCompOp]] = {
    cst.IsNot: cst.Is,
    cst.NotEqual: cst.Equal,
    cst.NotIn: cst.In,
}


def _negation(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` for `not x`, `a is b` for `a is not b` (`==` for `!=`, `in` for `not in`): a test
    and its negation are one fact."""
    negated = _memoized("negation", test, lambda: _negated(test))
    return negated if isinstance(negated, cst.BaseExpression) else None


def _negated(test: cst.BaseExpression) -> cst.BaseExpression | None:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return test.expression
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        positive = _NEGATED.get(type(target.operator))
        if positive is not None:
            return test.with_changes(comparisons=[target.with_changes(operator=positive())])
    return None


_OPS = {
    cst.Equal: "==",
    cst.NotEqual: "!=",
    cst.Is: "is",
    cst.IsNot: "is not",
    cst.In: "in",
    cst.NotIn: "not in",
    cst.LessThan: "<",
    cst.GreaterThan: ">",
    cst.LessThanEqual: "<=",
    cst.GreaterThanEqual: ">=",
}


def _key(expr: cst.BaseExpression) -> str:
    if isinstance(expr, cst.Name):
        return (_ALIASES.get() or {}).get(expr.value, expr.value)
    if isinstance(expr, cst.Attribute):
        return f"{_key(expr.value)}.{expr.attr.value}"
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
        return expr.value
    if isinstance(expr, cst.Subscript):
        parts = []
        for element in expr.slice:
            if not isinstance(element.slice, cst.Index):
                raise ValueError("slice")
            parts.append(_key(element.slice.value))
        return f"{_key(expr.value)}[{', '.join(parts)}]"
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return f"not {_key(expr.expression)}"
    if isinstance(expr, cst.Comparison):
        text = _key(expr.left)
        for target in expr.comparisons:
            op = _OPS.get(type(target.operator))
            if op is None:
                raise ValueError("operator")
            text += f" {op} {_key(target.comparator)}"
        return f"({text})"
    if isinstance(expr, cst.Call) and not expr.args:
        return f"{_key(expr.func)}()"
    if isinstance(expr, cst.BooleanOperation):
        op = "and" if isinstance(expr.operator, cst.And) else "or"
        return f"({_key(expr.left)} {op} {_key(expr.right)})"
    raise ValueError(type(expr).__name__)


def _mentions(key: str, names: set[str]) -> bool:
    """Whether the condition's text names one of `names` (not as an attribute: `ctx.x`)."""
    heads = _heads(key)
    return any(
        n in heads if n.isascii() and n.isidentifier() else _named(key, n) is not None
        for n in names
    )


@functools.lru_cache(maxsize=4096)
def _heads(key: str) -> frozenset[str]:
    """The whole words of a condition's text that follow no `.`: an ASCII name is mentioned
    exactly when it is one (what `_named` finds, without a pattern compiled per name)."""
    return frozenset(_HEAD.findall(key))


_HEAD = re.compile(r"(?<![\w.])\w+")


def _named(key: str, name: str) -> re.Match[str] | None:
    return re.search(rf"(?<![\w.]){re.escape(name)}\b", key)


def _always_true(test: cst.BaseExpression) -> bool:
    return (isinstance(test, cst.Name) and test.value == "True") or (
        isinstance(test, cst.Integer) and test.value not in ("0",)
    )


# --- what binds names ------------------------------------------------------------------------
def _target_reads(target: cst.BaseExpression) -> cst.BaseExpression | None:
    """What an assignment target reads: `ctx.k` reads ctx, `out[i]` reads out and i (a plain
    name or a tuple of names reads nothing)."""
    if isinstance(target, (cst.Attribute, cst.Subscript)):
        return target
    if isinstance(target, (cst.Tuple, cst.List)):
        reads = [_target_reads(e.value) for e in target.elements]
        kept = [cst.Element(r) for r in reads if r is not None]
        return cst.Tuple(kept) if kept else None
    if isinstance(target, cst.StarredElement):
        return _target_reads(target.value)
    return None


def _targets(target: cst.CSTNode) -> set[str]:
    """The names an assignment target binds (attributes and subscripts bind none)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for element in target.elements:
            out |= _targets(element.value)
        return out
    if isinstance(target, cst.StarredElement):
        return _targets(target.value)
    return set()


def _walrus(expr: cst.CSTNode | None) -> frozenset[str]:
    """Names a `:=` inside an expression binds (outside nested scopes)."""
    if expr is None:
        return frozenset()
    names = _memoized("walrus", expr, lambda: _walrus_names(expr))
    assert isinstance(names, frozenset)
    return names


def _walrus_names(expr: cst.CSTNode) -> frozenset[str]:
    out: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.NamedExpr):
            out |= _targets(node.target)
        if isinstance(node, cst.Lambda):
            continue
        stack.extend(children(node))
    return frozenset(out)


def _imported(node: cst.Import | cst.ImportFrom) -> set[str]:
    if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
        return set()
    out: set[str] = set()
    for alias in node.names:  # type: ignore[union-attr]
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            out.add(alias.asname.name.value)
        else:
            text = _dotted_text(alias.name)
            out.add(text.split(".", 1)[0])
    return out


def _dotted_text(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted_text(node.value)}.{node.attr.value}"
    return ""


def _pattern_names(pattern: cst.MatchPattern) -> set[str]:
    out: set[str] = set()
    stack: list[cst.CSTNode] = [pattern]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.MatchAs) and node.name is not None:
            out.add(node.name.value)
        if isinstance(node, cst.MatchStar) and node.name is not None:
            out.add(node.name.value)
        if isinstance(node, cst.MatchMapping) and node.rest is not None:
            out.add(node.rest.value)
        stack.extend(children(node))
    return out


def _irrefutable(pattern: cst.MatchPattern) -> bool:
    if isinstance(pattern, cst.MatchAs):
        return pattern.pattern is None or _irrefutable(pattern.pattern)
    if isinstance(pattern, cst.MatchOr):
        return any(_irrefutable(p.pattern) for p in pattern.patterns)
    return False


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    out = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            out.append(star)
    return out


def _comprehension_names(node: cst.CompFor) -> frozenset[str]:
    names: set[str] = set()
    current: cst.CompFor | None = node
    while current is not None:
        names |= _targets(current.target)
        current = current.inner_for_in
    return frozenset(names)


def _expressions_below(node: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    """The nearest expressions under a non-expression node (an argument, a slice, an element)."""
    if isinstance(node, cst.Arg):  # its keyword is no read of a name
        yield node.value
        return
    for child in children(node):
        if isinstance(child, cst.BaseExpression):
            yield child
        else:
            yield from _expressions_below(child)


class _Locals(FastVisitor):
    """Names the function binds anywhere (its locals), minus `global` / `nonlocal` ones."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.function = function
        self.bound: set[str] = set()
        self.declared: set[str] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if node is self.function:
            return True
        self.bound.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.bound.add(node.name.value)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.bound |= _targets(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.bound |= _targets(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.bound |= _targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self.bound |= _targets(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self.bound |= _targets(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.bound |= _targets(node.target)

    def visit_Del(self, node: cst.Del) -> None:
        self.bound |= _targets(node.target)

    def visit_Import(self, node: cst.Import) -> None:
        self.bound |= _imported(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.bound |= _imported(node)

    def visit_Global(self, node: cst.Global) -> None:
        self.declared |= {n.name.value for n in node.names}

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.declared |= {n.name.value for n in node.names}


def _locals(function: cst.FunctionDef) -> set[str]:
    visitor = _Locals(function)
    visitor.walk(function)
    return visitor.bound - visitor.declared


def _assigned_in(node: cst.CSTNode) -> set[str]:
    """Every name a loop may bind anywhere in it (its target, body and else)."""
    visitor = _Locals(cst.FunctionDef(cst.Name("_"), cst.Parameters(), cst.IndentedBlock([])))
    visitor.walk(node)
    return visitor.bound


def _position(function: cst.FunctionDef, node: cst.CSTNode) -> int:
    """A node's order in the function (its index in a pre-order walk)."""
    for index, current in enumerate(_preorder(function)):
        if current is node:
            return index
    return 0


def _preorder(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))
