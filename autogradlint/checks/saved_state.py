"""AGL403 / AGL404: what forward keeps for backward (tensors on ctx, save_for_backward calls)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from ..analysis.apply_sites import TENSOR as ANNOTATED_TENSOR
from ..analysis.compiled import compiled_callee
from ..analysis.contract import (
    METADATA_FUNCTIONS,
    METADATA_USES,
    ForwardInputs,
    is_tensor_annotation,
    is_tensor_container_annotation,
    number_default,
    plain_inputs,
    returned_names,
    save_for_backward_calls,
)
from ..analysis.facts import ClassInfo
from ..analysis.flow import MethodFlow
from ..analysis.helper_effects import helper_calls
from ..analysis.names import dotted
from ..analysis.source_text import code_of
from ..analysis.tensor_kinds import OTHER, TENSOR, TensorKinds, receiver_root
from ..analysis.walk import FastVisitor
from .base import Check, CheckContext
from .common import source_of, statement_in_block
from .gates import function_gate
from .reads import Reads
from .tensor_evidence import gradient_evidence, inherited_forwards, picked_compiled


class SavedState(Check):
    """AGL403 (tensors stashed as ctx attributes) and AGL404 (save_for_backward misuse)."""

    codes = ("AGL403", "AGL404")
    gate = function_gate(custom_ops=True)
    reads = Reads(functions=True, custom_ops=True)
    # With a forward inherited from another module: the backward of this file whose reads
    # the findings are reported at, and the names only its gradients prove to be tensors
    # (the other file reports the rest itself).
    _read_in: cst.FunctionDef | None = None
    _only: set[str] | None = None
    # A forward with no backward to read here, whose subclasses in other modules bring one:
    # those modules judge what it keeps by their backward's reads (oracle K67)
    _deferred: bool = False

    def run(self) -> None:
        contract = self.ctx.contract()
        for info, seen in contract.forwards():
            self.ctx.enter(info.node)
            self._kept_by(info, seen)
        self._deferred = False
        # forward (or setup_context) of another module keeps what this backward reads: only
        # this file has the gradients that prove an input a tensor (oracle K17)
        for info, backward, seen, proven in inherited_forwards(contract, unread_there=True):
            self.ctx.enter(info.node)
            self._read_in, self._only = backward, proven
            try:
                self._kept_by(info, seen)
            finally:
                self._read_in = self._only = None
        for op in self.ctx.facts.custom_ops:
            if op.setup_context is None or op.schema is None:
                continue
            self.ctx.enter(op.subject)
            positions = {
                i
                for i, p in enumerate(op.schema.params.params)
                if p.annotation is not None and is_tensor_annotation(p.annotation.annotation)
            }
            readers = [op.backward] if op.backward is not None else None
            total = len(op.schema.params.params)
            self._setup_context(op.op, op.setup_context, positions, readers, total)

    def _kept_by(self, info: ClassInfo, seen: ForwardInputs) -> None:
        """What the forward (or setup_context) of a class keeps on ctx and saves."""
        contract = self.ctx.contract()
        readers = self._readers(info)
        self._deferred = (
            readers is None and self._read_in is None and _subclassed_elsewhere(self.ctx, info)
        )
        # an input backward returns a gradient for is a tensor (autograd refuses one for
        # anything else), annotated or not (shown by tests/oracle, K19, K20)
        tensors = seen.tensors | gradient_evidence(contract, info, seen.flow)
        tensors |= self._annotated_by_callers(info, seen)
        if seen.ctx_name is None:
            # the setup_context style: forward has no ctx, setup_context keeps what
            # backward needs (semantics D3: the same checks apply there)
            setup = contract.method(info, "setup_context")
            if setup is not None:
                # forward's container annotation (`ws: List[Tensor]`) carries to the name
                # setup_context unpacks at its position, as in forward (oracle K65)
                positions = {
                    i
                    for i, p in enumerate(seen.inputs)
                    if p.name.value in tensors
                    or (
                        p.annotation is not None
                        and is_tensor_container_annotation(p.annotation.annotation)
                    )
                }
                if readers is not None:  # setup_context keeps; it does not read
                    readers = [method for method in readers if method is not setup]
                self._setup_context(info.name, setup, positions, readers, len(seen.inputs))
                self._helper_keeps_setup(info, seen, setup, readers)
                self._setup_saves(info, seen, setup)
            return
        kinds = TensorKinds(
            seen.flow,
            self.ctx.facts.imports,
            tensors,
            plain_inputs(seen.flow),
            lambda call: (
                compiled_callee(call, self.ctx.facts, self.ctx.settings) is not None
                or picked_compiled(call, seen.flow, self.ctx.summaries)
            ),
        )
        self._ctx_stash(
            info.name,
            seen.flow,
            seen.ctx_name,
            tensors,
            readers,
            forward=kinds,
            parts=_vararg_parts(seen.flow, seen.vararg),
        )
        self._save_for_backward(info, seen, seen.ctx_name)
        self._helper_saves(info, seen.flow, seen.ctx_name)
        self._helper_keeps_forward(info, seen, readers)

    def _annotated_by_callers(self, info: ClassInfo, seen: ForwardInputs) -> set[str]:
        """Inputs every `apply` call of the file passes a parameter its function annotates
        `Tensor` (or `Optional[Tensor]`) for: Megatron's `fused_apply_mla_rope_for_q(...,
        cu_seqlens_q: Optional[torch.Tensor] = None)` handing it to `ApplyMLARotaryEmbQ`."""
        found: set[str] = set()
        for slot, param in enumerate(seen.inputs):
            passed = self.ctx.apply_sites.passed(info.name, slot)
            if passed and all(kind == ANNOTATED_TENSOR for kind in passed):
                found.add(param.name.value)
        return found

    def _setup_context(
        self,
        name: str,
        setup: cst.FunctionDef,
        positions: set[int],
        readers: list[cst.FunctionDef] | None,
        total: int,
    ) -> None:
        """Tensors setup_context keeps as ctx attributes: forward's tensor inputs, unpacked from
        `inputs` (`x, w = inputs`, `inputs[0]`), and its output."""
        flow = self.ctx.flow(setup)
        if len(flow.params) < 3:
            return
        # torch.library passes them by keyword (and may add keyword_only_inputs); a
        # Function's setup_context gets them in order
        ctx_name, inputs_name, output_name = flow.params[:3]
        if "inputs" in flow.params and "output" in flow.params:
            inputs_name, output_name = "inputs", "output"
        tensors = {output_name}
        stashed: list[tuple[cst.CSTNode, str, str]] = []
        for node, _order in flow.statements:
            if not isinstance(node, cst.Assign) or len(node.targets) != 1:
                continue
            target, value = node.targets[0].target, node.value
            if isinstance(value, cst.Name) and value.value == inputs_name:
                elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else []
                starred = [i for i, e in enumerate(elements) if isinstance(e, cst.StarredElement)]
                for index, element in enumerate(elements):
                    if starred and index > starred[0]:
                        # after `*rest` the elements count from the end
                        index = total - (len(elements) - index)
                    if index not in positions or (starred and index == starred[0]):
                        continue
                    if isinstance(element.value, cst.Name):
                        tensors.add(element.value.value)
                    elif _is_ctx_attribute(element.value, ctx_name):  # `(ctx.x,) = inputs`
                        attr = element.value.attr.value  # type: ignore[attr-defined]
                        stashed.append((node, attr, f"{inputs_name}[{index}]"))
            elif isinstance(target, cst.Name) and isinstance(value, cst.Subscript):
                constant = _constant_index(value, inputs_name)
                if constant is not None and constant in positions:
                    tensors.add(target.value)
        self._ctx_stash(name, flow, ctx_name, tensors, readers, inputs_name, positions, stashed)

    def _readers(self, info: ClassInfo) -> list[cst.FunctionDef] | None:
        """The methods that read what forward keeps: the class's own others, and backward
        wherever it is defined (or those of this file's subclasses inheriting forward); None
        when backward cannot be read (then every attribute counts as read for its values)."""
        readers = [m for name, m in info.methods.items() if name != "forward"]
        if "backward" not in info.methods:
            contract = self.ctx.contract()
            inherited = contract.method(info, "backward")
            if inherited is not None:
                return [*readers, inherited]
            # the backwards of this file's subclasses that inherit this forward
            forward = info.methods.get("forward")
            found = [
                backward
                for other in contract.classes()
                if other is not info
                and forward is not None
                and contract.method(other, "forward") is forward
                and (backward := contract.method(other, "backward")) is not None
            ]
            if not found:
                return None
            readers += found
        return readers

    def _ctx_stash(
        self,
        name: str,
        flow: MethodFlow,
        ctx_name: str,
        tensors: set[str],
        readers: list[cst.FunctionDef] | None,
        inputs_name: str | None = None,
        positions: frozenset[int] | set[int] = frozenset(),
        stashed: list[tuple[cst.CSTNode, str, str]] | None = None,
        forward: TensorKinds | None = None,
        parts: frozenset[str] = frozenset(),
    ) -> None:
        """`ctx.attr = value` for a value that holds a tensor: one of `tensors` (names of
        setup_context), or, in forward (`forward` given), an input known to be a tensor or a
        view of one, or an output forward made as a tensor."""
        outputs = returned_names(flow) if forward is not None else set()
        # inputs annotated as tensors, or as a builtin container of them (`List[Tensor]`: the
        # list holds the caller's very tensors, as a list literal of them does)
        declared = {
            p.name.value
            for p in (*flow.function.params.posonly_params, *flow.function.params.params)
            if p.annotation is not None
            and (
                is_tensor_annotation(p.annotation.annotation)
                or is_tensor_container_annotation(p.annotation.annotation)
            )
        }
        stash = _Stash(tensors, inputs_name, positions, forward, parts, outputs, declared)
        # (the store, the attribute, the tensor's name, its position in a kept tuple literal)
        found: list[tuple[cst.CSTNode, str, str, int | None]] = [
            (*kept, None) for kept in stashed or []
        ]
        for node, order in flow.statements:
            if not isinstance(node, cst.Assign):
                continue
            for target in node.targets:
                pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []
                if isinstance(target.target, cst.Tuple) and isinstance(node.value, cst.Tuple):
                    pairs = [
                        (t.value, v.value)
                        for t, v in zip(target.target.elements, node.value.elements, strict=False)
                    ]
                elif isinstance(target.target, cst.Tuple):
                    pairs = [(t.value, node.value) for t in target.target.elements]
                else:
                    pairs = [(target.target, node.value)]
                for t, v in pairs:
                    if (
                        isinstance(t, cst.Attribute)
                        and isinstance(t.value, cst.Name)
                        and t.value.value == ctx_name
                    ):
                        # a list or tuple literal holds the very tensors (`ctx.ws = [w]`, K18)
                        # each with its position, which backward may unpack it by (`a, b =
                        # ctx.kept`), when none is starred
                        elements = v.elements if isinstance(v, (cst.List, cst.Tuple)) else ()
                        starred = any(isinstance(e, cst.StarredElement) for e in elements)
                        values = (
                            [
                                (None if starred else i, e.value)
                                for i, e in enumerate(elements)
                                if not isinstance(e, cst.StarredElement)
                            ]
                            if isinstance(v, (cst.List, cst.Tuple))
                            else [(None, v)]
                        )
                        for element, value in values:
                            shown = _kept(_copied_container(value), node, order, stash)
                            if shown is not None:
                                found.append((node, t.attr.value, shown, element))
        if not found:
            return
        harmless = self._harmless(readers, ctx_name)
        saved = {
            arg.value.value
            for site in save_for_backward_calls(flow, ctx_name)
            for arg in site.node.args
            if isinstance(arg.value, cst.Name)
        }
        done: set[tuple[int, str]] = set()  # one finding per store and attribute
        for node, attr, shown, element in found:
            if (id(node), attr) in done or harmless(attr, element):
                continue
            done.add((id(node), attr))
            if forward is not None and _saved_on_other_branch(forward, flow, ctx_name, node, shown):
                continue
            if shown in saved:  # saved already: only the way back is wrong
                advice = (
                    f"`{shown}` is already saved with `ctx.save_for_backward`: read it back "
                    f"from `ctx.saved_tensors` instead of `ctx.{attr}`, and drop this assignment"
                )
            else:
                advice = (
                    f"save `{shown}` with `ctx.save_for_backward` and read it back from "
                    "`ctx.saved_tensors`"
                )
            self._report_kept(node, name, attr, shown, advice)

    def _report_kept(self, node: cst.CSTNode, cls: str, attr: str, shown: str, advice: str) -> None:
        """AGL403 where the tensor is kept; or, kept by a forward of another module, at this
        file's backward reading it back (where the gradient that proves it a tensor is)."""
        if self._read_in is None:
            if not self._deferred:
                self.report("AGL403", node, cls=cls, attr=attr, name=shown, advice=advice)
            return
        if self._only is not None and shown.split("[", 1)[0] not in self._only:
            return  # proven a tensor in its own file: reported there
        flow = self.ctx.flow(self._read_in)
        ctx_name = flow.params[0] if flow.params else "ctx"
        read = next(
            (
                a
                for a in flow.attribute_reads
                if isinstance(a.value, cst.Name)
                and a.value.value == ctx_name
                and a.attr.value == attr
            ),
            None,
        )
        if read is not None:
            where = "the forward this class inherits from another module keeps it"
            self.report(
                "AGL403", read, cls=cls, attr=attr, name=shown, advice=f"{advice} ({where})"
            )

    def _harmless(
        self, readers: list[cst.FunctionDef] | None, ctx_name: str
    ) -> Callable[[str, int | None], bool]:
        """Whether no other method reads a ctx attribute for its values (semantics D3.1 needs
        such a read): it reads it only for shape/dtype/device or length, directly
        (`ctx.w.shape`, `zeros_like(ctx.w)`, `len(ctx.params)`) or through a local alias (`w =
        ctx.w`), or only as the `inputs=` of `torch.autograd.grad` (D3.3: its identity), or
        not at all. When the readers are unknown (None), or one hands ctx itself on
        (`_backward(ctx, g)`), only the first two count."""
        uses: dict[str, list[bool]] = {}
        whole = readers is None
        for method in readers or ():
            own = [p.name.value for p in (*method.params.posonly_params, *method.params.params)]
            visitor = _MetadataUses(("ctx", ctx_name, *own[:1]), uses)
            visitor.walk(method.body)
            whole = whole or visitor.whole
        metadata_only = {attr for attr, flags in uses.items() if flags and all(flags)}
        if whole:
            return lambda attr, element: attr in metadata_only

        def unread(key: str) -> bool:
            return key in metadata_only or key not in uses

        def harmless(attr: str, element: int | None = None) -> bool:
            # `a, b = ctx.kept` reads element 0 wherever `a` is read (`kept[0]`), and element 1
            # wherever `b` is: a kept tuple's tensor counts only when its own element is read
            if not unread(attr):
                return False
            if element is not None:
                return unread(f"{attr}[{element}]")
            return all(unread(key) for key in uses if key.startswith(f"{attr}["))

        return harmless

    def _save_for_backward(self, info: ClassInfo, seen: ForwardInputs, ctx_name: str) -> None:
        flow = seen.flow
        inputs = seen.inputs
        scalars = {
            p.name.value
            for p in inputs
            if p.annotation is not None and _scalar_annotation(p.annotation.annotation)
        } | _number_defaults(inputs)
        calls = save_for_backward_calls(flow, ctx_name)
        module = self.ctx.facts.module
        for site in calls:
            # One finding per call, naming every non-tensor it gets: one fix edits one call.
            bad = [
                (position, arg.value)
                for position, arg in enumerate(site.node.args)
                if self._non_tensor(arg.value, scalars)
            ]
            if not bad:
                continue
            shown = [f"`{source_of(module, value, 28)}`" for _, value in bad]
            first, anchor = bad[0]
            problem = f"gets a non-tensor: {shown[0]}"
            if len(bad) > 1:
                problem = f"gets {len(bad)} non-tensors: {shown[0]} and {len(bad) - 1} more"
            self.report(
                "AGL404",
                anchor,
                cls=info.name,
                problem=problem,
                consequence=f"Non-tensors: {', '.join(shown)}. "
                f'PyTorch raises "TypeError: save_for_backward can only save '
                f'variables, but argument {first} is of type ..." at the first call. '
                "Keep non-tensors as ctx attributes (`ctx.shape = x.shape`).",
            )
        method = flow.function
        for earlier, later in zip(calls, calls[1:], strict=False):
            a = statement_in_block(method, earlier.node)
            b = statement_in_block(method, later.node)
            if (
                a is not None
                and b is not None
                and a[0] is b[0]
                and not _saves_all_of(later.node, earlier.node)
            ):
                self.report(
                    "AGL404",
                    later.node,
                    cls=info.name,
                    problem="is called a second time",
                    consequence="The second call replaces the tensors of the first, so backward "
                    "unpacks the wrong values. Save every tensor in one call.",
                )

    def _setup_saves(self, info: ClassInfo, seen: ForwardInputs, setup: cst.FunctionDef) -> None:
        """The save_for_backward checks on setup_context, which saves for the setup_context
        style: a non-tensor (`x.shape`, `1.5`) and a second call raise the same (D4.1, D4.3).
        Its inputs arrive packed in `inputs`, so only what a call's own text shows counts."""
        flow = self.ctx.flow(setup)
        if not flow.params:
            return
        ctx_name = flow.params[0]
        packed = ForwardInputs(flow, ctx_name, [], None, set())
        self._save_for_backward(info, packed, ctx_name)
        self._helper_saves(info, flow, ctx_name)

    def _helper_saves(self, info: ClassInfo, flow: MethodFlow, ctx_name: str) -> None:
        """`save_for_backward` called again by a helper forward hands ctx to (in a loop over
        the tensors, or after forward's own call): each call replaces the last (D4.3)."""
        calls: list[tuple[int, int, cst.Call | None]] = [
            (site.order, 1, None) for site in save_for_backward_calls(flow, ctx_name)
        ]
        for site, effects, bound in helper_calls(self.ctx.summaries, flow.calls):
            count = sum(
                effects.saves.get(slot, 0)
                for slot, value in bound
                if isinstance(value, cst.Name) and value.value == ctx_name
            )
            if count:
                calls.append((site.order, count, site.node))
        total = 0
        for _order, count, node in sorted(calls, key=lambda c: c[0]):
            total += count
            if total > 1 and node is not None:
                self.report(
                    "AGL404",
                    node,
                    cls=info.name,
                    problem="is called a second time (in a helper)",
                    consequence="The second call replaces the tensors of the first, so backward "
                    "unpacks the wrong values. Save every tensor in one call.",
                )
                return

    def _helper_keeps_forward(
        self, info: ClassInfo, seen: ForwardInputs, readers: list[cst.FunctionDef] | None
    ) -> None:
        if seen.ctx_name is not None:
            tensors = seen.tensors | returned_names(seen.flow)
            tensors |= gradient_evidence(self.ctx.contract(), info, seen.flow)
            self._helper_keeps(info, seen.flow, seen.ctx_name, tensors, readers)

    def _helper_keeps_setup(
        self,
        info: ClassInfo,
        seen: ForwardInputs,
        setup: cst.FunctionDef,
        readers: list[cst.FunctionDef] | None,
    ) -> None:
        """setup_context's version: the tensors are what it unpacks from `inputs` at a tensor
        input's position (`x, w, *_ = inputs`), and the output."""
        flow = self.ctx.flow(setup)
        if len(flow.params) < 3:
            return
        ctx_name, inputs_name, output_name = flow.params[:3]
        evidence = seen.tensors | gradient_evidence(self.ctx.contract(), info, seen.flow)
        positions = {i for i, p in enumerate(seen.inputs) if p.name.value in evidence}
        tensors = {output_name}
        for name, definitions in flow.defs.items():
            for d in definitions:
                value = d.expression
                if (
                    d.kind == "unpack"
                    and isinstance(value, cst.Name)
                    and value.value == inputs_name
                    and d.index in positions
                ):
                    tensors.add(name)
        self._helper_keeps(info, flow, ctx_name, tensors, readers)

    def _helper_keeps(
        self,
        info: ClassInfo,
        flow: MethodFlow,
        ctx_name: str,
        tensors: set[str],
        readers: list[cst.FunctionDef] | None,
    ) -> None:
        """A tensor handed, with ctx, to a helper that keeps it as a ctx attribute (`ctx.w =
        w`, `setattr(ctx, name, w)`), one or two calls deep: reported at the call."""
        harmless = self._harmless(readers, ctx_name)
        home = self.ctx.contract().foreign_paths.get(id(flow.function))  # helpers of its file
        for site, effects, bound in helper_calls(self.ctx.summaries, flow.calls, home):
            given = dict(bound)  # slot -> argument (VARARG: the last one; names are not there)
            for slot, value in bound:
                if not (isinstance(value, cst.Name) and value.value == ctx_name):
                    continue
                for kept, attr in effects.keeps.get(slot, []):
                    held = given.get(kept)
                    if not (isinstance(held, cst.Name) and held.value in tensors):
                        continue
                    if isinstance(attr, int):  # the name is an argument of this call
                        named = given.get(attr)
                        text = (
                            named.evaluated_value if isinstance(named, cst.SimpleString) else None
                        )
                        attr = text if isinstance(text, str) else "?"
                    if harmless(attr, None):
                        continue
                    shown = held.value
                    advice = (
                        f"`{code_of(site.node)}` keeps it: save `{shown}` with "
                        "`ctx.save_for_backward` and read it back from `ctx.saved_tensors`"
                    )
                    self._report_kept(site.node, info.name, attr, shown, advice)
                    return

    @staticmethod
    def _non_tensor(value: cst.BaseExpression, scalars: set[str]) -> bool:
        if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString)):
            return True
        if isinstance(value, cst.Name):
            return value.value in scalars or value.value in ("True", "False")
        if isinstance(value, cst.Attribute) and value.attr.value in ("shape", "dtype", "device"):
            return True
        if isinstance(value, cst.Call):
            func = value.func
            if isinstance(func, cst.Attribute) and func.attr.value in (
                "size",
                "dim",
                "item",
                "numel",
                "tolist",
            ):
                return True
            if isinstance(func, cst.Name) and func.value in ("len", "int", "float", "bool"):
                return True
        return False


