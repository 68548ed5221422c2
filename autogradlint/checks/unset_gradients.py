"""AGL412: backward returns a gradient it assigned only on some paths.

`if ctx.needs_input_grad[1]: gw = g * x` followed by `return gx, gw` works while every input
requires grad and raises UnboundLocalError as soon as one does not (a frozen weight, semantics
D12.1). The fix sets the name to None at the top of backward: every path that did not raise
read a value assigned on it, so it is unchanged, and the paths that raised return None (FIX-D1).
That is right when the skipped assignment is guarded by `needs_input_grad` (the input needs no
gradient); for any other branch None is silently no gradient for an input that may need one
(D12.3), so the same fix is then in the unsafe tier.
"""

from __future__ import annotations

import ast
import textwrap

import libcst as cst

from ..analysis.flow import MethodFlow, analyse_method
from ..analysis.names import dotted
from ..analysis.unbound import UnboundRead, returns_bound, unbound_reads
from ..analysis.walk import FastVisitor
from ..edits import Edits, Fix
from ..preconditions import Unproven, verdict
from .base import Check
from .common import body_start
from .fix_proofs import introspects_locals
from .gates import function_gate
from .reads import Reads


class UnsetGradients(Check):
    """AGL412 on every Function backward and custom-op backward of the file, and on the
    project functions backward calls (one call deep)."""

    codes = ("AGL412",)
    gate = function_gate(custom_ops=True)
    reads = Reads(functions=True, custom_ops=True)

    def run(self) -> None:
        for info in self.ctx.contract().backward_classes():
            backward = info.methods.get("backward")
            if backward is not None:
                self.ctx.enter(info.node)
                self._check(info.name, backward)
                self._helpers(info.name, backward)
                self._misguarded(info.name, backward, self.ctx.flow(backward))
        for op in self.ctx.facts.custom_ops:
            if op.backward is not None:
                self.ctx.enter(op.subject)
                self._check(op.op, op.backward)
                self._helpers(op.op, op.backward)
                self._misguarded(op.op, op.backward, self.ctx.flow(op.backward))

    def _helpers(self, owner: str, backward: cst.FunctionDef) -> None:
        """The project functions backward calls (`_grads(ctx, g)`, `Fn._grads(ctx, g)`, one
        imported from another module), read from their file: a name one of them returns
        unset (the gradients it hands back) is reported at backward's call, and so is a
        gradient it computes under another input's test when backward returns what it
        returns (`return _grads(ctx, g)`)."""
        seen: set[tuple[str, int]] = set()
        flow = self.ctx.flow(backward)
        handed_back = {id(node.value) for node, _order in flow.returns}
        for site in flow.calls:
            written = dotted(site.node.func)
            if written is None or site.in_nested_def:
                continue
            found = self.ctx.summaries.function(written)
            if found is None or (found[0], found[1].lineno) in seen:
                continue
            seen.add((found[0], found[1].lineno))
            helper, reads = _helper(self.ctx.summaries.files.text(found[0]), found[1])
            if helper is None:
                continue
            for read in reads:
                self.report(
                    "AGL412",
                    site.node,
                    cls=owner,
                    name=read.name,
                    detail=f"{_when(read)} (in `{written}`, which backward calls)",
                )
            if id(site.node) in handed_back:
                # a flow of its own: the helper's tree is parsed here, not the file's
                helper_flow = analyse_method(helper, self.ctx.facts.imports)
                self._misguarded(owner, helper, helper_flow, site.node, written)

    def _check(self, owner: str, function: cst.FunctionDef) -> None:
        reads = unbound_reads(function)
        if not reads:
            return
        needs = _needs_names(self.ctx.flow(function))
        for read in reads:
            other = [text for text, _ in sorted(read.skipped) if not _mentions_needs(text, needs)]
            why = (
                f"`{other[0]}` decides it"
                if other
                else "no branch decides it"
                if not read.skipped
                else ""
            )
            self.report(
                "AGL412",
                read.node,
                fix=_none_first(function, read.name, why),
                cls=owner,
                name=read.name,
                detail=_when(read),
            )

    def _misguarded(
        self,
        owner: str,
        function: cst.FunctionDef,
        flow: MethodFlow,
        call: cst.Call | None = None,
        written: str = "",
    ) -> None:
        """A gradient returned for input j but computed only under `needs_input_grad[i]`, i
        another input (`grad_w` set under `if ctx.needs_input_grad[0]:`): None, silently, when
        input j requires grad and input i does not (semantics D12.3). `function` is backward,
        or the helper whose result backward returns (reported at `call`, backward's call)."""
        aliases = _needs_aliases(flow)
        for position, name, node in _returned(flow):
            indices = _guard_indices(function, name, aliases)
            if indices and position not in indices:
                shown = " or ".join(f"`ctx.needs_input_grad[{i}]`" for i in sorted(indices))
                where = f" (in `{written}`, which backward calls)" if call is not None else ""
                self.report(
                    "AGL412",
                    node if call is None else call,
                    cls=owner,
                    name=name,
                    detail=(
                        f"{shown} is false, yet it is input {position}'s gradient "
                        f"(None then){where}"
                    ),
                )


