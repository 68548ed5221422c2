"""The one rewrite that stops a backward from writing into a buffer autograd shares: take a
private copy of the incoming gradient before anything else touches it.

`g = g.clone()` placed before the first statement that mentions `g` makes every later read,
view, alias and write of `g` go to the copy, whatever the control flow after it; the values
computed are bitwise those of the original on every path that did not raise (tests/differential).
Rewriting the write itself out of place is not equivalent: `g * x` promotes dtypes that
`g *= x` keeps, `zero_`/`fill_`/`copy_` have no such twin, and views taken earlier would keep
pointing at the old buffer.

A gradient can be None (the slot of a non-tensor output, or with `set_materialize_grads(False)`);
the copy is guarded by `if g is not None:` unless the statement it precedes already fails on
None (`g *= n`, `g.mul_(n)`, `v = g.view(-1)`, `g[i] = 0`).

The rebinding is invisible only to code that reads `g` by name: a backward that reads its own
variables through `locals()`, `vars()` or its frame would see the copy where it saw the original
(or the reverse), so there the fix is not safe (`locals-not-introspected`).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from ..analysis.control import mentions
from ..analysis.flow import MethodFlow
from ..edits import Edits, Fix
from ..preconditions import Unproven, verdict
from .common import body_start
from .fix_proofs import introspects_locals


def copy_gradient_first(
    method: cst.FunctionDef,
    flow: MethodFlow,
    param: str,
    *,
    dense: bool,
    title: str,
    rule_id: str,
    unproven: Sequence[Unproven | None] = (),
) -> Fix | None:
    """`param = param.clone()` (with `memory_format=torch.contiguous_format` when `dense`)
    before the first statement of the body that mentions `param`; None when `param` is not a
    plain gradient parameter or the body is a one-liner. Safe when `rule_id`'s preconditions
    hold: those the caller proved (`unproven` holds what it could not), and that the method
    never reads its locals other than by name."""
    if param not in flow.params[1:] or not isinstance(method.body, cst.IndentedBlock):
        return None
    block = method.body
    index = next(
        (i for i in range(body_start(block), len(block.body)) if mentions(block.body[i], param)),
        None,
    )
    if index is None:
        return None
    guarded = not _fails_on_none(block.body[index], param)

    def build(edits: Edits) -> None:
        keyword = f"memory_format={edits.torch_code('contiguous_format')}" if dense else ""
        copy = cst.parse_statement(f"{param} = {param}.clone({keyword})\n")
        if guarded:
            copy = cst.If(
                test=cst.parse_expression(f"{param} is not None"),
                body=cst.IndentedBlock(body=[copy], indent=edits.nested_indent(block)),
            )

        def edit(updated: cst.IndentedBlock) -> cst.IndentedBlock:
            body = list(updated.body)
            first = body[index]
            leading = getattr(first, "leading_lines", ())
            body[index] = first.with_changes(leading_lines=())
            body.insert(index, copy.with_changes(leading_lines=leading))
            return updated.with_changes(body=body)

        edits.blocks[id(block)] = edit

    introspected = introspects_locals(method)
    failures = [*unproven]
    if introspected is not None:
        failures.append(Unproven(rule_id, "locals-not-introspected", introspected))
    safety, note = verdict(failures)
    return Fix(safety, method, build, title, note)


def _fails_on_none(statement: cst.BaseStatement, name: str) -> bool:
    """Whether the first thing `statement` does with `name` raises when it is None."""
    if not isinstance(statement, cst.SimpleStatementLine) or not statement.body:
        return False
    first = statement.body[0]
    if isinstance(first, cst.AugAssign):
        return _is(first.target, name)
    if isinstance(first, cst.Expr):
        return _used_as_object(first.value, name)
    if isinstance(first, cst.Assign):
        if mentions(first.value, name):
            return _used_as_object(first.value, name)
        return any(
            isinstance(t.target, cst.Subscript) and _is(t.target.value, name) for t in first.targets
        )
    return False


def _used_as_object(expr: cst.BaseExpression, name: str) -> bool:
    """`name.attr`, `name[...]`, `name.view(-1).mul_(2)`: `name` is the head of a chain of
    attribute, subscript and call steps, evaluated first, and the first step fails on None."""
    stepped = False
    while isinstance(expr, (cst.Call, cst.Attribute, cst.Subscript)):
        if isinstance(expr, cst.Call):
            expr = expr.func
        else:
            expr, stepped = expr.value, True
    return stepped and _is(expr, name)


def _is(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name