@dataclass(frozen=True)
class _Stash:
    """What `_ctx_stash` knows of the method keeping values on ctx."""

    tensors: set[str]  # names known to hold tensors (setup_context's)
    inputs_name: str | None  # setup_context's `inputs`
    positions: frozenset[int] | set[int]  # the tensor inputs' positions in it
    forward: TensorKinds | None  # forward's kinds (None in setup_context)
    parts: frozenset[str]  # a vararg split into parts
    outputs: set[str]  # the names forward returns
    declared: set[str]  # inputs annotated as tensors


def _kept(value: cst.BaseExpression, node: cst.CSTNode, order: int, stash: _Stash) -> str | None:
    """The tensor a value kept on ctx holds, as the finding names it, if any."""
    index = _constant_index(value, stash.inputs_name) if stash.inputs_name else None
    if index is not None and index in stash.positions:  # `ctx.x = inputs[0]`
        return f"{stash.inputs_name}[{index}]"
    # `ctx.w = w`, `ctx.w = w[0]`, `ctx.w = w.detach()`: the value, or a view of it (the same
    # storage, the same hazard)
    root = receiver_root(value)
    kinds = stash.forward
    if root is None:
        return None
    if kinds is None:
        return root if root in stash.tensors else None
    if _slices_part(value, stash.parts) or _names_part(kinds, root, node, order, stash.parts):
        return None
    held = _holds_tensor(kinds, root, node, order, stash.outputs, stash.declared)
    return root if held else None