def _when(read: UnboundRead) -> str:
    """The branch decisions that leave it unset, as the message says them."""
    when = " and ".join(
        f"`{text}` is {'true' if value else 'false'}" for text, value in sorted(read.skipped)
    )
    return when or "a branch skips its assignment"


# Helpers read for a backward, by their `ast` node (kept in the entry, so no other node takes
# its id): the summaries hand out one node per function of a file, and the same helper serves
# many backwards of the file, and of the other files a worker lints that call it.
_HELPERS: dict[int, tuple[ast.FunctionDef, cst.FunctionDef | None, list[UnboundRead]]] = {}


def _helper(
    text: str, function: ast.FunctionDef
) -> tuple[cst.FunctionDef | None, list[UnboundRead]]:
    """A helper parsed alone, and the names it may return unset."""
    entry = _HELPERS.get(id(function))
    if entry is None or entry[0] is not function:
        if len(_HELPERS) >= 512:
            _HELPERS.clear()
        lines = text.splitlines(keepends=True)[function.lineno - 1 : function.end_lineno]
        source = textwrap.dedent("".join(lines))
        if "needs_input_grad" not in source and returns_bound(function):
            # Nothing to report: no name it returns can be unset, and no test of another
            # input's need guards one (_misguarded); neither parsed nor walked.
            helper, reads = None, []
        else:
            helper = _parsed(source)
            reads = unbound_reads(helper, returns_only=True) if helper is not None else []
        entry = _HELPERS[id(function)] = (function, helper, reads)
    return entry[1], entry[2]


def _parsed(source: str) -> cst.FunctionDef | None:
    """A function of a file, parsed on its own with libcst from its dedented lines."""
    try:
        module = cst.parse_module(source)
    except Exception:  # noqa: BLE001 - libcst raises bare exceptions on odd input
        return None
    first = module.body[0] if module.body else None
    return first if isinstance(first, cst.FunctionDef) else None


def _returned(flow: MethodFlow) -> list[tuple[int, str, cst.Name]]:
    """(position, name, node) of each name in a tuple that backward returns."""
    out: list[tuple[int, str, cst.Name]] = []
    for node, _order in flow.returns:
        value = node.value
        if isinstance(value, cst.Tuple):
            for position, element in enumerate(value.elements):
                if isinstance(element.value, cst.Name) and element.value.value != "None":
                    out.append((position, element.value.value, element.value))
    return out


def _needs_aliases(flow: MethodFlow) -> dict[str, int]:
    """`needs_x` -> 0 after `needs_x, needs_w = ctx.needs_input_grad` (or `= ...[:2]`), and
    `needs_x = ctx.needs_input_grad[0]`."""
    out: dict[str, int] = {}
    for name, definitions in flow.defs.items():
        if len(definitions) != 1:
            continue
        definition = definitions[0]
        value = definition.expression
        if value is None:
            continue
        if definition.kind == "unpack" and definition.index is not None and _reads_needs(value):
            if _is_needs(value) or (isinstance(value, cst.Subscript) and _is_needs(value.value)):
                out[name] = definition.index
        elif definition.kind == "assign":
            index = _needs_index(value, {})
            if index is not None:
                out[name] = index
    return out


