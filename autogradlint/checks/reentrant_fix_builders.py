"""Fix builders for family A, from the semantics' proven rewrites (FIX-A1..A4)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import libcst as cst

from ..analysis.control import (
    always_evaluated,
    catches_between,
    may_leave_early,
    mentions,
    path_to,
)
from ..analysis.flow import DEFAULT, DISABLE, CallSite, MethodFlow, grad_mode_of
from ..analysis.names import ImportTable, dotted
from ..analysis.provenance import EXTERNAL, Provenance
from ..analysis.source_text import code_of
from ..analysis.walk import FastVisitor, names_in
from ..edits import Edits, Fix
from ..preconditions import Unproven, verdict
from .common import (
    body_start,
    expression_statement,
    keyword,
    positional,
    statement_in_block,
    with_leading_lines_moved,
)


class GradCall(NamedTuple):
    """A `torch.autograd.grad` call in a backward, with what its fixes read of the method."""

    method: cst.FunctionDef
    flow: MethodFlow
    provenance: Provenance
    site: CallSite
    outputs: cst.BaseExpression


def _code(node: cst.CSTNode) -> str:
    return code_of(node)


# Why a rewrite of the grad mode is safe only under conditions: it changes the mode for every
# statement it covers, and an in-place update of a leaf parameter in there starts to raise under
# enable_grad. The rewrite is equivalent when every path that enters the covered statements
# reaches the `autograd.grad` call (`reaches-call`), that call certainly raises in the original
# (its input has no graph: `graphless`), and nothing catches the error (`nothing-catches`: in
# the method, the decorators of backward, or a direct caller): then the only paths that change
# are ones that raised. rules/AGL101.yaml and AGL102.yaml state them; the check proves the
# ones outside the method (decorators, callers, torch's spelling) and hands them in as `outside`.


def _reaches_call(
    rule_id: str,
    method: cst.FunctionDef,
    block: cst.IndentedBlock,
    first: int,
    last: int,
    call: cst.Call,
    grad_withs: set[int],
) -> Unproven | None:
    """Why entering block.body[first] does not surely end in `call` raising out of the method
    (None when it does)."""
    if not always_evaluated(block.body[last], call):
        return Unproven(
            rule_id,
            "reaches-call",
            "the call is conditional (inside if/for/try, a conditional expression or a lambda)",
        )
    if may_leave_early(list(block.body[first:last])):
        return Unproven(rule_id, "reaches-call", "a return, break or continue can skip the call")
    if catches_between(method, block.body[last], grad_withs):
        return Unproven(
            rule_id, "nothing-catches", "a try or a context manager around it can swallow its error"
        )
    return None


def _grad_withs(method: cst.FunctionDef, imports: ImportTable) -> set[int]:
    """`with` statements that only set the grad mode (they never suppress an exception)."""
    found: set[int] = set()

    class _Find(FastVisitor):
        def visit_With(self, node: cst.With) -> None:
            if all(grad_mode_of(item.item, imports) is not None for item in node.items):
                found.add(id(node))

    _Find().walk(method)
    return found


def wrap_in_enable_grad(call: GradCall, outside: Sequence[Unproven] = ()) -> Fix | None:
    """FIX-A1: wrap the statements that build `outputs`, and the call, in enable_grad."""
    method, flow, provenance, site, outputs = call
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
            value = definition.expression
            if value is None:  # `y += ...` computes in place: nothing to wrap
                continue
            if provenance.producers(value, definition.order, definition.mode) <= {EXTERNAL}:
                continue  # unpacking ctx.saved_tensors etc.: nothing is computed there
            where = statement_in_block(method, definition.node)
            if where is None or where[0] is not block:
                return None  # the computation spans blocks: not a mechanical rewrite
            first = min(first, where[1])
            pending.append((value, definition.order))
    why: Unproven | None = None
    if not provenance.graphless(outputs, site.order):
        why = Unproven("AGL101", "graphless", _CARRIES_GRAPH)
    else:
        why = _reaches_call(
            "AGL101", method, block, first, last, site.node, _grad_withs(method, provenance.imports)
        )

    def build(edits: Edits) -> None:
        enable = cst.Call(edits.torch("enable_grad"))
        indent = edits.nested_indent(block)

        def edit(updated: cst.IndentedBlock) -> cst.IndentedBlock:
            body = list(updated.body)
            inner, leading = with_leading_lines_moved(body[first : last + 1])
            wrapper = cst.With(
                items=[cst.WithItem(enable)],
                body=cst.IndentedBlock(body=inner, indent=indent),
                leading_lines=leading,
            )
            return updated.with_changes(body=[*body[:first], wrapper, *body[last + 1 :]])

        edits.blocks[id(block)] = edit

    return _grad_mode_fix(
        method, build, "wrap the recomputation in `with torch.enable_grad():`", [why, *outside]
    )


_CARRIES_GRAPH = (
    "the differentiated value may carry a graph of its own (a helper, a leaf, a factory)"
)


def _grad_mode_fix(
    method: cst.FunctionDef,
    build: Callable[[Edits], None],
    title: str,
    failures: Sequence[Unproven | None],
) -> Fix:
    """Safe when every precondition was proven; else the same rewrite, unsafe, with a note
    naming each that was not."""
    safety, note = verdict(failures)
    return Fix(safety, method, build, title, note)


def no_grad_to_enable_grad(call: GradCall, outside: Sequence[Unproven] = ()) -> Fix | None:
    """FIX-A2: the `no_grad()` around the recomputation becomes `enable_grad()`."""
    method, flow, provenance, site, outputs = call
    imports = provenance.imports
    targets = [
        d.node
        for name in names_in(outputs)
        if (d := flow.definition_before(name, site.order)) is not None
        and d.mode == DISABLE
        and d.node is not None
    ]
    if not targets:
        return None
    found = _disabling_with(method, targets[0], imports)
    if found is None:
        return None  # e.g. @once_differentiable: removing it is not a mechanical fix
    with_node, item = found
    why = _no_grad_unproven(method, flow, provenance, site, outputs, with_node)

    def build(edits: Edits) -> None:
        enable = cst.Call(edits.torch("enable_grad"))
        edits.nodes[id(item.item)] = lambda _node: enable

    return _grad_mode_fix(
        method, build, "replace `torch.no_grad()` by `torch.enable_grad()`", [why, *outside]
    )


def _no_grad_unproven(
    method: cst.FunctionDef,
    flow: MethodFlow,
    provenance: Provenance,
    site: CallSite,
    outputs: cst.BaseExpression,
    with_node: cst.With,
) -> Unproven | None:
    """Why turning `with_node` into enable_grad may change a path that did not raise."""
    rule = "AGL102"
    if provenance.producers(outputs, site.order, site.mode) != {DISABLE}:
        return Unproven(
            rule, "graphless", "the differentiated value is not always computed under no_grad"
        )
    if not provenance.graphless(outputs, site.order):
        return Unproven(rule, "graphless", _CARRIES_GRAPH)
    if len(with_node.items) != 1 or with_node.asynchronous is not None:
        return Unproven(
            rule, "reaches-call", "the `with` statement also enters other context managers"
        )
    located = statement_in_block(method, site.node)
    if located is None:
        return Unproven(rule, "reaches-call", "the call is not in a block")
    block, last = located
    grad_withs = _grad_withs(method, provenance.imports)
    if block is with_node.body:
        return _reaches_call(rule, method, block, 0, last, site.node, grad_withs)
    # The with and the call's statement side by side: the with must fall through to the call.
    first = next((i for i, stmt in enumerate(block.body) if stmt is with_node), None)
    if first is None or first >= last:
        return Unproven(
            rule, "reaches-call", "the call is not after the `with` block in the same block"
        )
    if isinstance(with_node.body, cst.IndentedBlock) and may_leave_early(list(with_node.body.body)):
        return Unproven(
            rule,
            "reaches-call",
            "a return, break or continue in the `with` block can skip the call",
        )
    return _reaches_call(rule, method, block, first + 1, last, site.node, grad_withs) or (
        Unproven(
            rule, "nothing-catches", "a try or a context manager around it can swallow its error"
        )
        if catches_between(method, with_node, grad_withs)
        else None
    )


def _disabling_with(
    method: cst.FunctionDef, target: cst.CSTNode, imports: ImportTable
) -> tuple[cst.With, cst.WithItem] | None:
    """The innermost grad-mode `with` around `target`, when it is a disabling one."""
    found: list[tuple[cst.With, cst.WithItem]] = []

    class _Find(FastVisitor):
        def __init__(self) -> None:
            self.stack: list[tuple[cst.With, cst.WithItem] | None] = []

        def visit_With(self, node: cst.With) -> None:
            items = [i for i in node.items if grad_mode_of(i.item, imports) is not None]
            self.stack.append((node, items[-1]) if items else None)

        def leave_With(self, original_node: cst.With) -> None:
            self.stack.pop()

        def on_visit(self, node: cst.CSTNode) -> bool:
            if node is target:
                for entry in reversed(self.stack):
                    if entry is not None:
                        if grad_mode_of(entry[1].item, imports) == DISABLE:
                            found.append(entry)
                        break
                return False
            return True

    _Find().walk(method)
    return found[0] if found else None


def backward_to_autograd_grad(
    method: cst.FunctionDef, flow: MethodFlow, site: CallSite, root: cst.BaseExpression
) -> Fix | None:
    """FIX-A3 (unsafe): `y.backward(g); return x.grad` becomes `torch.autograd.grad`.

    Offered only where the mapping is exact: the call is the method's only `.backward()`, the
    `return` that reads `x.grad` follows it in the same block (not after an `if` that may not
    have run it, nor after a loop that ran it several times), and nothing else reads `x.grad`."""
    located = expression_statement(method, site.node)
    if located is None:
        return None
    block, index, _expr = located
    stmt = block.body[index]
    assert isinstance(stmt, cst.SimpleStatementLine)  # expression_statement found one
    call = site.node
    if keyword(call, "inputs") is not None:
        return None
    if sum(1 for other in flow.calls if _is_backward_call(other.node)) != 1:
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
    if not later:
        return None
    ret = later[0]
    returned = ret.value
    if returned is None:
        return None
    if not _runs_once_before(method, stmt, ret):
        return None  # an if, loop or try between them: x.grad may hold 0 or n backward passes
    grads: list[cst.Attribute] = []

    class _Grads(FastVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            if node.attr.value == "grad" and isinstance(node.value, cst.Name):
                grads.append(node)

        def visit_CompFor(self, node: cst.CompFor) -> bool:
            return False

    _Grads().walk(returned)
    inputs: list[str] = []
    for attr in grads:
        assert isinstance(attr.value, cst.Name)
        if attr.value.value not in inputs:
            inputs.append(attr.value.value)
    if not inputs or _code(returned).count(".grad") != len(grads):
        return None  # `.grad` used in ways we cannot map (comprehensions, calls)
    reads = sum(
        1
        for node in flow.attribute_reads
        if node.attr.value == "grad"
        and isinstance(node.value, cst.Name)
        and node.value.value in inputs
    )
    if reads != len(grads):
        return None  # `x.grad` is read elsewhere too: it would be None after the rewrite
    names = {x: _fresh(f"{x}_grad", method) for x in inputs}
    extra = [
        f", {arg.keyword.value}={_code(arg.value)}"
        for arg in call.args
        if arg.keyword is not None and arg.keyword.value in ("retain_graph", "create_graph")
    ]

    def build(edits: Edits) -> None:
        targets = ", ".join(names[x] for x in inputs)
        code = (
            f"({targets},) = {edits.torch_code('autograd', 'grad')}({_code(root)}, "
            f"({', '.join(inputs)},), {_code(grad) if grad is not None else 'None'}, "
            f"allow_unused=True{''.join(extra)})\n"
        )
        new_stmt = cst.parse_statement(code).with_changes(
            leading_lines=stmt.leading_lines, trailing_whitespace=stmt.trailing_whitespace
        )

        def edit(updated: cst.IndentedBlock) -> cst.IndentedBlock:
            body = list(updated.body)
            body[index] = new_stmt
            return updated.with_changes(body=body)

        edits.blocks[id(block)] = edit
        for attr in grads:
            assert isinstance(attr.value, cst.Name)
            edits.nodes[id(attr)] = _replace_with_name(names[attr.value.value])

    return Fix("unsafe", method, build, "return gradients from `torch.autograd.grad`")


def _runs_once_before(method: cst.FunctionDef, stmt: cst.BaseStatement, ret: cst.Return) -> bool:
    """Whether every path reaching `ret` ran `stmt` exactly once: `ret` follows `stmt` in the
    same block, or follows a `with` (whose body runs once) that holds `stmt`."""
    ret_at = statement_in_block(method, ret)
    call_path = path_to(method.body, stmt)
    if ret_at is None or call_path is None:
        return False
    block, position = ret_at
    at = next((i for i, node in enumerate(call_path) if node is block), None)
    if at is None:
        return False
    below = call_path[at + 1 :]
    holder = below[0]  # the statement of `block` that holds the call
    index = next((i for i, s in enumerate(block.body) if s is holder), None)
    if index is None or index >= position:
        return False
    compound = [n for n in below[:-1] if isinstance(n, cst.BaseCompoundStatement)]
    return all(isinstance(n, cst.With) for n in compound)


def _is_backward_call(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "backward":
        return True
    return (dotted(func) or "").endswith("autograd.backward")


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
            args = list(updated.args)
            value = cst.Name("create_graph")
            for position, arg in enumerate(args):
                if arg.keyword is not None and arg.keyword.value == "create_graph":
                    # Replace the value only: the argument's comma and any comment after it
                    # (`# type: ignore`) stay where they are.
                    args[position] = arg.with_changes(value=value)
                    return updated.with_changes(args=args)
            new_arg = cst.Arg(
                keyword=cst.Name("create_graph"),
                value=value,
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
            )
            if args:
                last = args[-1]
                if isinstance(last.comma, cst.Comma):
                    # A trailing comma, maybe followed by a comment and a line break: the new
                    # argument takes that comma's place and whitespace, the old one gets `, `.
                    new_arg = new_arg.with_changes(comma=last.comma)
                args[-1] = last.with_changes(
                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                )
            return updated.with_changes(args=[*args, new_arg])

        edits.nodes[id(call)] = edit_call
        if needs_capture:
            capture = cst.parse_statement(
                f"create_graph = {edits.torch_code('is_grad_enabled')}()\n"
            )

            def edit_block(updated: cst.IndentedBlock) -> cst.IndentedBlock:
                body = list(updated.body)
                at = body_start(updated)
                return updated.with_changes(body=[*body[:at], capture, *body[at:]])

            edits.blocks[id(block)] = edit_block

    return Fix("unsafe", method, build, "forward `create_graph=torch.is_grad_enabled()`")


def _fresh(name: str, method: cst.FunctionDef) -> str:
    """`name`, or `name2`, ...: the first that the method does not mention at all."""
    candidate, n = name, 2
    while mentions(method, candidate):
        candidate, n = f"{name}{n}", n + 1
    return candidate


def _replace_with_name(name: str) -> Callable[[cst.CSTNode], cst.CSTNode]:
    """An expression edit that puts the name `name` where the node was."""

    def edit(_node: cst.CSTNode) -> cst.CSTNode:
        return cst.Name(name)

    return edit