def _subclassed_elsewhere(ctx: CheckContext, info: ClassInfo) -> bool:
    """Whether the project index knows a subclass of the class in another file."""
    return any(name == info.name and sub for name, sub, _where in ctx.facts.project.uses)


def _copied_container(value: cst.BaseExpression) -> cst.BaseExpression:
    """`ws` of `tuple(ws)` or `list(ws)`: a new container of the very same tensors, kept as
    the container it copies is (oracle K66), as a list literal of them is (K18)."""
    if (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value in ("tuple", "list")
        and len(value.args) == 1
        and value.args[0].keyword is None
        and not value.args[0].star
    ):
        return value.args[0].value
    return value


def _number_defaults(inputs: list[cst.Param]) -> set[str]:
    """Unannotated inputs whose default is a number literal (`scale=2.0`): numbers, as far as
    forward's own text says."""
    return {p.name.value for p in inputs if number_default(p)}


def _saves_all_of(later: cst.Call, earlier: cst.Call) -> bool:
    """Whether the later call saves every tensor the earlier one did (`save(x)` then
    `save(x, w)`): it replaces the first (D4.3), but nothing backward can unpack is lost."""
    if any(arg.star for arg in (*later.args, *earlier.args)):
        return False
    kept = {code_of(arg.value) for arg in later.args}
    return all(code_of(arg.value) in kept for arg in earlier.args)