def _is_needs(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value == "needs_input_grad"


def _needs_index(expr: cst.BaseExpression, aliases: dict[str, int]) -> int | None:
    """i for `ctx.needs_input_grad[i]` (a literal index) or a name bound to it."""
    if isinstance(expr, cst.Name):
        return aliases.get(expr.value)
    if isinstance(expr, cst.Subscript) and _is_needs(expr.value) and len(expr.slice) == 1:
        index = expr.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
            return int(index.value.value)
    return None


class _Guards(FastVisitor):
    """For each non-None assignment of a name: the needs_input_grad indices its enclosing
    `if` tests read (None for an assignment under no such test, or under another test)."""

    def __init__(self, root: cst.FunctionDef, name: str, aliases: dict[str, int]) -> None:
        self.root = root
        self.name = name
        self.aliases = aliases
        self.stack: list[set[int] | None] = []
        self.assignments: list[set[int] | None] = []

    def visit_If(self, node: cst.If) -> None:
        self.stack.append(_indices_in(node.test, self.aliases))

    def leave_If(self, original_node: cst.If) -> None:
        self.stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.root  # the method itself, not the functions nested in it

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == "None":
            return
        if any(self.name in _names(t.target) for t in node.targets):
            known = [s for s in self.stack if s is not None]
            self.assignments.append(set().union(*known) if known else None)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.name in _names(node.target):
            self.assignments.append(None)


def _indices_in(test: cst.BaseExpression, aliases: dict[str, int]) -> set[int] | None:
    """The needs_input_grad indices a test reads: `ctx.needs_input_grad[0]`, `needs_x`, and
    `not` / `and` / `or` of them; None when it reads anything else (or an index it cannot
    spell)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _indices_in(test.expression, aliases)
    if isinstance(test, cst.BooleanOperation):
        left, right = _indices_in(test.left, aliases), _indices_in(test.right, aliases)
        return None if left is None or right is None else left | right
    index = _needs_index(test, aliases)
    return {index} if index is not None else None


def _guard_indices(backward: cst.FunctionDef, name: str, aliases: dict[str, int]) -> set[int]:
    """The needs_input_grad indices that every non-None assignment of `name` sits under (empty
    when one sits under none, or under any other test)."""
    visitor = _Guards(backward, name, aliases)
    visitor.walk(backward)
    if not visitor.assignments or any(a is None for a in visitor.assignments):
        return set()
    return set().union(*(a for a in visitor.assignments if a is not None))


def _names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return (
            set().union(*(_names(e.value) for e in target.elements)) if target.elements else set()
        )
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return set()


def _needs_names(flow: MethodFlow) -> set[str]:
    """Locals bound from `ctx.needs_input_grad` (`needs_x, needs_w = ctx.needs_input_grad`)."""
    out: set[str] = set()
    for name, definitions in flow.defs.items():
        for definition in definitions:
            value = definition.expression
            if value is not None and _reads_needs(value):
                out.add(name)
    return out


def _reads_needs(expr: cst.CSTNode) -> bool:
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute) and node.attr.value == "needs_input_grad":
            return True
        stack.extend(node.children)
    return False


def _mentions_needs(text: str, needs: set[str]) -> bool:
    if "needs_input_grad" in text:
        return True
    words = set(text.replace("(", " ").replace(")", " ").replace("[", " ").split())
    return bool(words & needs)


def _none_first(backward: cst.FunctionDef, name: str, unguarded: str) -> Fix | None:
    """`name = None` as the first statement of backward (after its docstring); safe when no
    branch but a `needs_input_grad` test skips the assignment (`unguarded` says which does)
    and backward reads its variables only by name."""
    if not isinstance(backward.body, cst.IndentedBlock):
        return None
    block = backward.body
    index = body_start(block)

    def build(edits: Edits) -> None:
        def edit(updated: cst.IndentedBlock) -> cst.IndentedBlock:
            body = list(updated.body)
            statement = cst.parse_statement(f"{name} = None\n")
            if index < len(body):
                first = body[index]
                leading = getattr(first, "leading_lines", ())
                body[index] = first.with_changes(leading_lines=())
                statement = statement.with_changes(leading_lines=leading)
            body.insert(index, statement)
            return updated.with_changes(body=body)

        edits.blocks[id(block)] = edit

    introspected = introspects_locals(backward)
    safety, note = verdict(
        [
            Unproven("AGL412", "needs-input-grad-guard", unguarded) if unguarded else None,
            Unproven("AGL412", "locals-not-introspected", introspected) if introspected else None,
        ]
    )
    return Fix(safety, backward, build, f"set `{name}` to None at the top of backward", note)
