"""What a project helper does to the objects it is handed, read with `ast` and followed
HELPER_DEPTH calls deep: in-place writes (through views and aliases), ctx state destroyed,
tensors kept on ctx, `save_for_backward` calls, and a tuple packed from `*args`.

The contract checks read a Function's methods with libcst; a call into a module-level function
or a static method (of this file or another project file, found by `Summaries.function`) is
only a call to them. `effects_of_call` says what that call does to each argument it is given.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

import libcst as cst

from ..settings import HELPER_DEPTH
from ..text.ast_walk import ast_dotted
from .contract import ALIASING, METADATA_INPLACE
from .flow import CallSite
from .names import dotted
from .summaries import Summaries

VARARG = -1  # the slot of `*args`
# A conversion returns its receiver only when nothing changes (`.float()` on float32): in a
# helper the caller's dtype and device are unknown, and the usual use (`mask.to(t.dtype)` of a
# bool mask) copies, so a write after one is taken to write a copy.
_CONVERSIONS = frozenset(
    {"to", "type", "type_as", "float", "double", "half", "bfloat16", "cuda", "cpu"}
)
_VIEWS = ALIASING - _CONVERSIONS


@dataclass
class Effects:
    """Per parameter slot (its position; VARARG for `*args`) of one helper."""

    # the slot's tensor written in place -> the write's text; `method`: an in-place method
    # (`t.mul_()`, a tensor by itself) rather than `t[0] = v` / `t *= 2` (a list or int too)
    writes: dict[int, str] = field(default_factory=dict)
    method_writes: set[int] = field(default_factory=set)
    # the slot's object (ctx) loses state a second backward reads -> how (`del c.k`)
    consumes: dict[int, str] = field(default_factory=dict)
    # the slot's object (ctx) gets attributes holding these slots (`c.k = v`, `setattr(c, n,
    # v)`): (value slot, the attribute's name or the slot of the parameter naming it), every
    # one (`setattr(c, n, v); c.kept = v` keeps v under two names)
    keeps: dict[int, list[tuple[int, str | int]]] = field(default_factory=dict)
    # the slot's object (ctx): its `save_for_backward` calls (one in a loop counts as two)
    saves: dict[int, int] = field(default_factory=dict)
    # returns `tuple(args)` / `args` of its `*args`: as many values as it is given
    packs: bool = False


def effects_of_call(
    summaries: Summaries, written: str | None, path: str | None = None, depth: int = 0
) -> tuple[Effects, ast.FunctionDef] | None:
    """The effects of the project function `written` (a call's callee text) names, and its
    definition; None when it is not one (a tensor method, torch, a library)."""
    if written is None or depth >= HELPER_DEPTH:
        return None
    found = summaries.function(written, path)
    if found is None:
        return None
    file, function = found
    memo = _MEMO.setdefault(summaries, {})
    key = (file, function.lineno, depth)
    if key not in memo:
        memo[key] = Effects()  # a recursive helper ends here
        memo[key] = _Reader(summaries, file, function, depth).read()
    return memo[key], function


# Per Summaries (one per linted file): the same helper is read once.
_MEMO: WeakKeyDictionary[Summaries, dict[tuple[str, int, int], Effects]] = WeakKeyDictionary()


def slot_of(function: ast.FunctionDef, position: int | None, keyword: str | None) -> int | None:
    """The parameter slot an argument at `position` (or passed as `keyword`) binds."""
    names = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if keyword is not None:
        return names.index(keyword) if keyword in names else None
    if position is None:
        return None
    if position < len(names):
        return position
    return VARARG if function.args.vararg is not None else None


class _Reader:
    def __init__(
        self, summaries: Summaries, path: str, function: ast.FunctionDef, depth: int
    ) -> None:
        self.summaries = summaries
        self.path = path
        self.function = function
        self.depth = depth
        self.effects = Effects()
        names = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        self.alias: dict[str, int] = {name: slot for slot, name in enumerate(names)}
        if function.args.vararg is not None:
            self.vararg: str | None = function.args.vararg.arg
            self.alias[self.vararg] = VARARG
        else:
            self.vararg = None
        self.held: dict[str, int] = {}  # local -> slot whose attribute it holds (`c = ctx.k`)
        self.seen: set[tuple[int, str]] = set()  # (slot, attribute) read so far
        self.branches = 0  # inside an `if`: a handoff guarded by a flag may clear for good

    def read(self) -> Effects:
        self._block(self.function.body, loop=False)
        return self.effects

    # --- what an expression shares storage with ----------------------------------------------
    def root(self, expr: ast.expr) -> int | None:
        while True:
            if isinstance(expr, ast.Name):
                return self.alias.get(expr.id)
            if isinstance(expr, ast.Subscript):
                if _copying_index(expr.slice):
                    return None  # `t[[0, 1]]`: advanced indexing reads a copy (D5.4)
                expr = expr.value
            elif isinstance(expr, ast.Attribute) and expr.attr in _VIEWS:
                expr = expr.value
            elif (
                isinstance(expr, ast.Call)
                and isinstance(expr.func, ast.Attribute)
                and expr.func.attr in _VIEWS
            ):
                expr = expr.func.value
            else:
                return None

    def owner(self, expr: ast.expr) -> int | None:
        """The slot whose attribute `expr` is, or lies under (`c.k`, `c.k[0]`, `c.h.v`, a local
        bound to `c.k`)."""
        while isinstance(expr, (ast.Attribute, ast.Subscript)):
            inner = expr.value
            if isinstance(expr, ast.Attribute) and isinstance(inner, ast.Name):
                if inner.id in self.alias and self.alias[inner.id] != VARARG:
                    return self.alias[inner.id]
            expr = inner
        if isinstance(expr, ast.Name):
            return self.held.get(expr.id)
        return None

    # --- statements in order ----------------------------------------------------------------
    def _block(self, body: list[ast.stmt], loop: bool) -> None:
        for stmt in body:
            self._statement(stmt, loop)

    def _statement(self, stmt: ast.stmt, loop: bool) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # runs at another time, if ever
        self._calls(stmt, loop)
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self._assign(target, stmt.value, stmt)
        elif isinstance(stmt, ast.AugAssign):
            slot = self.root(stmt.target)
            if slot is not None:
                self.effects.writes.setdefault(slot, ast.unparse(stmt))
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                slot = None if isinstance(target, ast.Name) else self.owner(target)
                if slot is not None:
                    self.effects.consumes.setdefault(slot, ast.unparse(stmt))
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            self._return(stmt.value)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            slot = self.root(stmt.iter)
            if isinstance(stmt.target, ast.Name):
                if slot is not None:
                    self.alias[stmt.target.id] = slot  # an element (or a row) of it
                else:
                    self.alias.pop(stmt.target.id, None)
            self._block(stmt.body, loop=True)
            self._block(stmt.orelse, loop)
        elif isinstance(stmt, ast.While):
            self._block(stmt.body, loop=True)
            self._block(stmt.orelse, loop)
        elif isinstance(stmt, ast.If):
            self.branches += 1
            saves = self.effects.saves
            before = dict(saves)
            self._block(stmt.body, loop)
            taken = dict(saves)
            saves.clear()
            saves.update(before)
            self._block(stmt.orelse, loop)
            for ctx, count in taken.items():  # one branch or the other runs, not both
                saves[ctx] = max(saves.get(ctx, 0), count)
            self.branches -= 1
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self._block(stmt.body, loop)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse):
                self._block(block, loop)
            self._block(stmt.finalbody, loop)

    def _assign(self, target: ast.expr, value: ast.expr, stmt: ast.Assign) -> None:
        if isinstance(target, ast.Name):
            slot = self.root(value)
            if slot is not None:
                self.alias[target.id] = slot
            else:
                self.alias.pop(target.id, None)
            owner = self.owner(value) if isinstance(value, ast.Attribute) else None
            if owner is not None:
                self.held[target.id] = owner
            else:
                self.held.pop(target.id, None)
        elif isinstance(target, ast.Subscript):
            slot = self.root(target.value)
            if slot is not None:
                self.effects.writes.setdefault(slot, ast.unparse(stmt))
        elif isinstance(target, ast.Attribute) and target.attr == "data":
            # `tensor.data = t` (Megatron's safely_set_viewless_tensor_data): the caller's
            # tensor gets other memory, a write the version counter never hears of (D5.7)
            slot = self.root(target.value)
            if slot is not None:
                self.effects.writes.setdefault(slot, ast.unparse(stmt))
        elif isinstance(target, ast.Attribute):
            base = target.value
            direct = self.alias.get(base.id) if isinstance(base, ast.Name) else None  # `ctx.k = v`
            if direct is not None and direct != VARARG:
                kept = self.root(value)
                if kept is not None:
                    self.effects.keeps.setdefault(direct, []).append((kept, target.attr))
                if _is_none(value) and (direct, target.attr) in self.seen and not self.branches:
                    # `s = ctx.k; ctx.k = None`: a second backward reads None (D8.3)
                    self.effects.consumes.setdefault(direct, ast.unparse(stmt))
            elif _is_none(value):
                owner = self.owner(target)
                if owner is not None:  # `ctx.holder.value = None` (D8.2)
                    self.effects.consumes.setdefault(owner, ast.unparse(stmt))

    def _return(self, value: ast.expr) -> None:
        if self.vararg is None:
            return
        if isinstance(value, ast.Name) and value.id == self.vararg:
            self.effects.packs = True
        elif (
            isinstance(value, ast.Call)
            and ast_dotted(value.func) == "tuple"
            and len(value.args) == 1
            and isinstance(value.args[0], ast.Name)
            and value.args[0].id == self.vararg
        ):
            self.effects.packs = True

    # --- calls ------------------------------------------------------------------------------
    def _calls(self, stmt: ast.stmt, loop: bool) -> None:
        """The calls a statement makes itself (a compound statement's header only)."""
        for node in _own_nodes(stmt):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                slot = self.alias.get(node.value.id)
                if slot is not None:
                    self.seen.add((slot, node.attr))
            if isinstance(node, ast.Call):
                self._call(node, loop)

    def _call(self, call: ast.Call, loop: bool) -> None:
        func = call.func
        if isinstance(func, ast.Attribute):
            method = func.attr
            slot = self.root(func.value)
            if (
                slot is not None
                and method.endswith("_")
                and not method.endswith("__")
                and method not in METADATA_INPLACE
            ):
                self.effects.writes.setdefault(slot, ast.unparse(call))
                self.effects.method_writes.add(slot)
            owner = self.owner(func.value)
            # A bare `.pop()` takes from a stack a paired Function may refill (AGL408's rule)
            consumes = (method == "pop" and call.args) or method in ("popitem", "clear")
            if owner is not None and consumes:
                self.effects.consumes.setdefault(owner, ast.unparse(call))
            if method == "save_for_backward" and isinstance(func.value, ast.Name):
                ctx = self.alias.get(func.value.id)
                if ctx is not None and ctx != VARARG:
                    saves = self.effects.saves
                    saves[ctx] = saves.get(ctx, 0) + (2 if loop else 1)
        elif isinstance(func, ast.Name) and func.id == "setattr" and len(call.args) == 3:
            owner = self.root(call.args[0])
            kept = self.root(call.args[2])
            if owner is not None and owner != VARARG and kept is not None:
                self.effects.keeps.setdefault(owner, []).append((kept, self._name(call.args[1])))
        self._deeper(call, loop)

    def _name(self, expr: ast.expr) -> str | int:
        """An attribute name `setattr` is given: a string, or the parameter slot holding it."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        if isinstance(expr, ast.Name) and expr.id in self.alias:
            return self.alias[expr.id]
        return "?"

    def _deeper(self, call: ast.Call, loop: bool) -> None:
        """A call into another project function: its effects on what this one hands it."""
        if any(isinstance(a, ast.Starred) for a in call.args):
            return
        given = [(i, None, a) for i, a in enumerate(call.args)] + [
            (None, k.arg, k.value) for k in call.keywords if k.arg is not None
        ]
        mine = {(i, k): self.root(a) for i, k, a in given}
        if all(slot is None for slot in mine.values()):
            return
        found = effects_of_call(self.summaries, ast_dotted(call.func), self.path, self.depth + 1)
        if found is None:
            return
        inner, function = found
        at = {
            slot_of(function, i, k): outer
            for (i, k), outer in mine.items()
            if outer is not None and slot_of(function, i, k) is not None
        }
        names: dict[int, str | int] = {}  # their slot -> the attribute name it is given
        for i, k, arg in given:
            slot = slot_of(function, i, k)
            if slot is not None:
                names[slot] = self._name(arg)
        own = self.effects
        for theirs, outer in at.items():
            assert theirs is not None
            if theirs in inner.writes:
                own.writes.setdefault(outer, inner.writes[theirs])
                if theirs in inner.method_writes:
                    own.method_writes.add(outer)
            if theirs in inner.consumes:
                own.consumes.setdefault(outer, inner.consumes[theirs])
            if theirs in inner.saves:
                count = inner.saves[theirs] * (2 if loop else 1)
                own.saves[outer] = own.saves.get(outer, 0) + count
            for kept, attr in inner.keeps.get(theirs, []):
                if kept in at:
                    if isinstance(attr, int):  # named by what this one hands that slot
                        attr = names.get(attr, "?")
                    own.keeps.setdefault(outer, []).append((at[kept], attr))


def _copying_index(index: ast.expr) -> bool:
    """An index that makes a read copy: a list (`[0, 1]`, a comprehension), alone or among
    others (`t[:, [0, 1]]`)."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return any(isinstance(part, (ast.List, ast.ListComp)) for part in parts)


def _own_nodes(stmt: ast.stmt) -> list[ast.AST]:
    """The nodes of a statement outside its nested blocks and nested scopes."""
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        roots: list[ast.AST] = [stmt.iter]
    elif isinstance(stmt, (ast.While, ast.If)):
        roots = [stmt.test]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        roots = [item.context_expr for item in stmt.items]
    elif isinstance(stmt, ast.Try):
        roots = []
    elif isinstance(stmt, ast.Assign):
        # an attribute assigned is not read (`ctx.k = None`); what it hangs on is
        roots = [stmt.value]
        roots += [t.value if isinstance(t, ast.Attribute) else t for t in stmt.targets]
    else:
        roots = [stmt]
    out: list[ast.AST] = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                stack.append(child)
    return sorted(out, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def _is_none(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


def helper_calls(
    summaries: Summaries, calls: list[CallSite], path: str | None = None
) -> Iterator[tuple[CallSite, Effects, list[tuple[int, cst.BaseExpression]]]]:
    """A method's own calls into project helpers: each with the helper's effects and the
    arguments with the slot each binds (every argument `*args` takes binds VARARG). `path`:
    the file the method is defined in, when it is another than the one linted."""
    for site in calls:
        call = site.node
        if site.in_nested_def or any(arg.star for arg in call.args):
            continue
        found = effects_of_call(summaries, dotted(call.func), path)
        if found is None:
            continue
        effects, function = found
        bound: list[tuple[int, cst.BaseExpression]] = []
        for position, arg in enumerate(call.args):
            keyword = arg.keyword.value if arg.keyword is not None else None
            slot = slot_of(function, None if keyword else position, keyword)
            if slot is not None:
                bound.append((slot, arg.value))
        yield site, effects, bound