def _is_ctx_attribute(expr: cst.BaseExpression, ctx_name: str) -> bool:
    return (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == ctx_name
    )


def _constant_index(expr: cst.BaseExpression, name: str | None) -> int | None:
    """`inputs[0]`: the constant index into `name`, else None."""
    if not (isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name)):
        return None
    if expr.value.value != name or len(expr.slice) != 1:
        return None
    index = expr.slice[0].slice
    if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
        return int(index.value.value)
    return None


class _MetadataUses(FastVisitor):
    """Every read of a ctx attribute in one method, and whether it is for metadata only; a
    local bound to one (`w = ctx.w`) stands for it, and any other use of that local counts."""

    def __init__(self, ctx_names: tuple[str, ...], uses: dict[str, list[bool]]) -> None:
        self.ctx_names = ctx_names
        self.uses = uses
        self.aliases: dict[str, str] = {}  # local name -> ctx attribute
        self.handled: set[int] = set()  # nodes already counted by their parent
        self.whole = False  # ctx itself handed on: any attribute may be read

    def _attr(self, expr: cst.BaseExpression) -> str | None:
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            if expr.value.value in self.ctx_names:
                return expr.attr.value
        if isinstance(expr, cst.Name):
            return self.aliases.get(expr.value)
        return None

    def _use(self, expr: cst.BaseExpression, metadata: bool) -> None:
        attr = self._attr(expr)
        if attr is not None and id(expr) not in self.handled:
            self.handled.add(id(expr))
            self.uses.setdefault(attr, []).append(metadata)

    def visit_Assign(self, node: cst.Assign) -> bool:
        attr = self._attr(node.value)
        if attr is not None and isinstance(node.value, cst.Attribute):
            self.handled.add(id(node.value))  # counted at the alias's uses
        else:
            # The value is read before the targets are bound: `w = w.detach()` reads the old
            # alias, then rebinds the name.
            self.walk(node.value)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.handled.add(id(target.target))
                if attr is not None and isinstance(node.value, cst.Attribute):
                    self.aliases[target.target.value] = attr
                else:
                    self.aliases.pop(target.target.value, None)
            elif (
                isinstance(target.target, (cst.Tuple, cst.List))
                and attr is not None
                and isinstance(node.value, cst.Attribute)
            ):
                # `in_map, weights = ctx.inputs`: each element stands for its part of the
                # attribute (`inputs[0]`), or for all of it after a starred one
                elements = target.target.elements
                starred = any(isinstance(e, cst.StarredElement) for e in elements)
                for position, element in enumerate(elements):
                    if isinstance(element.value, cst.Name):
                        self.handled.add(id(element.value))
                        part = attr if starred else f"{attr}[{position}]"
                        self.aliases[element.value.value] = part
            else:
                self.walk(target.target)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.handled.add(id(node.attr))  # `.w` in `x.w` is an attribute name, not a variable
        inner = node.value
        if self._attr(inner) is not None:
            self._use(inner, node.attr.value in METADATA_USES)
        elif self._attr(node) is not None and isinstance(inner, cst.Name):
            self.handled.add(id(inner))  # `ctx` itself in `ctx.w`

    def visit_Call(self, node: cst.Call) -> None:
        written = dotted(node.func) or ""
        callee = written.rsplit(".", 1)[-1]
        targets = _grad_inputs(node, written)
        if targets is not None:
            # `torch.autograd.grad(y, inputs=(x, *ctx.params))`: the tensors to differentiate
            # with respect to, named; their values are not read there (semantics D3.3).
            for element in _elements(targets):
                self._use(element, True)
        for arg in node.args:
            self._use(arg.value, callee in _METADATA_CALLS and arg.keyword is None)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # `ctx.bias is None` asks whether there is a tensor, not what it holds.
        if all(isinstance(t.operator, (cst.Is, cst.IsNot)) for t in node.comparisons):
            for operand in (node.left, *(t.comparator for t in node.comparisons)):
                self._use(operand, True)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.ctx_names and id(node) not in self.handled:
            self.whole = True  # `helper(ctx, g)`, `return ctx`: what is read is not here
        self._use(node, False)

    def leave_Attribute(self, original_node: cst.Attribute) -> None:
        self._use(original_node, False)


