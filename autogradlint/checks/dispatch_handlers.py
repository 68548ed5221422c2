"""AGL306: a `__torch_dispatch__` handler of a factory or conversion op that ignores what the
caller asked for (dtype, device, size)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import cast

import libcst as cst

from ..analysis.facts import ClassInfo
from ..analysis.handled_ops import handled_ops, op_name
from ..analysis.methods import FileMethods
from ..analysis.names import ImportTable, dotted, iter_statements
from ..analysis.walk import FastVisitor, names_in
from ..settings import DISPATCH_REQUEST_OPS, DISPATCH_SIZED_OPS
from .base import Check
from .common import string_value
from .gates import Gate, pattern
from .reads import Reads

REQUESTING_OPS = DISPATCH_REQUEST_OPS
SIZED_OPS = DISPATCH_SIZED_OPS
READ_OPS = REQUESTING_OPS | SIZED_OPS  # the ops whose handlers the check reads
_QUALIFIED = re.compile(r"aten::(\w+)")


def registered_ops(decorator: cst.BaseExpression) -> set[str]:
    """The ops a handler's decorator registers it for, of those AGL306 reads:
    `@implements(aten.empty_like.default)`, `@register([torch.ops.aten.new_zeros.default])`,
    `@impl("aten::empty_like")`."""
    found: set[str] = set()

    class _Ops(FastVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            name = op_name(node)
            if name is None:
                return True
            found.add(name)
            return False  # `aten.X.default` names X once, not again as `aten.X`

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            found.update(_QUALIFIED.findall(node.value))

    _Ops().walk(decorator)
    return found & READ_OPS


class DispatchHandlers(Check):
    """AGL306 on `if func is aten.<op>...:` branches of `__torch_dispatch__`."""

    codes = ("AGL306",)
    gate = Gate(
        (
            pattern(b"__torch_dispatch__", rb"def\s+__torch_dispatch__"),
            # a handler registered by decorator for one of the ops (starts with a literal)
            pattern(b"aten.", rb"aten\.(?:" + "|".join(sorted(READ_OPS)).encode() + rb")\b"),
        )
    )
    reads = Reads(overrides=True, handler_ops=READ_OPS)

    def run(self) -> None:
        for info in self.ctx.facts.classes:
            hook = info.methods.get("__torch_dispatch__")
            if hook is not None:
                self.ctx.enter(info.node)
                self._hook(info, hook)
        self.ctx.enter(None)
        # Handlers registered per op by decorator (`@implements(aten.empty_like.default)`), as
        # wrapper-tensor libraries write them: defs are statements, so expressions are never
        # entered on the way to them.
        for node in iter_statements(self.ctx.facts.module):
            if isinstance(node, cst.FunctionDef) and node.decorators:
                ops = {op for d in node.decorators for op in registered_ops(d.decorator)}
                if ops:
                    self._registered(node, ops)

    def _registered(self, handler: cst.FunctionDef, ops: set[str]) -> None:
        params = [p.name.value for p in (*handler.params.posonly_params, *handler.params.params)]
        if "args" in params and "kwargs" in params:
            self._answers(handler.name.value, handler, handler.body, handler, ops, "args", "kwargs")
            return
        # `def _to_copy(func, *args, **kwargs)` called as `TABLE[func](func, args, kwargs)`
        # by the file's `__torch_dispatch__` (torchao's NF4Tensor): the pack holds the
        # dispatch args and kwargs at the positions that call passes them.
        star = handler.params.star_arg
        positions = self._table_positions()
        if positions is None or not isinstance(star, cst.Param):
            # A decomposition registered for the op takes the op's own parameters
            # (`rand_like(x, dtype=None, device=None)`), not a dispatch handler's. The slicer
            # never parses those (slicing.registers_handler is this test's `ast` twin).
            return
        if min(positions) < len(params):
            return  # a named parameter receives one of them: not this shape
        packed = {i - len(params): name for i, name in zip(positions, _UNPACKED, strict=True)}
        unpacked = cast(cst.FunctionDef, handler.visit(_Unpack(star.name.value, packed)))
        self._answers(
            handler.name.value, unpacked, unpacked.body, unpacked, ops, *_UNPACKED, shown=handler
        )

    def _table_positions(self) -> tuple[int, int] | None:
        """Where the file's `__torch_dispatch__` passes its args and kwargs to the handler it
        looks up in a table (`NF4_OPS_TABLE[func](func, args, kwargs)`: 1 and 2)."""
        for info in self.ctx.facts.classes:
            hook = info.methods.get("__torch_dispatch__")
            if hook is None:
                continue
            names = [p.name.value for p in (*hook.params.posonly_params, *hook.params.params)]
            if not any(dotted(d.decorator) == "staticmethod" for d in hook.decorators):
                names = names[1:]
            if len(names) < 4:
                continue
            found = _table_call(hook, names[2], names[3])
            if found is not None:
                return found
        return None

    def _hook(self, info: ClassInfo, hook: cst.FunctionDef) -> None:
        if _data_less(info, self.ctx.methods):
            return  # a token with no tensor inside: there is no data to give a dtype or size
        params = [p.name.value for p in (*hook.params.posonly_params, *hook.params.params)]
        if not any(dotted(d.decorator) == "staticmethod" for d in hook.decorators):
            params = params[1:]  # cls or self
        if len(params) < 4:
            return
        func, _types, args, kwargs = params[:4]
        reporter = self

        class _Branches(FastVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is hook  # nested helpers run when they are called

            def visit_If(self, node: cst.If) -> None:
                ops = set(handled_ops(node.test, func) & READ_OPS)
                if ops:
                    reporter._branch(info, hook, node, ops, args, kwargs)

        _Branches().walk(hook)

    def _branch(
        self,
        info: ClassInfo,
        hook: cst.FunctionDef,
        branch: cst.If,
        ops: set[str],
        args: str,
        kwargs: str,
    ) -> None:
        self._answers(
            f"{info.name}.__torch_dispatch__", branch, branch.body, hook, ops, args, kwargs
        )

    def _answers(
        self,
        where: str,
        node: cst.CSTNode,
        body: cst.BaseSuite,
        hook: cst.FunctionDef,
        ops: set[str],
        args: str,
        kwargs: str,
        shown: cst.CSTNode | None = None,
    ) -> None:
        """Report when `body` answers one of `ops` without reading what the caller asked
        (at `shown`: the handler as written, when `node` is a rewritten copy of it)."""
        if not _returns_in(body):
            return  # falls through to code that may honour the request
        imports = self.ctx.facts.imports
        aliases = _aliases(hook, kwargs, node)
        honoured = _honoured_keys(body, aliases, imports, self.ctx.methods.function)
        if honoured is not ALL_KEYS:
            # `dtype = kwargs.pop("dtype", None)` before the branch, `dtype` read in it
            read = set(names_in(body))
            before = _keys_read_before(hook, node, aliases)
            honoured = honoured | {key for local, key in before.items() if local in read}
        missing = [] if honoured is ALL_KEYS else [k for k in _REQUEST if k not in honoured]
        reads_size = _reads_past_self(body, args)
        if (missing or not reads_size) and _reads_a_redispatch(hook, node, body, aliases, imports):
            missing, reads_size = [], True  # the result was computed with the whole request
        for op in sorted(ops):
            ignored = []
            # `aten.to.dtype` / `to.device` carry the request in args: `self, dtype = args`
            if missing and not (op == "to" and reads_size):
                ignored.append("the requested " + " and ".join(missing))
            if op in SIZED_OPS and not reads_size:
                ignored.append("the requested size")
            if ignored:
                at = shown or node
                anchor: cst.CSTNode = at
                if isinstance(at, cst.If):
                    anchor = at.test
                elif isinstance(at, cst.FunctionDef):  # a handler registered for the op
                    anchor = at.name
                self.report(
                    "AGL306", at, anchor=anchor, hook=where, name=op, detail=" and ".join(ignored)
                )
                return


def _table_call(hook: cst.FunctionDef, args: str, kwargs: str) -> tuple[int, int] | None:
    """The positions of `args` and `kwargs` in a call of a looked-up handler in `hook`."""
    found: list[tuple[int, int]] = []

    class _Calls(FastVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if not isinstance(node.func, cst.Subscript):
                return
            passed = [
                a.value.value if isinstance(a.value, cst.Name) else ""
                for a in node.args
                if a.keyword is None and not a.star
            ]
            if args in passed and kwargs in passed:
                found.append((passed.index(args), passed.index(kwargs)))

    _Calls().walk(hook)
    return found[0] if found else None


# Names the dispatch args and kwargs get when a handler receives them packed in `*args`.
_UNPACKED = ("_dispatch_args", "_dispatch_kwargs")


class _Unpack(cst.CSTTransformer):
    """`args[0]` and `args[1]` of a packed handler, renamed to what they hold."""

    def __init__(self, pack: str, names: dict[int, str]) -> None:
        super().__init__()
        self.pack, self.names = pack, names

    def leave_Subscript(
        self, original_node: cst.Subscript, updated_node: cst.Subscript
    ) -> cst.BaseExpression:
        value, index = updated_node.value, _int_index(updated_node)
        if isinstance(value, cst.Name) and value.value == self.pack and index in self.names:
            return cst.Name(self.names[index])
        return updated_node


def _int_index(node: cst.Subscript) -> int | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    value = node.slice[0].slice.value
    return int(value.value) if isinstance(value, cst.Integer) and value.value.isdigit() else None


def _returns_in(body: cst.BaseSuite) -> list[cst.Return]:
    found: list[cst.Return] = []

    class _Returns(FastVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

    _Returns().walk(body)
    return found


_REQUEST = ("dtype", "device")
ALL_KEYS = frozenset({"*"})  # kwargs handed on whole: every key may be honoured
# Receives kwargs and applies none of it: it fixes the result's aliasing (semantics C5.5).
_APPLIES_NOTHING = frozenset({"torch.utils._python_dispatch.return_and_correct_aliasing"})
_KEY_READERS = frozenset({"get", "pop", "setdefault"})
_WHOLE_READERS = frozenset({"items", "keys", "values", "copy", "update"})


def _honoured_keys(
    body: cst.CSTNode,
    aliases: set[str],
    imports: ImportTable,
    helper: Callable[[str], cst.FunctionDef | None] | None = None,
) -> frozenset[str]:
    """The keys of the caller's `kwargs` the branch reads: `kwargs["dtype"]`,
    `kwargs.get("device")`, `.pop`; ALL_KEYS when it hands them on whole (`**kwargs`, or as an
    argument to any call but one that applies nothing) or walks them (`kwargs.items()`). Handed
    to a module-level function of the file (`helper` finds it by name): what that function
    honours of the parameter receiving them, one call deep."""
    keys: set[str] = set()
    whole = False

    def is_alias(expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Name) and expr.value in aliases

    normalising: set[int] = set()  # calls whose result the request's own name is bound to

    class _Uses(FastVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            # `kwargs = self._get_to_kwargs(*args[1:], **kwargs)`: the request, normalised,
            # under its own name; what the branch then reads of it is what it honours.
            if isinstance(node.value, cst.Call) and any(is_alias(t.target) for t in node.targets):
                normalising.add(id(node.value))

        def visit_Subscript(self, node: cst.Subscript) -> None:
            if is_alias(node.value) and len(node.slice) == 1:
                index = node.slice[0].slice
                key = string_value(index.value) if isinstance(index, cst.Index) else None
                if key is not None:
                    keys.add(key)

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal whole
            func = node.func
            if isinstance(func, cst.Attribute) and is_alias(func.value):
                if func.attr.value in _KEY_READERS and node.args:
                    key = string_value(node.args[0].value)
                    if key is not None:
                        keys.add(key)
                elif func.attr.value in _WHOLE_READERS:
                    whole = True
            if any(is_alias(arg.value) for arg in node.args):
                if (imports.resolve(func) or "") in _APPLIES_NOTHING or id(node) in normalising:
                    return
                inner = _through_helper(node, is_alias, imports, helper)
                if inner is None or inner is ALL_KEYS:
                    whole = True
                else:
                    keys.update(inner)

        def visit_For(self, node: cst.For) -> None:
            nonlocal whole
            whole = whole or is_alias(node.iter)

        def visit_Comparison(self, node: cst.Comparison) -> None:
            # `kwargs == {"dtype": torch.uint8}` inspects the whole request
            nonlocal whole
            sides = [node.left, *(c.comparator for c in node.comparisons)]
            whole = whole or any(is_alias(side) for side in sides)

        def visit_StarredDictElement(self, node: cst.StarredDictElement) -> None:
            nonlocal whole
            whole = whole or is_alias(node.value)

    _Uses().walk(body)
    return ALL_KEYS if whole else frozenset(keys)


def _through_helper(
    call: cst.Call,
    is_alias: Callable[[cst.BaseExpression], bool],
    imports: ImportTable,
    helper: Callable[[str], cst.FunctionDef | None] | None,
) -> frozenset[str] | None:
    """What a module-level helper of the file honours of the request handed to it (`return
    _to_copy_impl(args[0], kwargs)`); None when the callee is not one (anything else that gets
    the request may honour all of it)."""
    if helper is None or not isinstance(call.func, cst.Name):
        return None
    if imports.is_imported(call.func.value):
        return None
    function = helper(call.func.value)
    if function is None:
        return None
    positional = [p.name.value for p in _positional_params(function)]
    named = {*positional, *(p.name.value for p in function.params.kwonly_params)}
    receivers: set[str] = set()
    index = 0
    for arg in call.args:
        if arg.star == "*":
            return None  # positions unknowable
        if arg.star == "**":
            if is_alias(arg.value):
                star = function.params.star_kwarg
                if not isinstance(star, cst.Param):
                    return None
                receivers.add(star.name.value)
            continue
        if arg.keyword is not None:
            if is_alias(arg.value):
                if arg.keyword.value not in named:
                    return None
                receivers.add(arg.keyword.value)
            continue
        if is_alias(arg.value):
            if index >= len(positional):
                return None
            receivers.add(positional[index])
        index += 1
    if not receivers:
        return None
    for stmt in iter_statements(function.body):  # `request = dict(request)` in the helper
        if isinstance(stmt, cst.Assign) and _copy_of(stmt.value, receivers):
            receivers |= {t.target.value for t in stmt.targets if isinstance(t.target, cst.Name)}
    return _honoured_keys(function.body, receivers, imports)  # one call deep: no further


def _positional_params(function: cst.FunctionDef) -> list[cst.Param]:
    return [*function.params.posonly_params, *function.params.params]


def _reads_a_redispatch(
    hook: cst.FunctionDef,
    branch: cst.CSTNode,
    body: cst.BaseSuite,
    aliases: set[str],
    imports: ImportTable,
) -> bool:
    """Whether the branch answers with what an earlier statement of the hook computed with the
    whole request: `out = func(*unwrap(args), **unwrap(kwargs))` before `if func in {...}:
    return wrap(out)` (torchao's training weights)."""
    if hook is branch:
        return False  # a registered handler: nothing runs before its body
    statements = hook.body.body if isinstance(hook.body, cst.IndentedBlock) else ()
    computed: set[str] = set()
    for stmt in statements:
        if branch in _descendants_once(stmt, branch):
            break
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if (
                isinstance(small, cst.Assign)
                and isinstance(small.value, cst.Call)
                and _honoured_keys(small.value, aliases, imports) is ALL_KEYS
            ):
                computed.update(
                    t.target.value for t in small.targets if isinstance(t.target, cst.Name)
                )
    return bool(computed & set(names_in(body)))


def _keys_read_before(
    hook: cst.FunctionDef, branch: cst.CSTNode, aliases: set[str]
) -> dict[str, str]:
    """Locals the hook binds to one key of the request before the branch: `dtype =
    kwargs.pop("dtype", None)`, `device = kwargs.get("device")`, `kw["dtype"]`."""
    if hook is branch:
        return {}
    found: dict[str, str] = {}
    statements = hook.body.body if isinstance(hook.body, cst.IndentedBlock) else ()
    for stmt in statements:
        if _descendants_once(stmt, branch):
            break
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                continue
            target, value = small.targets[0].target, small.value
            pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = (
                [(t.value, v.value) for t, v in zip(target.elements, value.elements, strict=False)]
                if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple)
                else [(target, value)]
            )
            for name, read in pairs:
                key = _key_of(read, aliases)
                if isinstance(name, cst.Name) and key is not None:
                    found[name.value] = key
    return found


