"""Family A (AGL1xx): building or walking an autograd graph inside Function.backward."""

from __future__ import annotations

import libcst as cst

from ..analysis.flow import DEFAULT, DISABLE, ENABLE, CallSite, MethodFlow
from ..analysis.names import dotted
from ..analysis.provenance import CTX, EXTERNAL, SAVED, Provenance
from . import reentrant_fix_builders as fixes
from .base import Check
from .common import backward_methods, is_literal, keyword, positional, source_of

GRAD_FUNCTIONS = frozenset({"torch.autograd.grad"})
BACKWARD_FUNCTIONS = frozenset({"torch.autograd.backward"})


class ReentrantAutograd(Check):
    """AGL101-AGL105: one pass over each backward, classifying every grad/backward call."""

    def run(self) -> None:
        facts = self.ctx.facts
        for info, method in backward_methods(facts):
            self.ctx.enter(info.node)
            flow = self.ctx.flow(method)
            provenance = Provenance(flow, facts.imports)
            guarded = self._checkpoint_guarded(flow)
            private = self._builds_private_leaves(flow)
            self.method = method
            for site in flow.calls:
                if site.in_nested_def:
                    continue  # a closure runs at an unknown time, under an unknown grad mode
                kind, root = self._classify(site.node, flow, info.name)
                if kind == "grad" and root is not None:
                    self._grad_call(site, root, provenance, flow, info.name, private)
                elif kind == "backward" and root is not None:
                    self._backward_call(site, root, provenance, flow, info.name, guarded, private)

    # ------------------------------------------------------------------------------------
    def _classify(
        self, call: cst.Call, flow: MethodFlow, cls: str
    ) -> tuple[str | None, cst.BaseExpression | None]:
        imports = self.ctx.facts.imports
        name = imports.resolve(call.func) or ""
        if name in GRAD_FUNCTIONS:
            return "grad", positional(call, 0, "outputs")
        if name in BACKWARD_FUNCTIONS:
            return "backward", positional(call, 0, "tensors")
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            if self._is_tensor_receiver(func.value, call, flow):
                return "backward", func.value
        return None, None

    def _is_tensor_receiver(
        self, receiver: cst.BaseExpression, call: cst.Call, flow: MethodFlow
    ) -> bool:
        """Tell `loss.backward()` from `ext_cuda.backward(...)` and `Base.backward(ctx, g)`."""
        ctx_name = flow.params[0] if flow.params else None
        first = positional(call, 0)
        if isinstance(first, cst.Name) and first.value == ctx_name:
            return False  # another Function's static backward used as a helper
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name):
            if receiver.func.value == "super":
                return False
        text = dotted(receiver)
        if text is not None:
            head = text.split(".", 1)[0]
            facts = self.ctx.facts
            if head == ctx_name or facts.imports.is_imported(head) or head in facts.compiled_names:
                return False
            if head[:1].isupper() or any(info.name == head for info in facts.classes):
                return False
            if head not in flow.defs:
                return False  # a module-level object, not a tensor built here
        return True

    @staticmethod
    def _checkpoint_guarded(flow: MethodFlow) -> bool:
        for site in flow.calls:
            name = dotted(site.node.func) or ""
            if name.endswith("_is_checkpoint_valid"):
                return True
        return False

    @staticmethod
    def _builds_private_leaves(flow: MethodFlow) -> bool:
        """A recompute on private leaves (`x.detach().requires_grad_()`) is first-order by design."""
        for site in flow.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("requires_grad_", "detach"):
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
        cls: str,
        private: bool,
    ) -> None:
        module = self.ctx.facts.module
        producers = provenance.producers(outputs, site.order, site.mode)
        shown = source_of(module, outputs)
        method = self.method
        if producers and producers <= {DEFAULT}:
            fix = fixes.wrap_in_enable_grad(method, flow, provenance, site, outputs)
            self.report("AGL101", site.node, anchor=site.node.func, fix=fix, cls=cls, outputs=shown)
            return
        if producers and DISABLE in producers and producers <= {DEFAULT, DISABLE}:
            fix = fixes.no_grad_to_enable_grad(method, flow, provenance, site, outputs)
            self.report("AGL102", site.node, anchor=site.node.func, fix=fix, cls=cls, outputs=shown)
            return
        if ENABLE not in producers or private or flow.base_mode == DISABLE:
            return
        create_graph = keyword(site.node, "create_graph")
        if create_graph is not None and not is_literal(create_graph, "False"):
            return
        inputs = positional(site.node, 1, "inputs")
        if inputs is None:
            return
        if provenance.sources(inputs, site.order) & {SAVED, CTX}:
            fix = fixes.forward_create_graph(method, flow, site.node)
            self.report("AGL105", site.node, anchor=site.node.func, fix=fix, cls=cls)

    def _backward_call(
        self,
        site: CallSite,
        root: cst.BaseExpression,
        provenance: Provenance,
        flow: MethodFlow,
        cls: str,
        guarded: bool,
        private: bool,
    ) -> None:
        producers = provenance.producers(root, site.order, site.mode)
        if producers <= {EXTERNAL}:
            return  # the graph was built elsewhere (e.g. by a recompute step) and is replayed
        shown = source_of(self.ctx.facts.module, root)
        # A body that makes private leaves (detach / requires_grad_) is a checkpoint-style
        # recompute: saved tensors still feeding it are usually targets or indices, not leaves.
        if SAVED in provenance.sources(root, site.order) and not private:
            fix = fixes.backward_to_autograd_grad(self.method, flow, site, root)
            self.report("AGL103", site.node, anchor=site.node.func, fix=fix, cls=cls, root=shown)
        elif not guarded:
            self.report("AGL104", site.node, anchor=site.node.func, cls=cls, root=shown)