_METADATA_CALLS = METADATA_FUNCTIONS | {"len"}
_GRAD_CALLS = ("autograd.grad", "autograd.backward")


def _grad_inputs(call: cst.Call, written: str) -> cst.BaseExpression | None:
    """The `inputs` of `torch.autograd.grad(outputs, inputs, ...)`, `torch.autograd.backward(
    ..., inputs=...)` or `y.backward(g, inputs=...)`."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "inputs":
            return arg.value
    if written.endswith("autograd.grad") or written == "grad":
        plain = [arg for arg in call.args if arg.keyword is None and not arg.star]
        return plain[1].value if len(plain) > 1 else None
    return None


def _elements(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The tensors a sequence expression names: `(x, *ctx.params)`, `xs + ctx.weights`."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [e for element in expr.elements for e in _elements(element.value)]
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _elements(expr.left) + _elements(expr.right)
    return [expr]


def _holds_tensor(
    kinds: TensorKinds,
    name: str,
    store: cst.CSTNode,
    order: int,
    outputs: set[str],
    declared: set[str],
) -> bool:
    """Whether forward's `name`, at the statement `store` keeping it on ctx, holds a tensor the
    caller can reach: a forward input known to be a tensor (or a view of one; an input
    `declared` a tensor by its annotation, whatever it is rebound to that may be one), or an
    output forward made as one. Not what an `if` around the store proves to be an int or
    None."""
    if kinds.narrowed_plain(name, store):
        return False
    if kinds.roots(name, store, order) & kinds.tensor_params:
        return True
    kind = kinds.name_kind(name, store, order)
    if name in declared and kind != OTHER:
        return True  # an input annotated `Tensor` keeps its declared type when rebound
    reaching = kinds.reaching(name, store, order)
    if (
        kind == TENSOR
        and any(d.kind == "param" for d in reaching)
        and not any(isinstance(d.value, (cst.Tuple, cst.List)) for d in reaching)
    ):
        # `if x is None: x = torch.randn(...)`: the input when given, a tensor otherwise: the
        # variable is a tensor on every path
        return True
    return name in outputs and kind == TENSOR


def _vararg_parts(flow: MethodFlow, vararg: str | None) -> frozenset[str]:
    """The vararg when forward splits it into parts by slices (`keys = inputs[:n]`, `vals =
    inputs[n:2 * n]`): `*args` then packs inputs of different kinds, and that some parts hold
    tensors says nothing of the others. Empty when it is not split so."""
    if vararg is None:
        return frozenset()
    shapes = {
        code_of(value.slice[0].slice)
        for definitions in flow.defs.values()
        for d in definitions
        if isinstance(value := d.expression, cst.Subscript)
        and _slices_part(value, frozenset({vararg}))
    }
    return frozenset({vararg}) if len(shapes) >= 2 else frozenset()


def _slices_part(expr: cst.BaseExpression, parts: frozenset[str]) -> bool:
    """`inputs[a:b]` of a split vararg: a tuple of whichever inputs lie there."""
    return (
        isinstance(expr, cst.Subscript)
        and isinstance(expr.value, cst.Name)
        and expr.value.value in parts
        and len(expr.slice) == 1
        and isinstance(expr.slice[0].slice, cst.Slice)
    )


def _names_part(
    kinds: TensorKinds, name: str, store: cst.CSTNode, order: int, parts: frozenset[str]
) -> bool:
    """Whether every value `name` may hold at `store` is a part of a split vararg."""
    if not parts:
        return False
    reaching = kinds.reaching(name, store, order)
    return bool(reaching) and all(
        d.kind == "assign" and d.expression is not None and _slices_part(d.expression, parts)
        for d in reaching
    )


def _saved_on_other_branch(
    kinds: TensorKinds, flow: MethodFlow, ctx_name: str, store: cst.CSTNode, name: str
) -> bool:
    """Whether the other branch of an `if` around the store hands the same value to
    `save_for_backward`: the branch chooses between the two on purpose (an int cannot be
    saved; `if old_torch:` keeps the attribute only where saving did not work)."""
    around = dict(kinds.branches.path(store) or ())
    for site in save_for_backward_calls(flow, ctx_name):
        if not any(isinstance(a.value, cst.Name) and a.value.value == name for a in site.node.args):
            continue
        for key, suite in kinds.branches.path(site.node) or ():
            if key in around and around[key] != suite:
                return True
    return False


_SCALARS = frozenset({"int", "float", "bool", "str"})


def _scalar_annotation(annotation: cst.BaseExpression) -> bool:
    """`int`, `float`, `bool`, `str`, or `Optional[...]` of one: a parameter that is never a
    tensor."""
    if (
        isinstance(annotation, cst.Subscript)
        and isinstance(annotation.value, cst.Name)
        and annotation.value.value == "Optional"
        and len(annotation.slice) == 1
        and isinstance(annotation.slice[0].slice, cst.Index)
    ):
        annotation = annotation.slice[0].slice.value
    return isinstance(annotation, cst.Name) and annotation.value in _SCALARS
