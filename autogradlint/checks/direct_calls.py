"""AGL407 / AGL410: a Function's forward called directly, the Function instantiated and called,
or `apply` given a number of arguments its forward cannot take."""

from __future__ import annotations

import libcst as cst

from ..analysis.contract import params
from ..analysis.facts import ClassInfo
from ..analysis.flow import DISABLE, UNKNOWN, grad_mode_of
from ..analysis.names import ImportTable
from ..analysis.walk import FastVisitor
from ..edits import Edits, Fix
from ..text.constants import sequence_constants
from ..text.functions import apply_binding
from ..text.marks import alias_offsets, direct_call_offsets, instance_call_offsets
from .base import Check
from .gates import function_gate
from .reads import Reads


class DirectCalls(Check):
    """AGL407 at call sites anywhere in the module, for Functions of this file and others."""

    codes = ("AGL407", "AGL410")
    gate = function_gate()
    reads = Reads(functions=True, call_tails=(".forward(", "()("), apply_arity=True)

    def run(self) -> None:
        facts = self.ctx.facts
        self.ctx.enter(None)  # call sites can be anywhere in the module
        imported = facts.project.function_names  # Functions of other files, by their names here
        functions = {info.name for info in facts.function_classes} | imported
        if not functions:
            return
        # The whole-module visit is the expensive part: only do it when the text parsed has a
        # call (the slicer left out the `apply` calls that fit their forward).
        text = facts.parsed or facts.source
        if (
            not direct_call_offsets(text, functions)
            and not instance_call_offsets(text, functions)
            and not alias_offsets(text, functions)
        ):
            return
        scope_of: dict[int, int | None] = {}  # Function class -> the def it is defined in
        calls: list[tuple[cst.Call, str, str, tuple[int, ...], str]] = []
        function_bodies = {id(info.node) for info in facts.function_classes}
        # Other classes that bear one of those names (a test's plain `Storage` beside another
        # test's Function `Storage`): name -> the defs they are defined in
        namesakes: dict[str, list[int | None]] = {}
        imports = facts.imports
        # `op = Fn.apply`, `f = Fn.forward`: names bound to a Function's apply or forward (a
        # name bound once in the file, so every call through it is that one)
        aliases: dict[str, tuple[str, str]] = {}
        rebound: set[str] = set()
        through: list[tuple[cst.Call, str, tuple[int, ...], str, bool]] = []

        class _Calls(FastVisitor):
            def __init__(self) -> None:
                self.inside = 0  # depth of Function classes around the call
                self.defs: list[int] = []
                self.modes: list[str] = [UNKNOWN]  # grad mode set around the call

            def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
                self.defs.append(id(node))
                # A def runs when it is called, in its caller's mode, unless it sets its own
                mode = next(
                    (
                        found
                        for d in node.decorators
                        if (found := grad_mode_of(d.decorator, imports)) is not None
                    ),
                    UNKNOWN,
                )
                self.modes.append(mode)

            def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
                self.defs.pop()
                self.modes.pop()

            def visit_ClassDef(self, node: cst.ClassDef) -> None:
                if id(node) in function_bodies:
                    self.inside += 1
                    scope_of[id(node)] = self.defs[-1] if self.defs else None
                elif node.name.value in functions:
                    namesakes.setdefault(node.name.value, []).append(
                        self.defs[-1] if self.defs else None
                    )

            def visit_With(self, node: cst.With) -> None:
                self.modes.append(self.mode(node))

            def leave_With(self, original_node: cst.With) -> None:
                self.modes.pop()

            def mode(self, node: cst.With) -> str:
                for item in node.items:
                    found = grad_mode_of(item.item, imports)
                    if found is not None:
                        return found
                return self.modes[-1]

            def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
                self.inside -= id(original_node) in function_bodies

            def visit_Assign(self, node: cst.Assign) -> None:
                self.alias(node)
                self.instance(node)

            def alias(self, node: cst.Assign) -> None:
                """`op = Fn.apply`, `f = Fn.forward`: a name bound to one of them only."""
                value = node.value
                for target in node.targets:
                    name = target.target
                    if not isinstance(name, cst.Name):
                        continue
                    if (
                        name.value in aliases
                        or len(node.targets) > 1
                        or not isinstance(value, cst.Attribute)
                        or not isinstance(value.value, cst.Name)
                        or value.value.value not in functions
                        or value.attr.value not in ("apply", "forward")
                    ):
                        rebound.add(name.value)
                    else:
                        aliases[name.value] = (value.value.value, value.attr.value)

            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                how = None
                if isinstance(func, cst.Name):
                    through.append(
                        (node, func.value, tuple(self.defs), self.modes[-1], bool(self.inside))
                    )
                if (
                    isinstance(func, cst.Attribute)
                    and isinstance(func.value, cst.Name)
                    and func.value.value in functions
                ):
                    cls = func.value.value
                    if func.attr.value == "apply":
                        how = "apply"
                    elif func.attr.value == "forward":
                        how = "none" if _none_ctx(node) and not self.inside else "forward"
                elif (
                    isinstance(func, cst.Call)
                    and isinstance(func.func, cst.Name)
                    and func.func.value in functions
                ):
                    # `Fn()(x)` and the legacy `Fn(k, eps)(x)` alike: calling any instance
                    # of a Function raises (semantics D7.3)
                    cls, how = func.func.value, "instance"
                elif isinstance(func, cst.Name):
                    scope = self.defs[-1] if self.defs else None
                    held.setdefault((scope, func.value), []).append(
                        (node, tuple(self.defs), self.modes[-1])
                    )
                if how is not None:
                    calls.append((node, cls, how, tuple(self.defs), self.modes[-1]))

            def instance(self, node: cst.Assign) -> None:
                """`f = Fn(k)`: a name bound to an instance of a Function."""
                value = node.value
                instance = (
                    isinstance(value, cst.Call)
                    and isinstance(value.func, cst.Name)
                    and value.func.value in functions
                )
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        cls = value.func.value if instance else None  # type: ignore[attr-defined]
                        self.bind(target.target.value, cls)
                    else:
                        for name in _names_in(target.target):
                            self.bind(name, None)

            def visit_Param(self, node: cst.Param) -> None:
                rebound.add(node.name.value)
                self.bind(node.name.value, None)

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                if isinstance(node.target, cst.Name):
                    self.bind(node.target.value, None)

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                if isinstance(node.target, cst.Name):
                    self.bind(node.target.value, None)

            def visit_For(self, node: cst.For) -> None:
                for name in _names_in(node.target):
                    self.bind(name, None)

            def visit_AsName(self, node: cst.AsName) -> None:
                for name in _names_in(node.name):
                    self.bind(name, None)

            def bind(self, name: str, cls: str | None) -> None:
                """What a name of the innermost def holds: the Function class an instance of
                which it was assigned, or None once it is bound any other way."""
                key = (self.defs[-1] if self.defs else None, name)
                instances[key] = cls if instances.get(key, cls) == cls else None

        # `f = Fn(k); f(x)`: a name of one def bound only to instances of one Function
        held: dict[tuple[int | None, str], list[tuple[cst.Call, tuple[int, ...], str]]] = {}
        instances: dict[tuple[int | None, str], str | None] = {}
        _Calls().walk(facts.module)
        for key, uses in held.items():
            cls = instances.get(key)
            if cls is not None:
                calls.extend((node, cls, "held", scopes, mode) for node, scopes, mode in uses)
        for node, name, defs, mode, inside in through:
            if name in aliases and name not in rebound:
                cls, method = aliases[name]
                how = "apply" if method == "apply" else "forward"
                if how == "forward" and _none_ctx(node) and not inside:
                    how = "none"
                calls.append((node, cls, how, defs, mode))
        grad_off = _grad_off_calls(facts.module, imports) if calls else set()
        for node, cls, how, scopes, mode in calls:
            found = self._class_at(cls, scopes, scope_of, namesakes)
            if found is _AMBIGUOUS or found is _NOT_A_FUNCTION:
                continue  # several local classes of that name, or not a Function here
            info = found if isinstance(found, ClassInfo) else None
            if how == "apply":
                if not self._unknown_keyword(node, cls, info):
                    self._apply_arity(node, cls, info)
            elif how == "forward" and self._passes_a_ctx(cls, node, info):
                continue  # forward called as a plain function with a ctx (or stand-in)
            elif how == "none" and (mode == DISABLE or id(node) in grad_off):
                # The no-grad fast path: with grad mode off nothing is recorded either way,
                # and forward runs as a plain function on purpose (semantics D7.4).
                continue
            elif how != "apply":
                self._report_direct(node, cls, how)

    def _class_at(
        self,
        cls: str,
        scopes: tuple[int, ...],
        scope_of: dict[int, int | None],
        namesakes: dict[str, list[int | None]],
    ) -> ClassInfo | object | None:
        """The Function class a name means at a call: test modules define many local classes
        of one name, one per test function; the one in the innermost enclosing def wins, and
        when that one is a plain class (or a plain class of the file shadows an imported
        Function), the call is not a Function's."""
        candidates = [info for info in self.ctx.facts.function_classes if info.name == cls]
        others = namesakes.get(cls, [])
        if len(candidates) <= 1 and not others:
            return candidates[0] if candidates else None
        for scope in (*reversed(scopes), None):
            here = [c for c in candidates if scope_of.get(id(c.node)) == scope]
            if scope in others:
                return _NOT_A_FUNCTION
            if here:
                return here[-1]
        return _AMBIGUOUS if candidates else _NOT_A_FUNCTION

    def _apply_arity(self, call: cst.Call, cls: str, info: ClassInfo | None) -> None:
        """`Fn.apply(...)` against forward's parameters (after ctx): TypeError at the first call
        when one without a default is not given, or more are given than it takes (D10)."""
        given = self._positional_count(call)
        if given is None:
            return  # unpacking of unknown length
        keywords = [a.keyword.value for a in call.args if a.keyword is not None]
        shape = self._forward_shape(cls, info)
        if shape is None:
            return
        names, required, star, ctx_slot = shape
        total = len(names)
        known = all(names)  # a Function of this file: its parameter names are known
        if keywords and not known:
            return
        binding = apply_binding(names, required, star, given, keywords)
        missing = binding.missing
        if missing:
            plural = "s" if len(missing) > 1 else ""
            detail = f"{cls}.forward() missing {len(missing)} required positional argument{plural}"
            if known:
                detail += ": " + " and ".join(f"'{m}'" for m in missing)
        elif binding.too_many:
            # Python counts forward's own parameters: the ctx slot too, when it has one.
            low, high, got = required + ctx_slot, total + ctx_slot, given + ctx_slot
            takes = f"from {low} to {high}" if low < high else str(high)
            detail = f"{cls}.forward() takes {takes} positional arguments but {got} were given"
        else:
            return
        expected = str(total) if required == total else f"{required} to {total}"
        if star:
            expected = f"at least {required}"
        self.report(
            "AGL410",
            call,
            anchor=call.func,
            cls=cls,
            actual=given + len(keywords),
            expected=expected,
            detail=detail,
        )

    def _positional_count(self, call: cst.Call) -> int | None:
        """How many positional arguments the call passes: `*(a, b)` and `*ARGS`, for a module
        constant `ARGS = (1.0,)` bound once in the file, by their length; None for `**kwargs`
        or an unpacking of unknown length (a run-time tuple)."""
        if any(arg.star == "**" for arg in call.args):
            return None
        unpacked = [
            a.value.value for a in call.args if a.star == "*" and isinstance(a.value, cst.Name)
        ]
        facts = self.ctx.facts
        # read from the whole file, whatever the slicer kept: the slicer's pre-test reads it too
        constants = sequence_constants(facts.source or facts.parsed, unpacked) if unpacked else {}
        total = 0
        for arg in call.args:
            if arg.keyword is not None:
                continue
            value = arg.value
            size: int | None = 1
            if arg.star and isinstance(value, cst.Name):
                size = constants.get(value.value)
            elif arg.star:
                size = _literal_size(value)
            if size is None:
                return None
            total += size
        return total

    def _unknown_keyword(self, call: cst.Call, cls: str, info: ClassInfo | None) -> bool:
        """`Fn.apply(x, scale=3.0)` where `scale` is not a positional parameter of forward (of
        a Function of this file): apply binds keywords only to those, so a keyword-only
        parameter, or one forward lacks, raises at the first call. Whether it reported."""
        if any(arg.star for arg in call.args) or all(a.keyword is None for a in call.args):
            return False
        found = self._forward_names(cls, info)
        if found is None:
            return False
        names, required, kwargs = found
        if kwargs:
            return False  # `**kwargs` raises as well, but the rule need not go that far
        unknown = [
            a.keyword.value
            for a in call.args
            if a.keyword is not None and a.keyword.value not in names
        ]
        if not unknown:
            return False
        total = len(names)
        self.report(
            "AGL410",
            call,
            anchor=call.func,
            cls=cls,
            actual=len(call.args),
            expected=str(total) if required == total else f"{required} to {total}",
            detail=f"forward() got an unexpected keyword argument '{unknown[0]}'",
        )
        return True

    def _forward_names(
        self, cls: str, info: ClassInfo | None
    ) -> tuple[list[str], int, bool] | None:
        """(forward's positional input names, how many have no default, whether it takes
        **kwargs), for a Function of this file or, through the index, of another."""
        if info is None:
            signature = dict(self.ctx.facts.project.signatures).get(cls)
            if signature is None or len(signature.names) != signature.total:
                return None  # read from an older index: names unknown
            return list(signature.names), signature.required, signature.kwargs
        contract = self.ctx.contract()
        forward = contract.method(info, "forward")
        if forward is None:
            return None
        inputs = params(forward)
        if contract.method(info, "setup_context") is None:
            inputs = inputs[1:]
        required = sum(1 for p in inputs if p.default is None)
        kwargs = isinstance(forward.params.star_kwarg, cst.Param)
        return [p.name.value for p in inputs], required, kwargs

    def _forward_shape(
        self, cls: str, info: ClassInfo | None
    ) -> tuple[list[str], int, bool, int] | None:
        """(forward's input names after ctx, how many have no default, whether it takes
        *args, 1 when forward has a ctx slot)."""
        contract = self.ctx.contract()
        if info is None:
            signature = dict(self.ctx.facts.project.signatures).get(cls)
            if signature is None:
                return None
            ctx_slot = 0 if signature.setup_context else 1
            named = len(signature.names) == signature.total  # not from an older index
            names = list(signature.names) if named else [""] * signature.total
            return names, signature.required, signature.star, ctx_slot
        forward = contract.method(info, "forward")
        if forward is None or any(p.default is None for p in forward.params.kwonly_params):
            return None  # a keyword-only input apply must be given: not counted here
        # keyword-only inputs with defaults: apply's positional arguments still fill exactly
        # the positional parameters (as the index counts a Function of another file)
        inputs = params(forward)
        ctx_slot = 0
        if contract.method(info, "setup_context") is None:
            inputs, ctx_slot = inputs[1:], 1  # forward's first parameter is the ctx
        required = sum(1 for p in inputs if p.default is None)
        star = isinstance(forward.params.star_arg, cst.Param)
        return [p.name.value for p in inputs], required, star, ctx_slot

    def _passes_a_ctx(self, cls: str, call: cst.Call, info: ClassInfo | None) -> bool:
        """True when the call supplies forward's ctx slot itself (`Base.forward(ctx, x)`,
        `Fn.forward(None, x)`): a deliberate plain call. Only a call one argument short is the
        forgotten `.apply`."""
        contract = self.ctx.contract()
        given = len([a for a in call.args if a.keyword is None])
        if info is None:  # a Function of another file: its forward, as the index read it
            signature = dict(self.ctx.facts.project.signatures).get(cls)
            if signature is None or signature.setup_context or any(a.star for a in call.args):
                return True
            return given >= signature.required + 1
        forward = contract.method(info, "forward")
        if forward is None or any(arg.star for arg in call.args):
            return True
        if contract.method(info, "setup_context") is not None:
            return True  # forward has no ctx slot: a direct call is ambiguous
        required = sum(1 for p in params(forward) if p.default is None)
        return given >= required

    def _report_direct(self, call: cst.Call, cls: str, how: str) -> None:
        shown = {
            "forward": f"{cls}.forward(...)",
            "none": f"{cls}.forward(None, ...)",
            "instance": f"{cls}()(...)",
            "held": f"an instance of {cls}, called",
        }[how]
        func = call.func
        if how == "held" or (isinstance(func, cst.Call) and func.args):
            # The arguments went to the instance (a legacy Function's `__init__`), which its
            # forward reads: `Fn.apply(x)` alone would drop them, so no rewrite is offered.
            if how == "instance":
                shown = f"{cls}(...)(...)"
            self.report("AGL407", call, anchor=call.func, cls=cls, shown=shown)
            return

        def build(edits: Edits) -> None:
            def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
                assert isinstance(updated, cst.Call)  # the call this edit was made for
                args = updated.args[1:] if how == "none" else updated.args
                return updated.with_changes(
                    func=cst.Attribute(cst.Name(cls), cst.Name("apply")), args=args
                )

            edits.nodes[id(call)] = rewrite

        fix = Fix("unsafe", call, build, f"call `{cls}.apply(...)`")
        self.report("AGL407", call, anchor=call.func, fix=fix, cls=cls, shown=shown)


