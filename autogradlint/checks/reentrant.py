"""Family A (AGL1xx): building or walking an autograd graph inside Function.backward."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

import libcst as cst

from ..analysis.compiled import compiled_callee
from ..analysis.flow import DEFAULT, DISABLE, ENABLE, CallSite, MethodFlow, analyse_method
from ..analysis.methods import Method
from ..analysis.names import ImportTable, dotted
from ..analysis.provenance import CTX, EXTERNAL, SAVED, Binding, Provenance
from ..analysis.walk import FastVisitor
from ..edits import Fix
from ..preconditions import Unproven
from ..settings import HELPER_DEPTH
from . import reentrant_fix_builders as fixes
from .base import Check
from .common import backward_methods, is_literal, keyword, positional, source_of
from .fix_proofs import backward_called_directly, decorator_may_catch, torch_unreachable
from .gates import function_gate
from .reads import Reads

GRAD_FUNCTIONS = frozenset({"torch.autograd.grad"})
BACKWARD_FUNCTIONS = frozenset({"torch.autograd.backward"})


class ReentrantAutograd(Check):
    """AGL101-AGL105: one pass over each backward, classifying every grad/backward call."""

    codes = ("AGL101", "AGL102", "AGL103", "AGL104", "AGL105")
    gate = function_gate(b"def backward", custom_ops=True)
    reads = Reads(functions=True, custom_ops=True)

    def run(self) -> None:
        facts = self.ctx.facts
        bodies = [(info.subject, info.name, info.node, m) for info, m in backward_methods(facts)]
        # A backward step written apart: `def _attention_backward_op(ctx: FunctionCtx, g)`
        # reading `ctx.saved_tensors`, which a Function's backward calls through a ctx
        # attribute (diffusers' `ctx.backward_op(ctx, grad_out)`): the type and the read say
        # it runs inside a backward, in its grad mode, whatever calls it.
        bodies += [
            (None, name, None, function)
            for name, function in facts.functions.items()
            if ctx_backward_step(function, facts.imports)
        ]
        for subject, name, node, method in bodies:
            self.ctx.enter(subject)
            flow = self.ctx.flow(method)
            self.method = method
            self.cls = name
            self.owner = name if node is not None else None
            self._outside: dict[str, tuple[Unproven, ...]] = {}
            route = Route(self._checkpoint_guarded(flow), self._builds_private_leaves(flow))
            self.imports = facts.imports  # the file the scanned body is in (see _helper_call)
            self._scan(flow, Provenance(flow, facts.imports), route)

    def _scan(self, flow: MethodFlow, provenance: Provenance, route: Route) -> None:
        """Classify every grad/backward call of `flow`, and follow the helpers it calls."""
        for site in flow.calls:
            if site.in_nested_def:
                continue  # a closure runs at an unknown time, under an unknown grad mode
            kind, root = self._classify(site.node, flow, provenance.ctx_name)
            if kind == "grad" and root is not None:
                self._grad_call(site, root, provenance, flow, route)
            elif kind == "backward" and root is not None:
                self._backward_call(site, root, provenance, route)
            elif kind is None and len(route.path) < HELPER_DEPTH:
                self._helper_call(site, flow, provenance, route)

    def _helper_call(
        self, site: CallSite, flow: MethodFlow, provenance: Provenance, route: Route
    ) -> None:
        if self.imports is not self.ctx.facts.imports:
            return  # inside another file's helper: its own helpers are not followed
        found = self._helper_of(site.node, flow)
        imports = self.ctx.facts.imports
        if found is not None:
            name, helper = found
            self._follow(site, name, helper, imports, None, provenance, route)
            return
        elsewhere = self._imported_helper(site.node, flow)
        if elsewhere is not None:
            name, helper, imports = elsewhere
            self._follow(site, name, helper, imports, None, provenance, route)
            return
        for method in self._methods_called(site.node, flow, provenance.ctx_name):
            func = site.node.func
            assert isinstance(func, cst.Attribute)
            receiver = func.value if method.binds_receiver else None
            name = f"{method.owner}.{method.node.name.value}()"
            self._follow(site, name, method.node, imports, receiver, provenance, route)

    def _follow(
        self,
        site: CallSite,
        name: str,
        helper: cst.FunctionDef,
        imports: ImportTable,
        receiver: cst.BaseExpression | None,
        provenance: Provenance,
        route: Route,
    ) -> None:
        """Scan a helper backward calls, its parameters bound to what the call passes (and
        a method's first parameter to the object it is called on)."""
        if name in route.path or helper is self.method:
            return  # recursion: its calls were classified on the way in
        if imports is self.ctx.facts.imports:
            inner = self.ctx.flow(helper, site.mode)
        else:
            inner = analyse_method(helper, imports, site.mode)
        bound = _bind(site.node, inner, provenance, site, receiver)
        if bound is None:
            return  # `*args` at the call: the parameters cannot be matched to the arguments
        deeper = Route(
            route.guarded or self._checkpoint_guarded(inner),
            route.private or self._builds_private_leaves(inner),
            route.at or site,
            (*route.path, name),
        )
        outer, self.imports = self.imports, imports
        try:
            self._scan(inner, Provenance(inner, imports, bound), deeper)
        finally:
            self.imports = outer

    def _methods_called(
        self, call: cst.Call, flow: MethodFlow, ctx_name: str | None
    ) -> list[Method]:
        """The methods of the file's own classes that `obj.name(...)` may run when `obj` is an
        object, not a class or a module: `block.backward_pass(y, dy)` on the blocks of a
        reversible network held on ctx. Every method of that name whose class can hold a
        graph call: what the object is, the file does not say; what it can run, it does."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return []
        name = func.attr.value
        if name in FUNCTION_METHODS or name.startswith("__"):
            return []
        facts = self.ctx.facts
        text = dotted(func.value)
        if text is not None:
            head = text.split(".", 1)[0]
            if text == ctx_name:
                return []  # ctx's own API (`ctx.save_for_backward`, `ctx.mark_dirty`)
            if head not in flow.defs and (
                facts.imports.is_imported(head)
                or head in facts.compiled_names
                or head in facts.class_nodes
            ):
                return []  # a module's function, a kernel, a class's own method
        if compiled_callee(call, facts, self.ctx.settings) is not None:
            return []
        return self.ctx.methods.graph_helpers(name)

    def _imported_helper(
        self, call: cst.Call, flow: MethodFlow
    ) -> tuple[str, cst.FunctionDef, ImportTable] | None:
        """A function of another file of the project that backward calls (`from .utils import
        recompute`; `utils.recompute(...)`), when its text can hold a graph call: read from
        that file (the summaries' project view), one call deep."""
        written = dotted(call.func)
        facts = self.ctx.facts
        if written is None:
            return None
        head = written.split(".", 1)[0]
        if head in flow.defs or not facts.imports.is_imported(head):
            return None
        if facts.imports.resolve_dotted(written).split(".", 1)[0] == "torch":
            return None  # torch's own functions are not the project's helpers
        found = self.ctx.summaries.foreign_graph_helper(written)
        if found is None:
            return None
        text, bindings = found
        try:
            parsed = cst.parse_module(text)
        except Exception:  # noqa: BLE001 - libcst raises bare exceptions on odd input
            return None
        node = parsed.body[0] if parsed.body else None
        if not isinstance(node, cst.FunctionDef):
            return None
        return f"{written}()", node, ImportTable(bindings)

    def _helper_of(self, call: cst.Call, flow: MethodFlow) -> tuple[str, cst.FunctionDef] | None:
        """The function of this file a call runs: a module-level function (not shadowed by a
        local), or a static method called through its class (`Rev._backward_pass(...)`),
        except another Function's own forward/backward (those are checked on their own)."""
        facts = self.ctx.facts
        func = call.func
        if isinstance(func, cst.Name):
            if func.value in flow.defs or func.value not in facts.functions:
                return None
            return f"{func.value}()", facts.functions[func.value]
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            return None
        owner, attr = func.value.value, func.attr.value
        node = facts.class_nodes.get(owner)
        if node is None or owner in flow.defs or attr in FUNCTION_METHODS:
            return None
        for stmt in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == attr:
                if any(dotted(d.decorator) == "staticmethod" for d in stmt.decorators):
                    return f"{owner}.{attr}()", stmt
        return None

    # ------------------------------------------------------------------------------------
    def _classify(
        self, call: cst.Call, flow: MethodFlow, ctx_name: str | None
    ) -> tuple[str | None, cst.BaseExpression | None]:
        imports = self.imports
        name = imports.resolve(call.func) or ""
        if name in GRAD_FUNCTIONS:
            return "grad", positional(call, 0, "outputs")
        if name in BACKWARD_FUNCTIONS:
            return "backward", positional(call, 0, "tensors")
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            if self._is_tensor_receiver(func.value, call, flow, ctx_name):
                return "backward", func.value
        return None, None

    def _is_tensor_receiver(
        self,
        receiver: cst.BaseExpression,
        call: cst.Call,
        flow: MethodFlow,
        ctx_name: str | None,
    ) -> bool:
        """Tell `loss.backward()` from `ext_cuda.backward(...)` and `Base.backward(ctx, g)`."""
        first = positional(call, 0)
        if isinstance(first, cst.Name) and first.value == ctx_name:
            return False  # another Function's static backward used as a helper
        facts = self.ctx.facts
        if compiled_callee(call, facts, self.ctx.settings) is not None:
            return False  # `ext_cuda.backward(...)`: a kernel's entry point, not a graph walk
        if isinstance(receiver, cst.Call) and self._returns_module(receiver, flow):
            return False
        text = dotted(receiver)
        if text is not None:
            head = text.split(".", 1)[0]
            if head == ctx_name or facts.imports.is_imported(head) or head in facts.compiled_names:
                return False
            if head[:1].isupper() or any(info.name == head for info in facts.classes):
                return False
            if head not in flow.defs:
                return False  # a module-level object, not a tensor built here
        return True

    def _returns_module(self, call: cst.Call, flow: MethodFlow) -> bool:
        """`super()`, a configured extension loader, or a call with no arguments to a function
        of the module or an import (`get_ext()`, `SomeOpBuilder().load()`): what it returns is
        an object such as a compiled module, never a tensor computed here. `y.sum()` is a
        method of a local and stays a tensor."""
        name = self.ctx.facts.imports.resolve(call.func) or dotted(call.func) or ""
        if name == "super" or any(fnmatchcase(name, p) for p in self.ctx.settings.loaders):
            return True
        if call.args:
            return False
        func = call.func
        while isinstance(func, cst.Attribute):
            func = func.value
        if isinstance(func, cst.Call):
            return self._returns_module(func, flow)
        return isinstance(func, cst.Name) and func.value not in flow.defs

    @staticmethod
    def _checkpoint_guarded(flow: MethodFlow) -> bool:
        for site in flow.calls:
            name = dotted(site.node.func) or ""
            if name.endswith("_is_checkpoint_valid"):
                return True
        return False

    @staticmethod
    def _builds_private_leaves(flow: MethodFlow) -> bool:
        """A recompute on private leaves (`x.detach().requires_grad_()`) is first-order by design.
        `requires_grad_()` on a tensor unpacked from `ctx.saved_tensors` itself makes no private
        leaf: the gradient is taken of the outer graph's own tensor (A3.3)."""
        for site in flow.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "detach":
                return True
            if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_":
                if not _unpacked_saved(func.value, flow, site.order):
                    return True
            name = dotted(func) or ""
            if name.endswith("detach_variable"):
                return True
        return False

    # ------------------------------------------------------------------------------------
    def _grad_call(
        self,
        site: CallSite,
        outputs: cst.BaseExpression,
        provenance: Provenance,
        flow: MethodFlow,
        route: Route,
    ) -> None:
        module = self.ctx.facts.module
        producers = provenance.producers(outputs, site.order, site.mode)
        shown = source_of(module, outputs)
        method = self.method
        where = route.where(site)
        call = fixes.GradCall(method, flow, provenance, site, outputs)
        if producers and producers <= {DEFAULT}:
            fix = (
                None
                if route.at
                else fixes.wrap_in_enable_grad(call, self._unproven_outside("AGL101"))
            )
            # Under create_graph=True backward runs with grad mode on, so the same call builds
            # and walks a graph there, and drops the second-order term (A3.2). AGL101's fix
            # leaves that silent bug (AGL105 reports it once the fix is applied), so the help
            # names it now.
            second = self._drops_second_order(site, provenance, flow, route)
            self._report(
                "AGL101", where, fix, outputs=shown, advice=SECOND_ORDER_DROPPED if second else ""
            )
            return
        if producers and DISABLE in producers and producers <= {DEFAULT, DISABLE}:
            fix = (
                None
                if route.at
                else fixes.no_grad_to_enable_grad(call, self._unproven_outside("AGL102"))
            )
            self._report("AGL102", where, fix, outputs=shown)
            return
        if ENABLE not in producers:
            return
        if self._drops_second_order(site, provenance, flow, route):
            fix = None if route.at else fixes.forward_create_graph(method, flow, site.node)
            self._report("AGL105", where, fix)

    @staticmethod
    def _drops_second_order(
        site: CallSite, provenance: Provenance, flow: MethodFlow, route: Route
    ) -> bool:
        """Whether a grad call that builds its graph when backward runs under create_graph
        returns gradients without one: no create_graph, differentiating with respect to the
        outer graph's tensors (saved, or held on ctx), outside a first-order-by-design
        recompute on private leaves and a backward whose grad mode is off."""
        if route.private or flow.base_mode == DISABLE:
            return False
        create_graph = keyword(site.node, "create_graph")
        if create_graph is not None and not is_literal(create_graph, "False"):
            return False
        inputs = positional(site.node, 1, "inputs")
        return inputs is not None and bool(provenance.sources(inputs, site.order) & {SAVED, CTX})

    def _backward_call(
        self, site: CallSite, root: cst.BaseExpression, provenance: Provenance, route: Route
    ) -> None:
        producers = provenance.producers(root, site.order, site.mode)
        if producers <= {EXTERNAL}:
            return  # the graph was built elsewhere (e.g. by a recompute step) and is replayed
        shown = source_of(self.ctx.facts.module, root)
        where = route.where(site)
        # A body that makes private leaves (detach / requires_grad_) is a checkpoint-style
        # recompute: saved tensors still feeding it are usually targets or indices, not leaves.
        if SAVED in provenance.sources(root, site.order) and not route.private:
            fix = None
            if route.at is None:
                fix = fixes.backward_to_autograd_grad(self.method, provenance.flow, site, root)
            self._report("AGL103", where, fix, root=shown)
        elif not route.guarded:
            self._report("AGL104", where, None, root=shown)

    def _unproven_outside(self, rule_id: str) -> tuple[Unproven, ...]:
        """The preconditions of a grad-mode fix that the method's body cannot answer: no
        decorator of backward and no direct caller can catch the error it raises, and torch
        is bound where the fix writes it (or importing it changes nothing). Once per method."""
        if rule_id not in self._outside:
            found: list[Unproven] = []
            caught = decorator_may_catch(self.ctx, self.method)
            if caught is None and self.owner is not None:
                caught = backward_called_directly(self.ctx, self.owner)
            if caught is not None:
                found.append(Unproven(rule_id, "nothing-catches", caught))
            unbound = torch_unreachable(self.ctx, self.owner, self.method)
            if unbound is not None:
                found.append(Unproven(rule_id, "torch-in-scope", unbound))
            self._outside[rule_id] = tuple(found)
        return self._outside[rule_id]

    def _report(
        self, rule_id: str, where: tuple[cst.Call, str], fix: Fix | None, **fields: str
    ) -> None:
        node, via = where
        self.report(rule_id, node, anchor=node.func, fix=fix, cls=self.cls, via=via, **fields)


def _unpacked_saved(expr: cst.BaseExpression, flow: MethodFlow, order: int) -> bool:
    """`q` after `q, k = ctx.saved_tensors`: the saved tensor itself."""
    if not isinstance(expr, cst.Name):
        return False
    definition = flow.definition_before(expr.value, order)
    value = definition.expression if definition is not None else None
    return (
        definition is not None
        and definition.kind == "unpack"
        and isinstance(value, cst.Attribute)
        and value.attr.value == "saved_tensors"
    )


FUNCTION_CTX = frozenset(
    {"torch.autograd.function.FunctionCtx", "torch.autograd.function.BackwardCFunction"}
)


def ctx_backward_step(function: cst.FunctionDef, imports: ImportTable) -> bool:
    """A module-level function whose first parameter is annotated as a Function's ctx and
    that reads `ctx.saved_tensors`: it can only run inside a backward."""
    params = [*function.params.posonly_params, *function.params.params]
    if not params or params[0].annotation is None:
        return False
    annotation = params[0].annotation.annotation
    if (imports.resolve(annotation) or dotted(annotation) or "") not in FUNCTION_CTX:
        return False
    ctx = params[0].name.value
    found = False

    class _Reads(FastVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            nonlocal found
            if node.attr.value == "saved_tensors" and dotted(node.value) == ctx:
                found = True

    _Reads().walk(function.body)
    return found


# What AGL101's help adds when the call, where it runs, also drops second order (AGL105).
SECOND_ORDER_DROPPED = (
    " Under create_graph=True, where it runs, it also drops the second-order term (AGL105):"
    " pass `create_graph=torch.is_grad_enabled()` to it as well."
)

FUNCTION_METHODS = frozenset({"forward", "backward", "setup_context", "jvp", "vjp", "vmap"})


@dataclass(frozen=True)
class Route:
    """How the scan reached a body: whether backward (or a helper on the way) guards a nested
    backward or builds private leaves, the call in backward that leads here, and the helpers
    passed. In a helper a finding is reported at that call: that is where the grad mode
    comes from."""

    guarded: bool
    private: bool
    at: CallSite | None = None
    path: tuple[str, ...] = ()

    def where(self, site: CallSite) -> tuple[cst.Call, str]:
        """Where to report a call found on this route, and how the headline names the way."""
        if self.at is None:
            return site.node, ""
        return self.at.node, f" (in `{' -> '.join(self.path)}`)"


def _bind(
    call: cst.Call,
    helper: MethodFlow,
    provenance: Provenance,
    site: CallSite,
    receiver: cst.BaseExpression | None = None,
) -> dict[str, Binding] | None:
    """What each parameter of `helper` receives at `call`, as the caller sees it (`receiver`:
    the object a method is called on, which its first parameter receives). `**kwargs` at the
    call leaves the parameters it may fill unbound; `*args` makes the positions unknowable."""
    if any(arg.star == "*" for arg in call.args):
        return None
    bound: dict[str, Binding] = {}
    params = helper.params
    if receiver is not None and params:
        bound[params[0]] = _binding(receiver, provenance, site)
        params = params[1:]
    positional_args = [arg for arg in call.args if arg.keyword is None and not arg.star]
    for name, arg in zip(params, positional_args, strict=False):
        bound[name] = _binding(arg.value, provenance, site)
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in helper.params:
            bound[arg.keyword.value] = _binding(arg.value, provenance, site)
    return bound


def _binding(value: cst.BaseExpression, provenance: Provenance, site: CallSite) -> Binding:
    return Binding(
        frozenset(provenance.producers(value, site.order, site.mode)),
        frozenset(provenance.sources(value, site.order)),
    )