def _key_of(expr: cst.BaseExpression, aliases: set[str]) -> str | None:
    """The key `expr` reads from the request: `kwargs["dtype"]`, `kwargs.get("dtype", d)`."""
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name):
        if expr.value.value in aliases and len(expr.slice) == 1:
            index = expr.slice[0].slice
            return string_value(index.value) if isinstance(index, cst.Index) else None
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and isinstance(expr.func.value, cst.Name)
        and expr.func.value.value in aliases
        and expr.func.attr.value in _KEY_READERS
        and expr.args
    ):
        return string_value(expr.args[0].value)
    return None


def _data_less(info: ClassInfo, methods: FileMethods) -> bool:
    """A wrapper subclass with no tensor inside (an effect token, a placeholder): its
    `__tensor_flatten__` names no inner tensor (`return [], ctx`), or it has none and its
    constructor takes nothing to wrap (`def __new__(cls)`). Read from the file's text: the
    slice holds the hooks, not these."""
    if "tensor" not in info.kinds:
        return False

    def own(name: str) -> cst.FunctionDef | None:
        found = [m.node for m in methods.of_class(info.name, name)]
        return found[0] if len(found) == 1 else info.methods.get(name)

    flatten = own("__tensor_flatten__")
    if flatten is not None:
        returns = _returns_in(flatten.body)
        return bool(returns) and all(_names_no_tensor(r.value) for r in returns)
    makers = [m for m in (own("__new__"), own("__init__")) if m is not None]
    return bool(makers) and all(
        len([*m.params.posonly_params, *m.params.params]) <= 1
        and not isinstance(m.params.star_arg, cst.Param)
        and m.params.star_kwarg is None
        and not m.params.kwonly_params
        for m in makers
    )