def _none_ctx(call: cst.Call) -> bool:
    """`Fn.forward(None, ...)`: a literal None in the ctx slot (semantics D7.2)."""
    first = call.args[0] if call.args else None
    return (
        first is not None
        and first.keyword is None
        and not first.star
        and isinstance(first.value, cst.Name)
        and first.value.value == "None"
    )


def _literal_size(value: cst.BaseExpression) -> int | None:
    """The length of `(a, b)` / `[a, b]` with no starred element (the libcst twin of
    text.constants.literal_size); None for anything else."""
    if isinstance(value, (cst.Tuple, cst.List)) and not any(
        isinstance(e, cst.StarredElement) for e in value.elements
    ):
        return len(value.elements)
    return None


def _names_in(target: cst.BaseExpression) -> list[str]:
    """The plain names a `for` or `as` target binds (`a`, `(a, b)`, `[a, *b]`)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names_in(e.value)]
    if isinstance(target, cst.StarredElement):
        return _names_in(target.value)
    return []


_AMBIGUOUS = object()
_NOT_A_FUNCTION = object()


def _grad_off_calls(module: cst.Module, imports: ImportTable) -> set[int]:
    """The calls on paths where a test has just found grad mode off: the else branch of `if
    torch.is_grad_enabled():`, the body of `if not torch.is_grad_enabled():`, and what follows
    an `if torch.is_grad_enabled():` whose body always returns."""
    found: set[int] = set()

    def is_grad_test(expr: cst.BaseExpression) -> bool:
        return (
            isinstance(expr, cst.Call)
            and not expr.args
            and (imports.resolve(expr.func) or "")
            in ("torch.is_grad_enabled", "torch.autograd.grad_mode.is_grad_enabled")
        )

    def calls_in(node: cst.CSTNode) -> None:
        class _Calls(FastVisitor):
            def visit_Call(self, call: cst.Call) -> None:
                found.add(id(call))

        _Calls().walk(node)

    class _Tests(FastVisitor):
        def visit_If(self, node: cst.If) -> None:
            test = node.test
            if is_grad_test(test) and node.orelse is not None:
                calls_in(node.orelse)
            elif (
                isinstance(test, cst.UnaryOperation)
                and isinstance(test.operator, cst.Not)
                and is_grad_test(test.expression)
            ):
                calls_in(node.body)

        def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
            for index, statement in enumerate(node.body):
                if (
                    isinstance(statement, cst.If)
                    and is_grad_test(statement.test)
                    and statement.orelse is None
                    and _always_returns(statement.body)
                ):
                    for after in node.body[index + 1 :]:
                        calls_in(after)

    _Tests().walk(module)
    return found


def _always_returns(suite: cst.BaseSuite) -> bool:
    """Whether a suite ends in `return` or `raise` (its last statement, at its own level)."""
    if isinstance(suite, cst.IndentedBlock):
        last = suite.body[-1] if suite.body else None
        if isinstance(last, cst.SimpleStatementLine):
            return isinstance(last.body[-1], (cst.Return, cst.Raise))
        return False
    if isinstance(suite, cst.SimpleStatementSuite):
        return isinstance(suite.body[-1], (cst.Return, cst.Raise))
    return False
