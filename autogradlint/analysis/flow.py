"""One ordered pass over a method body: grad-mode regions, local definitions, calls, returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .names import ImportTable, dotted
from .walk import FastVisitor

# Grad mode in effect at a point of a backward body. "default" is the engine's own setting:
# off in ordinary training, on under create_graph=True (semantics A1.1).
DEFAULT, ENABLE, DISABLE, UNKNOWN = "default", "enable", "disable", "unknown"


def grad_mode_of(expr: cst.BaseExpression, imports: ImportTable) -> str | None:
    """The grad mode a context manager or decorator sets, or None if it is not a grad-mode one."""
    call_args: tuple[cst.Arg, ...] = ()
    if isinstance(expr, cst.Call):
        call_args = tuple(expr.args)
        expr = expr.func
    name = imports.resolve(expr) or ""
    if not name.startswith("torch."):
        return None
    last = name.rsplit(".", 1)[-1]
    if last == "enable_grad":
        return ENABLE
    if last in ("no_grad", "inference_mode"):
        if last == "inference_mode" and call_args and _is_false(call_args[0].value):
            return None
        return DISABLE
    if last == "set_grad_enabled" and call_args:
        value = call_args[0].value
        if isinstance(value, cst.Name) and value.value in ("True", "False"):
            return ENABLE if value.value == "True" else DISABLE
        return UNKNOWN
    return None


def _is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


@dataclass(frozen=True)
class Definition:
    """`name = value` (or one element of an unpacking, or a loop target) at a point of the body."""

    name: str
    # None for parameters; the statement itself for an augmented assignment (`g *= 2`)
    value: cst.BaseExpression | cst.AugAssign | None
    order: int
    mode: str
    index: int | None = None  # position in a tuple unpacking; -1 for a starred target
    kind: str = "assign"  # assign | unpack | loop | param | augassign | with
    node: cst.CSTNode | None = None

    @property
    def expression(self) -> cst.BaseExpression | None:
        """The value as an expression: None for a parameter and an augmented assignment."""
        return self.value if isinstance(self.value, cst.BaseExpression) else None


@dataclass(frozen=True)
class CallSite:
    node: cst.Call
    order: int
    mode: str
    discarded: bool  # the call is a whole expression statement: its result is dropped
    in_nested_def: bool


@dataclass
class MethodFlow:
    """What happened in one method body, in source order."""

    function: cst.FunctionDef
    params: list[str]
    vararg: str | None
    defs: dict[str, list[Definition]] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    returns: list[tuple[cst.Return, int]] = field(default_factory=list)
    base_mode: str = DEFAULT
    # Statements that can mutate, in source order, outside nested functions (for the contract
    # checks), and `name.attr` reads (tensor evidence): recorded by the same single pass.
    statements: list[tuple[cst.CSTNode, int]] = field(default_factory=list)
    attribute_reads: list[cst.Attribute] = field(default_factory=list)
    read_orders: dict[int, int] = field(default_factory=dict)  # id(read) -> order there

    def binds_param_at(self, name: str, order: int) -> bool:
        """Whether `name` is still the parameter at `order` (nothing rebound it before)."""
        definition = self.definition_before(name, order + 1)
        return definition is not None and definition.kind == "param"

    def definition_before(self, name: str, order: int) -> Definition | None:
        """The last definition of `name` lexically before `order` (None if there is none)."""
        best: Definition | None = None
        for definition in self.defs.get(name, ()):
            if definition.order < order and (best is None or definition.order > best.order):
                best = definition
        return best


class _FlowVisitor(FastVisitor):
    def __init__(self, flow: MethodFlow, imports: ImportTable) -> None:
        self.flow = flow
        self.imports = imports
        self.order = 0
        self.modes: list[str] = [flow.base_mode]
        self.nested = 0
        self.discarded: set[int] = set()

    def _tick(self) -> int:
        self.order += 1
        return self.order

    def _define(
        self,
        target: cst.BaseExpression,
        value: cst.BaseExpression | cst.AugAssign | None,
        kind: str,
        node: cst.CSTNode,
        index: int | None = None,
    ) -> None:
        if self.nested:
            return
        mode = self.modes[-1]
        if isinstance(target, (cst.Tuple, cst.List)):
            for position, element in enumerate(target.elements):
                inner = element.value
                if isinstance(element, cst.StarredElement):
                    self._define(inner, value, "unpack", node, -1)
                else:
                    self._define(inner, value, "unpack", node, position)
            return
        name = dotted(target)
        if name is None:
            return
        definition = Definition(name, value, self._tick(), mode, index, kind, node)
        self.flow.defs.setdefault(name, []).append(definition)

    # grad-mode regions -------------------------------------------------------------------
    def visit_With(self, node: cst.With) -> None:
        mode = self.modes[-1]
        for item in node.items:
            found = grad_mode_of(item.item, self.imports)
            if found is not None:
                mode = found
        self.modes.append(mode if not self.nested else UNKNOWN)

    def leave_With(self, original_node: cst.With) -> None:
        self.modes.pop()
        for item in original_node.items:
            if item.asname is not None:
                self._define(item.asname.name, item.item, "with", original_node)

    # nested scopes run at an unknown time and grad mode --------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node is not self.flow.function:
            self.nested += 1
            self.modes.append(UNKNOWN)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if original_node is not self.flow.function:
            self.nested -= 1
            self.modes.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.nested += 1
        self.modes.append(UNKNOWN)

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.nested -= 1
        self.modes.pop()

    # definitions ---------------------------------------------------------------------------
    def leave_Assign(self, original_node: cst.Assign) -> None:
        before = self.order
        for target in original_node.targets:
            self._define(target.target, original_node.value, "assign", original_node)
        if not self.nested:
            # `h[0] = v` defines nothing: it still needs an order of its own, after the
            # definition just before it (`h = g.detach()`), or that one is not "before" it.
            order = self.order if self.order != before else self._tick()
            self.flow.statements.append((original_node, order))

    def visit_Del(self, node: cst.Del) -> None:
        if not self.nested:
            self.flow.statements.append((node, self._tick()))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, (cst.Name, cst.Attribute)):
            self.flow.attribute_reads.append(node)
            self.flow.read_orders[id(node)] = self.order

    def leave_AnnAssign(self, original_node: cst.AnnAssign) -> None:
        if original_node.value is not None:
            self._define(original_node.target, original_node.value, "assign", original_node)

    def leave_AugAssign(self, original_node: cst.AugAssign) -> None:
        before = self.order
        self._define(original_node.target, original_node, "augassign", original_node)
        if not self.nested:
            order = self.order if self.order != before else self._tick()  # `h[0] += v`
            self.flow.statements.append((original_node, order))

    def visit_For(self, node: cst.For) -> None:
        self._define(node.target, node.iter, "loop", node)

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self.discarded.add(id(node.value))
            # `torch.set_grad_enabled(True)` as a statement switches the mode from here on
            # (until the enclosing block ends: a coarse but safe approximation).
            func = self.imports.resolve(node.value.func) or ""
            if func.endswith("set_grad_enabled") and not self.nested:
                mode = grad_mode_of(node.value, self.imports)
                if mode is not None:
                    self.modes[-1] = mode

    def visit_Call(self, node: cst.Call) -> None:
        order = self._tick()
        if not self.nested:
            self.flow.statements.append((node, order))
        self.flow.calls.append(
            CallSite(
                node=node,
                order=order,
                mode=self.modes[-1],
                discarded=id(node) in self.discarded,
                in_nested_def=self.nested > 0,
            )
        )

    def visit_Return(self, node: cst.Return) -> None:
        if not self.nested:
            self.flow.returns.append((node, self._tick()))


def analyse_method(
    function: cst.FunctionDef, imports: ImportTable, inherited: str = DEFAULT
) -> MethodFlow:
    """Run the single ordered pass over `function` and return what it found. `inherited` is
    the grad mode it is entered in (a helper called from backward runs in its caller's)."""
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    bound: str | None = None
    if params and any(dotted(d.decorator) == "classmethod" for d in function.decorators):
        bound = params.pop(0)  # `cls`: bound by Python, never passed (semantics D1.5)
    vararg = None
    star = function.params.star_arg
    if isinstance(star, cst.Param):
        vararg = star.name.value
    base = inherited
    for decorator in function.decorators:
        expr = decorator.decorator
        name = imports.resolve(expr.func if isinstance(expr, cst.Call) else expr) or ""
        if name.rsplit(".", 1)[-1] == "once_differentiable":
            base = DISABLE  # the wrapper runs the body under no_grad (semantics A1.3)
        mode = grad_mode_of(expr, imports)
        if mode is not None:
            base = mode
    flow = MethodFlow(function=function, params=params, vararg=vararg, base_mode=base)
    for position, name in enumerate(params):
        flow.defs.setdefault(name, []).append(
            Definition(name, None, 0, base, position, "param", function)
        )
    if bound is not None:
        flow.defs.setdefault(bound, []).append(
            Definition(bound, None, 0, base, None, "param", function)
        )
    if vararg:
        flow.defs.setdefault(vararg, []).append(
            Definition(vararg, None, 0, base, -1, "param", function)
        )
    _FlowVisitor(flow, imports).walk(function)
    return flow