def _names_no_tensor(value: cst.BaseExpression | None) -> bool:
    """`[], ctx` / `([], None)`: the first element, the inner tensors' names, is empty."""
    if not isinstance(value, cst.Tuple) or not value.elements:
        return False
    first = value.elements[0].value
    return isinstance(first, (cst.List, cst.Tuple)) and not first.elements


def _descendants_once(stmt: cst.CSTNode, wanted: cst.CSTNode) -> list[cst.CSTNode]:
    """[wanted] when it is `stmt` or inside it, else []."""
    found: list[cst.CSTNode] = []

    class _Find(FastVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if node is wanted:
                found.append(node)
            return not found

    _Find().walk(stmt)
    return found


def _aliases(hook: cst.FunctionDef, kwargs: str, branch: cst.CSTNode) -> set[str]:
    """`kwargs` and the names bound from it before the branch (`kw = dict(kwargs)`)."""
    names = {kwargs}

    class _Binds(FastVisitor):
        def visit_If(self, node: cst.If) -> bool:
            return node is not branch

        def visit_Assign(self, node: cst.Assign) -> None:
            if _copy_of(node.value, names):
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        names.add(target.target.value)

    _Binds().walk(hook.body)
    return names


def _copy_of(expr: cst.BaseExpression, names: set[str]) -> bool:
    """Whether `expr` is one of `names` or a copy of it (`kwargs or {}`, `dict(kwargs)`,
    `kwargs.copy()`, `{**kwargs}`); `kwargs.get("device")` is one value, not the request."""
    if isinstance(expr, cst.Name):
        return expr.value in names
    if isinstance(expr, cst.BooleanOperation):
        return _copy_of(expr.left, names) or _copy_of(expr.right, names)
    if isinstance(expr, cst.IfExp):
        return _copy_of(expr.body, names) or _copy_of(expr.orelse, names)
    if isinstance(expr, cst.Dict):
        return any(
            isinstance(e, cst.StarredDictElement) and _copy_of(e.value, names)
            for e in expr.elements
        )
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value == "copy":
            return _copy_of(func.value, names)
        if dotted(func) in ("dict", "copy.copy", "copy.deepcopy") and expr.args:
            return _copy_of(expr.args[0].value, names)
    return False


def _reads_past_self(body: cst.BaseSuite, args: str) -> bool:
    """Whether the branch reads `args` beyond `args[0]` (the size of `new_zeros(self, size)`)."""
    found = False

    class _Reads(FastVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> bool:
            nonlocal found
            if dotted(node.value) == args:
                element = node.slice[0].slice if len(node.slice) == 1 else None
                is_zero = (
                    isinstance(element, cst.Index)
                    and isinstance(element.value, cst.Integer)
                    and element.value.value == "0"
                )
                found = found or not is_zero
                return False
            return True

        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            if node.value == args:
                found = True  # `args` whole: `func(*args)`, `args[1:]` handled above

    _Reads().walk(body)
    return found
