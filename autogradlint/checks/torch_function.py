"""Family C (AGL3xx): __torch_function__ / __torch_dispatch__ changing dtype or device."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from ..analysis.facts import ClassInfo
from ..analysis.handled_ops import handled_ops, op_name
from ..analysis.names import ImportTable, dotted
from ..analysis.source_text import code_of
from ..analysis.walk import FastVisitor, names_in
from .base import Check
from .common import keyword, positional, source_of, string_value
from .gates import Gate, pattern
from .reads import Reads

HOOKS = ("__torch_function__", "__torch_dispatch__")
DTYPE_METHODS = frozenset({"float", "half", "bfloat16", "double", "int", "long", "short"})
DEVICE_METHODS = frozenset({"cuda", "cpu"})
TREE_MAPS = frozenset({"tree_map", "tree_map_only", "tree_map_"})
REDISPATCH_FUNCTIONS = ("_disabled_torch_function_impl",)
# The module-level value of a name, when the file binds it once (FileMethods.constant).
Constant = Callable[[str], cst.BaseExpression | None]


@dataclass(frozen=True)
class Conversion:
    node: cst.CSTNode
    kind: str  # dtype | device
    target: str | None  # the name the converted value is bound to, if any
    inline_in: cst.Call | None = None
    value: cst.BaseExpression | None = None  # what `kwargs["dtype"] = ...` stores


class _HookVisitor(FastVisitor):
    """Collects conversions of args/kwargs and redispatch calls in one hook body, in order."""

    def __init__(
        self,
        hook: cst.FunctionDef,
        params: list[str],
        imports: ImportTable,
        helper: Callable[[str], cst.FunctionDef | None] | None = None,
        constant: Constant | None = None,
    ) -> None:
        self.hook = hook
        self.imports = imports
        self.helper = helper  # a module-level function of the file, by name
        self.helper_kinds: dict[str, str | None] = {}
        self.constant = constant
        self.reader = _Reader(constant, self._helper_kind)
        # The later names of a converted value: `grouped = regroup(moved)` still holds the moved
        # tensors (by the conversion's target).
        self.carried: dict[str, set[str]] = {}
        self.func = params[0] if params else "func"
        self.derived: set[str] = set(params[2:4])  # args, kwargs
        self.local_converters: dict[str, cst.FunctionDef | cst.Lambda] = {}
        self.conversions: list[Conversion] = []
        self.redispatches: list[cst.Call] = []
        # The result side: names bound to what the redispatch returns, the conversions of
        # those to a fixed dtype (by the name they are bound to, or None inline in a return),
        # and the names the hook returns.
        self.results: set[str] = set()
        self.result_conversions: list[Conversion] = []
        self.returned: set[str] = set()
        self.if_tests: list[cst.BaseExpression] = []
        self.handled_ops: list[frozenset[str]] = []  # ops the enclosing branches handle
        self.depth = 0

    # nested helpers (`def unwrap(x): return x.to(...)`) are inspected when they are used
    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if node is self.hook:
            return True
        self.local_converters[node.name.value] = node
        return False

    def visit_If(self, node: cst.If) -> bool:
        self.if_tests.append(node.test)
        # The body handles the ops its test names (`if func is aten.unbind.int:`); the else
        # branch does not, so the two are walked apart.
        self.walk(node.test)
        self.handled_ops.append(handled_ops(node.test, self.func))
        self.walk(node.body)
        self.handled_ops.pop()
        if node.orelse is not None:
            self.walk(node.orelse)
        return False

    def leave_If(self, original_node: cst.If) -> None:
        self.if_tests.pop()

    def visit_For(self, node: cst.For) -> None:
        if self._is_derived(node.iter):
            for name in _target_names(node.target):
                self.derived.add(name)

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is None:
            return
        self.returned.update(names_in(node.value))
        if self._converts_result(node.value):
            self.result_conversions.append(Conversion(node.value, "dtype", None))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                self._kwargs_store(target.target, node.value, node)
        value = node.value
        bound = [n for target in node.targets for n in _target_names(target.target)]
        if isinstance(value, cst.Call) and self._is_redispatch(value):
            self.results.update(bound)
        elif self._converts_result(value):
            self.result_conversions += [Conversion(value, "dtype", name) for name in bound]
        derived = self._is_derived(node.value)
        conversions = self._conversions_in(node.value)
        read = set(names_in(node.value))
        for target in node.targets:
            for name in _target_names(target.target):
                if derived:
                    self.derived.add(name)
                for kind, conv_node in conversions:
                    self.conversions.append(Conversion(conv_node, kind, name))
                for names in self.carried.values():
                    if read & names:
                        names.add(name)
                if conversions:
                    self.carried.setdefault(name, {name})

    def visit_Call(self, node: cst.Call) -> None:
        if self._is_redispatch(node):
            self.redispatches.append(node)
            for kind, conv_node in self._conversions_in_args(node):
                self.conversions.append(Conversion(conv_node, kind, None, inline_in=node))
        elif self._computes_handled_op(node):
            # `aten._to_copy.default(x, dtype=...).unbind(dim)` in the unbind handler: the op
            # itself, run on a converted input (C5.6), is a redispatch like `func(...)`.
            self.redispatches.append(node)
            inputs = [arg.value for arg in node.args]
            if isinstance(node.func, cst.Attribute) and op_name(node.func) is None:
                inputs.append(node.func.value)  # the receiver of `x.unbind(dim)`
            for expr in inputs:
                for kind, conv_node in self._conversions_in(expr):
                    self.conversions.append(Conversion(conv_node, kind, None, inline_in=node))

    def _computes_handled_op(self, call: cst.Call) -> bool:
        handled = frozenset().union(*self.handled_ops) if self.handled_ops else frozenset()
        if not handled:
            return False
        name = op_name(call.func)
        if name is None and isinstance(call.func, cst.Attribute):
            name = call.func.attr.value  # `x.unbind(dim)`: the method of the op's name
        # An in-place op (`copy_`) writes in its destination's dtype and device whatever its
        # other inputs were converted to: nothing the caller sees changes.
        return (
            name is not None
            and name in handled
            and name not in CONVERSION_OPS
            and not name.endswith("_")
        )

    # --- helpers ---------------------------------------------------------------------------
    def _converts_result(self, expr: cst.BaseExpression) -> bool:
        """`out.to(torch.float64)`, `out.double()`, `func(*args).half()`: the redispatch's
        result cast to a dtype fixed in the code. A cast to a dtype read from the call
        (`out.to(args[0].dtype)`, `out.to(orig_dtype)`) restores what the plain op gives."""
        if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
            return False
        receiver = expr.func.value
        if isinstance(receiver, cst.Call):
            if not self._is_redispatch(receiver):
                return False
        elif not (isinstance(receiver, cst.Name) and receiver.value in self.results):
            return False
        return _fixed_dtype(expr, self.constant)

    def _is_redispatch(self, call: cst.Call) -> bool:
        func = call.func
        if isinstance(func, cst.Name) and func.value == self.func:
            return True
        if isinstance(func, cst.Attribute):
            if func.attr.value in HOOKS and isinstance(func.value, cst.Call):
                inner = func.value.func
                return isinstance(inner, cst.Name) and inner.value == "super"
            if func.attr.value in REDISPATCH_FUNCTIONS:
                return True
            # `func._op(...)`, `func.overloadpacket(...)` still call the same operator
            if dotted(func.value) == self.func:
                return True
            if func.attr.value in HOOKS:
                return False  # `cls.__torch_function__(func, ...)`: the hook again, not the op
        # `cls._evaluate(func, grouped_args)`: a helper handed the op runs it on what it gets
        return any(not arg.star and dotted(arg.value) == self.func for arg in call.args)

    def _is_derived(self, expr: cst.BaseExpression) -> bool:
        for name in names_in(expr):
            if name in self.derived:
                return True
        return False

    def _kwargs_store(
        self, target: cst.Subscript, value: cst.BaseExpression, node: cst.CSTNode
    ) -> None:
        base = dotted(target.value)
        if base is None or base not in self.derived or len(target.slice) != 1:
            return
        index = target.slice[0].slice
        key = string_value(index.value) if isinstance(index, cst.Index) else None
        if key == "dtype":
            self.conversions.append(Conversion(node, "dtype", base, value=value))
        elif (
            key == "device"
            and not _is_meta(value, self.constant)
            and not self._fills_missing("device")
        ):
            self.conversions.append(Conversion(node, "device", base, value=value))

    def _fills_missing(self, key: str) -> bool:
        """Inside `if kwargs.get("device") is None:` / `if "device" not in kwargs:` /
        `if not kwargs.get("device"):`."""
        return any(_tests_missing(test, key) for test in self.if_tests)

    def _conversions_in_args(self, call: cst.Call) -> list[tuple[str, cst.CSTNode]]:
        found: list[tuple[str, cst.CSTNode]] = []
        for arg in call.args:
            found.extend(self._conversions_in(arg.value))
        return found

    def _conversions_in(self, expr: cst.BaseExpression) -> list[tuple[str, cst.CSTNode]]:
        """Conversions applied to args/kwargs-derived values inside an expression."""
        finder = _ConversionFinder(self)
        finder.walk(expr)
        return finder.found

    def _helper_kind(self, name: str) -> str | None:
        """The conversion a module-level function of the file returns of what it is given
        (`for x in args: out.append(x.to(device))` then `return out`), if any. A helper that
        converts its input to compute something else (a statistic) returns no converted
        value: it is not one."""
        if self.helper is None or name in self.local_converters or self.imports.is_imported(name):
            return None
        if name not in self.helper_kinds:
            self.helper_kinds[name] = None  # a recursive helper stops here
            function = self.helper(name)
            if function is not None:
                self.helper_kinds[name] = _returned_conversion(function, self.reader)
        return self.helper_kinds[name]

    def _converter_kind(self, fn: cst.BaseExpression) -> str | None:
        """The conversion a function passed to tree_map applies to its argument, if any."""
        body: cst.CSTNode | None = None
        if isinstance(fn, cst.Lambda):
            body = fn.body
        elif isinstance(fn, cst.Name) and fn.value in self.local_converters:
            body = self.local_converters[fn.value]
        if body is None:
            return None
        kinds: list[str] = []
        constant = self.constant

        class _Find(FastVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                kind = conversion_kind(node, constant)
                if kind is not None:
                    kinds.append(kind)

        _Find().walk(body)
        return kinds[0] if kinds else None


def _tests_missing(test: cst.BaseExpression, key: str) -> bool:
    """Whether `test` checks that `key` was not passed: `kw.get(key) is None`, `key not in
    kw`, or a negation holding `kw.get(key)`."""
    found = False

    class _Find(FastVisitor):
        def visit_Comparison(self, node: cst.Comparison) -> None:
            nonlocal found
            for target in node.comparisons:
                if isinstance(target.operator, cst.Is) and _gets(node.left, key):
                    found |= dotted(target.comparator) == "None"
                if isinstance(target.operator, cst.NotIn):
                    found |= string_value(node.left) == key

    _Find().walk(test)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        found |= _mentions_get(test.expression, key)
    return found


def _gets(expr: cst.BaseExpression, key: str) -> bool:
    """`something.get(key)` (a default after the key changes nothing here)."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return False
    first = positional(expr, 0)
    return expr.func.attr.value == "get" and first is not None and string_value(first) == key


