"""Fix builders for family A, from the semantics' proven rewrites (FIX-A1..A4)."""

from __future__ import annotations

import libcst as cst

from ..analysis.flow import DEFAULT, DISABLE, CallSite, MethodFlow, grad_mode_of
from ..analysis.names import ImportTable
from ..analysis.provenance import EXTERNAL, Provenance
from ..analysis.walk import FastVisitor, names_in
from ..fixes import Edits, Fix
from .common import (
    body_start,
    expression_statement,
    keyword,
    positional,
    statement_in_block,
    with_leading_lines_moved,
)

_EMPTY = cst.Module([])


def _code(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def wrap_in_enable_grad(
    method: cst.FunctionDef,
    flow: MethodFlow,
    provenance: Provenance,
    site: CallSite,
    outputs: cst.BaseExpression,
) -> Fix | None:
    """FIX-A1: wrap the statements that build `outputs`, and the call, in enable_grad."""
    located = statement_in_block(method, site.node)
    if located is None:
        return None
    block, last = located
    first = last
    pending = [(outputs, site.order)]
    seen: set[int] = set()
    while pending:
        expr, order = pending.pop()
        for name in names_in(expr):
            definition = flow.definition_before(name, order)
            if definition is None or definition.value is None or id(definition) in seen:
                continue
            seen.add(id(definition))
            if definition.mode != DEFAULT or definition.node is None:
                continue
            value = definition.value
            if provenance.producers(value, definition.order, definition.mode) <= {EXTERNAL}:
                continue  # unpacking ctx.saved_tensors etc.: nothing is computed there
            where = statement_in_block(method, definition.node)
            if where is None or where[0] is not block:
                return None  # the computation spans blocks: not a mechanical rewrite
            first = min(first, where[1])
            pending.append((value, definition.order))

    def build(edits: Edits) -> None:
        def edit(updated: cst.IndentedBlock) -> cst.IndentedBlock:
            body = list(updated.body)
            inner, leading = with_leading_lines_moved(body[first : last + 1])
            wrapper = cst.With(
                items=[cst.WithItem(cst.Call(edits.torch("enable_grad")))],
                body=cst.IndentedBlock(body=inner),
                leading_lines=leading,
            )
            return updated.with_changes(body=[*body[:first], wrapper, *body[last + 1 :]])

        edits.blocks[id(block)] = edit

    return Fix("safe", method, build, "wrap the recomputation in `with torch.enable_grad():`")


def no_grad_to_enable_grad(
    method: cst.FunctionDef,
    flow: MethodFlow,
    imports: ImportTable,
    outputs: cst.BaseExpression,
    order: int,
) -> Fix | None:
    """FIX-A2: the `no_grad()` around the recomputation becomes `enable_grad()`."""
    targets = [
        d.node
        for name in names_in(outputs)
        if (d := flow.definition_before(name, order)) is not None
        and d.mode == DISABLE
        and d.node is not None
    ]
    if not targets:
        return None
    item = _disabling_item(method, targets[0], imports)
    if item is None:
        return None  # e.g. @once_differentiable: removing it is not a mechanical fix

    def build(edits: Edits) -> None:
        edits.nodes[id(item.item)] = lambda _node: cst.Call(edits.torch("enable_grad"))

    return Fix("safe", method, build, "replace `torch.no_grad()` by `torch.enable_grad()`")


def _disabling_item(
    method: cst.FunctionDef, target: cst.CSTNode, imports: ImportTable
) -> cst.WithItem | None:
    found: list[cst.WithItem] = []

    class _Find(FastVisitor):
        def __init__(self) -> None:
            self.stack: list[cst.WithItem] = []

        def visit_With(self, node: cst.With) -> None:
            items = [i for i in node.items if grad_mode_of(i.item, imports) is not None]
            self.stack.append(items[-1] if items else None)  # type: ignore[arg-type]

        def leave_With(self, original_node: cst.With) -> None:
            self.stack.pop()

        def on_visit(self, node: cst.CSTNode) -> bool:
            if node is target:
                for item in reversed(self.stack):
                    if item is not None:
                        if grad_mode_of(item.item, imports) == DISABLE:
                            found.append(item)
                        break
                return False
            return True

    _Find().walk(method)
    return found[0] if found else None


def backward_to_autograd_grad(
    method: cst.FunctionDef, flow: MethodFlow, site: CallSite, root: cst.BaseExpression
) -> Fix | None:
    """FIX-A3 (unsafe): `y.backward(g); return x.grad` becomes `torch.autograd.grad`."""
    located = expression_statement(method, site.node)
    if located is None:
        return None
    block, index, _expr = located
    stmt = block.body[index]
    call = site.node
    if keyword(call, "inputs") is not None:
        return None
    if (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "backward"
        and (root is call.func.value)
    ):
        grad = positional(call, 0, "gradient")
    else:
        grad = positional(call, 1, "grad_tensors")
    later = [ret for ret, order in flow.returns if order > site.order]
    if not later or later[0].value is None:
        return None
    ret = later[0]
    grads: list[cst.Attribute] = []

    class _Grads(FastVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            if node.attr.value == "grad" and isinstance(node.value, cst.Name):
                grads.append(node)

        def visit_CompFor(self, node: cst.CompFor) -> bool:
            return False

    _Grads().walk(ret.value)
    inputs: list[str] = []
    for attr in grads:
        assert isinstance(attr.value, cst.Name)
        if attr.value.value not in inputs:
            inputs.append(attr.value.value)
    if not inputs or _code(ret.value).count(".grad") != len(grads):
        return None  # `.grad` used in ways we cannot map (comprehensions, calls)
    names = {x: _fresh(f"{x}_grad", flow) for x in inputs}
    extra = [
        f", {arg.keyword.value}={_code(arg.value)}"
        for arg in call.args
        if arg.keyword is not None and arg.keyword.value in ("retain_graph", "create_graph")
    ]

    def build(edits: Edits) -> None:
        edits.needs_torch = True
        targets = ", ".join(names[x] for x in inputs)
        code = (
            f"({targets},) = {edits.torch_name}.autograd.grad({_code(root)}, "
            f"({', '.join(inputs)},), {_code(grad) if grad is not None else 'None'}, "
            f"allow_unused=True{''.join(extra)})\n"
        )
        new_stmt = cst.parse_statement(code).with_changes(leading_lines=stmt.leading_lines)

        def edit(updated: cst.IndentedBlock) -> cst.IndentedBlock:
            body = list(updated.body)
            body[index] = new_stmt
            return updated.with_changes(body=body)

        edits.blocks[id(block)] = edit
        for attr in grads:
            assert isinstance(attr.value, cst.Name)
            edits.nodes[id(attr)] = lambda _node, n=names[attr.value.value]: cst.Name(n)

    return Fix("unsafe", method, build, "return gradients from `torch.autograd.grad`")


def forward_create_graph(method: cst.FunctionDef, flow: MethodFlow, call: cst.Call) -> Fix | None:
    """FIX-A4 (unsafe): capture `torch.is_grad_enabled()` on entry and pass it as create_graph."""
    existing = flow.defs.get("create_graph", [])
    if any(
        d.kind != "param" and "is_grad_enabled" not in _code(d.value or cst.Name("x"))
        for d in existing
    ):
        return None
    if not isinstance(method.body, cst.IndentedBlock):
        return None
    block = method.body
    needs_capture = not existing

    def build(edits: Edits) -> None:
        def edit_call(updated: cst.CSTNode) -> cst.CSTNode:
            assert isinstance(updated, cst.Call)
            args = [
                a for a in updated.args if not (a.keyword and a.keyword.value == "create_graph")
            ]
            if args:
                args[-1] = args[-1].with_changes(
                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                )
            new_arg = cst.Arg(
                keyword=cst.Name("create_graph"),
                value=cst.Name("create_graph"),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
            )
            return updated.with_changes(args=[*args, new_arg])

        edits.nodes[id(call)] = edit_call
        if needs_capture:
            capture = cst.parse_statement(f"create_graph = {edits.torch_name}.is_grad_enabled()\n")
            edits.needs_torch = True

            def edit_block(updated: cst.IndentedBlock) -> cst.IndentedBlock:
                body = list(updated.body)
                at = body_start(updated)
                return updated.with_changes(body=[*body[:at], capture, *body[at:]])

            edits.blocks[id(block)] = edit_block

    return Fix("unsafe", method, build, "forward `create_graph=torch.is_grad_enabled()`")


def _fresh(name: str, flow: MethodFlow) -> str:
    candidate, n = name, 2
    while candidate in flow.defs:
        candidate, n = f"{name}{n}", n + 1
    return candidate