def _mentions_get(expr: cst.BaseExpression, key: str) -> bool:
    found = False

    class _Find(FastVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            found |= _gets(node, key)

    _Find().walk(expr)
    return found


class _ConversionFinder(FastVisitor):
    """Conversions applied to args/kwargs-derived values inside one expression (defined once:
    a class per call costs more than the walk on a hook's many small expressions)."""

    def __init__(self, visitor: _HookVisitor) -> None:
        self.visitor = visitor
        self.found: list[tuple[str, cst.CSTNode]] = []
        self.bound: set[str] = set()  # comprehension / lambda variables over derived values

    def _bind(self, comp: cst.CompFor | None) -> None:
        self.bound |= _comprehension_targets(comp, self.visitor.derived | self.bound)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._bind(node.for_in)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._bind(node.for_in)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._bind(node.for_in)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._bind(node.for_in)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = dotted(func) or ""
        if name.rsplit(".", 1)[-1] in TREE_MAPS and len(node.args) >= 2:
            if self.visitor._is_derived(node.args[1].value):
                kind = self.visitor._converter_kind(node.args[0].value)
                if kind is not None:
                    self.found.append((kind, node))
            return
        if isinstance(func, cst.Name) and any(
            self.visitor._is_derived(arg.value) or set(names_in(arg.value)) & self.bound
            for arg in node.args
        ):
            kind = self.visitor._helper_kind(func.value)
            if kind is not None:
                self.found.append((kind, node))  # `moved = _to_device(args, device)`
                return
        if op_name(func) in CONVERSION_OPS:
            # `aten._to_copy.default(x, dtype=...)`: the op form of `x.to(...)`
            first = positional(node, 0)
            converted = set(names_in(first)) if first is not None else set()
            kind = _op_conversion_kind(node)
            if converted & (self.visitor.derived | self.bound) and kind is not None:
                self.found.append((kind, node))
            return
        if isinstance(func, cst.Attribute):
            receiver = set(names_in(func.value))
            if receiver & (self.visitor.derived | self.bound):
                kind = conversion_kind(node, self.visitor.constant)
                if kind is not None:
                    self.found.append((kind, node))


@dataclass(frozen=True)
class _Reader:
    """What a helper's body is read with: the module's constants, and the conversion another
    module-level helper returns (so a helper calling a converting helper is one too)."""

    constant: Constant | None
    helper_kind: Callable[[str], str | None]


def _returned_conversion(function: cst.FunctionDef, reader: _Reader) -> str | None:
    """`dtype` / `device` when `function` returns its parameters converted: `return
    x.to(device)`, or a name it assigned or appended such conversions to (`for x in args:
    out.append(x.to(device))` ... `return out`, `return tuple(out)`), or what a converting
    helper of the module returns of them (`return tuple(_cast(a) for a in args)`). A value computed from a converted one
    (`torch.stack([(data >> 4).to(torch.uint8), ...])`, a statistic) is something else: the
    caller does not get its own tensors back on another device or in another dtype."""
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    derived = set(params)
    into: dict[str, str] = {}  # name -> the conversion stored in it
    returned: list[str] = []

    class _Body(FastVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_For(self, node: cst.For) -> None:
            if set(names_in(node.iter)) & derived:
                derived.update(_target_names(node.target))

        def visit_Assign(self, node: cst.Assign) -> None:
            kind = _direct_conversion(node.value, derived, reader)
            for target in node.targets:
                for name in _target_names(target.target):
                    if kind is not None:
                        into[name] = kind

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend"):
                owner = dotted(func.value)
                for arg in node.args:
                    kind = _direct_conversion(arg.value, derived, reader)
                    if owner is not None and kind is not None:
                        into[owner] = kind

        def visit_Return(self, node: cst.Return) -> None:
            value = _unwrapped(node.value) if node.value is not None else None
            if isinstance(value, cst.Name) and value.value in into:
                returned.append(into[value.value])
            elif value is not None:
                kind = _direct_conversion(value, derived, reader)
                if kind is not None:
                    returned.append(kind)

    _Body().walk(function)
    return returned[0] if returned else None


def _direct_conversion(expr: cst.BaseExpression, derived: set[str], reader: _Reader) -> str | None:
    """The conversion `expr` applies to a value given (a name of `derived`, or an element or
    attribute of one), itself or per element: `x.to(d)`, `x.to(d) if ... else x`,
    `[a.cuda() for a in args]`, `tuple(_cast(a) for a in args)` with `_cast` a converting
    helper; None for anything computed from it first."""
    expr = _unwrapped(expr)
    if isinstance(expr, cst.IfExp):
        return _direct_conversion(expr.body, derived, reader) or _direct_conversion(
            expr.orelse, derived, reader
        )
    if isinstance(expr, (cst.List, cst.Tuple)):
        for element in expr.elements:
            kind = _direct_conversion(element.value, derived, reader)
            if kind is not None:
                return kind
        return None
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        bound = derived | _comprehension_targets(expr.for_in, derived)
        return _direct_conversion(expr.elt, bound, reader)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
        given = any(not set(names_in(arg.value)).isdisjoint(derived) for arg in expr.args)
        return reader.helper_kind(expr.func.value) if given else None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        kind = conversion_kind(expr, reader.constant)
        base = expr.func.value
        while isinstance(base, (cst.Subscript, cst.Attribute)):
            base = base.value
        if kind is not None and isinstance(base, cst.Name) and base.value in derived:
            return kind
    return None


def _fixed_dtype(call: cst.Call, constant: Constant | None) -> bool:
    """A conversion to a dtype the code names (`.double()`, `.to(torch.float64)`,
    `.to(dtype=torch.half)`, `.type(torch.float16)`), not one read from a value."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    method = func.attr.value
    if method in DTYPE_METHODS:
        return not call.args
    if method not in ("to", "type"):
        return False
    target = keyword(call, "dtype") or positional(call, 0)
    if target is None or (method == "to" and conversion_kind(call, constant) != "dtype"):
        return False
    name = dotted(_resolved(target, constant)) or ""
    return name.startswith("torch.") and not name.endswith("device")


def _unwrapped(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The one argument of `tuple(...)` / `list(...)`: the same values, regrouped."""
    while (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Name)
        and expr.func.value in ("tuple", "list")
        and len(expr.args) == 1
        and not expr.args[0].star
    ):
        expr = expr.args[0].value
    return expr


def conversion_kind(call: cst.Call, constant: Constant | None = None) -> str | None:
    """`dtype` or `device` for a tensor conversion method call; None otherwise (or for meta).
    `constant` reads a module-level name the call is given (`.to(TARGET)`)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    if method in DTYPE_METHODS and not call.args:
        return "dtype"
    if method in DEVICE_METHODS:
        return "device"
    if method == "type":
        return "dtype" if call.args else None
    if method != "to":
        return None
    if _own_metadata(func.value, keyword(call, "dtype") or keyword(call, "device")) or (
        _own_metadata(func.value, positional(call, 0))
    ):
        return None  # `a.to(a.dtype)`: the tensor's own dtype or device, no change (oracle)
    if keyword(call, "dtype") is not None:
        return "dtype"
    device = keyword(call, "device")
    first = positional(call, 0)
    if device is not None:
        return None if _is_meta(device, constant) else "device"
    if first is None:
        return None
    return _target_kind(first, constant)


def _own_metadata(receiver: cst.BaseExpression, target: cst.BaseExpression | None) -> bool:
    """`target` is the receiver's own `.dtype` or `.device`."""
    return (
        isinstance(target, cst.Attribute)
        and target.attr.value in ("dtype", "device")
        and target.value.deep_equals(receiver)
    )


def _target_kind(target: cst.BaseExpression, constant: Constant | None) -> str | None:
    """What `.to(target)` converts: `device`, `dtype`, or None for the meta device. A name the
    module binds once is read through its value (`TARGET = torch.device("meta")` is a device,
    and meta); any other name by how it is spelled."""
    value = _resolved(target, constant)
    if _is_meta(value):
        return None
    if string_value(value) is not None or _is_device_call(value):
        return "device"
    dotted_value = dotted(value) or ""
    if value is not target and dotted_value.startswith("torch."):
        return "device" if dotted_value.endswith("device") else "dtype"  # `torch.float64`
    text = (dotted(target) or "").lower()
    if "device" in text:
        return "device"
    return "dtype"


def _resolved(expr: cst.BaseExpression, constant: Constant | None) -> cst.BaseExpression:
    """A bare name's module-level value, when the module binds it once; else the name."""
    if constant is not None and isinstance(expr, cst.Name):
        value = constant(expr.value)
        if value is not None:
            return value
    return expr


# aten ops that convert their input: the handler of one of them converting is applying the
# request (AGL306's concern), not changing it.
CONVERSION_OPS = frozenset({"_to_copy", "to", "_to_dtype", "to_dtype"})


def _op_conversion_kind(call: cst.Call) -> str | None:
    """`dtype` / `device` for `aten._to_copy.default(x, dtype=...)`, `aten.to.dtype(x, d)`."""
    if keyword(call, "dtype") is not None or (dotted(call.func) or "").endswith("to.dtype"):
        return "dtype"
    device = keyword(call, "device")
    if device is not None and not _is_meta(device):
        return "device"
    return None


def _is_device_call(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and (dotted(expr.func) or "").endswith("device")


def _keeps_own(conversion: Conversion, redispatches: list[cst.Call]) -> bool:
    """`kwargs["dtype"] = t._data.dtype` before `func(t._data, **kwargs)`: the redispatch runs
    on that inner tensor with its own dtype (or device), so nothing the caller sees changes."""
    value = conversion.value
    if not (isinstance(value, cst.Attribute) and value.attr.value == conversion.kind):
        return False
    own = code_of(value.value)
    for call in redispatches:
        passes_kwargs = any(
            arg.star == "**" and dotted(arg.value) == conversion.target for arg in call.args
        )
        if passes_kwargs and any(not arg.star and code_of(arg.value) == own for arg in call.args):
            return True
    return False


def _is_meta(expr: cst.BaseExpression, constant: Constant | None = None) -> bool:
    """Redirecting to the meta device is how tracing subclasses work, not a numerics change."""
    expr = _resolved(expr, constant)
    if string_value(expr) == "meta":
        return True
    if isinstance(expr, cst.Call) and _is_device_call(expr):
        first = positional(expr, 0)
        return first is not None and string_value(first) == "meta"
    return False


def _comprehension_targets(comp: cst.CompFor | None, given: set[str]) -> set[str]:
    """The names a comprehension's `for` clauses bind to values drawn from `given` (or from
    an earlier clause's names): `a` in `[a.cuda() for a in args]`. The element is visited
    before its clauses, so callers bind these first."""
    bound: set[str] = set()
    while comp is not None:
        if set(names_in(comp.iter)) & (given | bound):
            bound |= set(_target_names(comp.target))
        comp = comp.inner_for_in
    return bound


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        names: list[str] = []
        for element in target.elements:
            names.extend(_target_names(element.value))
        return names
    return []


class TorchFunctionConversions(Check):
    """AGL301 (dtype) and AGL302 (device) changed in an override before redispatch."""

    codes = ("AGL301", "AGL302")
    gate = Gate((pattern(b"__torch_", rb"def\s+__torch_(function|dispatch)__"),), (b"__torch_",))
    reads = Reads(overrides=True)

    def run(self) -> None:
        facts = self.ctx.facts
        for info in facts.classes:
            self.ctx.enter(info.node)
            for hook_name in HOOKS:
                hook = info.methods.get(hook_name)
                if hook is not None:
                    self._check_hook(info, hook)

    def _check_hook(self, info: ClassInfo, hook: cst.FunctionDef) -> None:
        params = [p.name.value for p in (*hook.params.posonly_params, *hook.params.params)]
        is_static = any(dotted(d.decorator) == "staticmethod" for d in hook.decorators)
        params = params if is_static else params[1:]
        if len(params) < 3:
            return
        methods = self.ctx.methods
        visitor = _HookVisitor(
            hook, params, self.ctx.facts.imports, methods.function, methods.constant
        )
        visitor.walk(hook)
        if not visitor.redispatches:
            return
        redispatch_names: set[str] = set()
        for call in visitor.redispatches:
            for arg in call.args:
                redispatch_names.update(names_in(arg.value))
        module = self.ctx.facts.module
        seen: set[int] = set()
        for conversion in visitor.conversions:
            names = visitor.carried.get(conversion.target or "", set()) | {conversion.target}
            flows = conversion.inline_in is not None or bool(names & redispatch_names)
            if not flows or id(conversion.node) in seen:
                continue
            if _keeps_own(conversion, visitor.redispatches):
                continue
            seen.add(id(conversion.node))
            rule = "AGL301" if conversion.kind == "dtype" else "AGL302"
            self.report(
                rule,
                conversion.node,
                cls=info.name,
                hook=hook.name.value,
                code=source_of(module, conversion.node),
                side="argument dtypes before",  # AGL301's headline (AGL302's has no field)
            )
        # The result cast after redispatch reaches the caller just as a cast argument's does:
        # float32 in, float64 out, and `.dtype` misreported (C1.2, C1.3).
        for conversion in visitor.result_conversions:
            if conversion.target is not None and conversion.target not in visitor.returned:
                continue
            if id(conversion.node) in seen:
                continue
            seen.add(id(conversion.node))
            self.report(
                "AGL301",
                conversion.node,
                cls=info.name,
                hook=hook.name.value,
                code=source_of(module, conversion.node),
                side="result dtypes after",
            )
