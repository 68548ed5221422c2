"""Family B (AGL2xx): gradient tensors handed to compiled code without a layout or copy guard."""

from __future__ import annotations

import ast
import builtins
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import ClassVar

import libcst as cst

from ..analysis.compiled import (
    ReadEvidence,
    compiled_by_evidence,
    compiled_callee,
    evidence_for,
    member_evidence,
    read_evidence,
)
from ..analysis.flow import CallSite, Definition, MethodFlow
from ..analysis.names import dotted
from ..analysis.op_names import built_names
from ..analysis.reading import (
    COMPILED,
    PYTHON,
    TORCH,
    UNREAD_SOURCE,
    Unreadable,
    imported_code,
    unreadable_import,
)
from ..analysis.source_text import code_of
from ..analysis.summaries import Reach, last_value, may_pass
from ..analysis.torch_api import CONTAINER_METHODS, CTX_METHODS, TENSOR_METHODS
from ..analysis.walk import FastVisitor
from ..edits import Edits, Fix
from ..native.modules import module_file
from ..preconditions import Unproven, verdict
from ..text.ast_walk import ast_dotted, parse_quietly
from ..text.ast_walk import walk as walk_ast
from .base import Check
from .collective_layout import CollectiveReads
from .common import BackwardOf, backward_methods, positional, source_of
from .fix_proofs import subclassed_elsewhere, torch_unreachable
from .gates import function_gate
from .gradient_copy import copy_gradient_first
from .gradient_trace import GradientTrace, GradState
from .guard_decorators import unless_guarded
from .reads import Reads

_DYNAMIC_IMPORTS = frozenset({"importlib.import_module", "__import__"})
_DYNAMIC = "comes from a dynamic import (`importlib.import_module`)"

# `len(g)`, `max(...)`: never a project function (the file is not scanned for its definitions)
_BUILTINS = frozenset(dir(builtins))


def _launch_evidence(reach: Reach) -> ReadEvidence:
    """What a Triton launch in a helper says: it is given other tensors' strides, or none."""
    if not reach.strides:
        return ReadEvidence(
            False, None, f"The launch of `{reach.callee}` is given no strides for it."
        )
    text = _other_strides(f"The launch of `{reach.callee}`", reach.strides, "the gradient's")
    return ReadEvidence(False, None, f"{text}.")


# What the help says of a launch given other tensors' strides (AGL203 does not fire on it).
OTHER_STRIDES = "is read at the wrong places"


def _other_strides(launch: str, others: Iterable[str], owner: str) -> str:
    """The pytorch#194719 sentence: a launch indexes the gradient with other tensors' strides."""
    given = ", ".join(f"`{n}.stride(...)`" for n in sorted(others))
    return (
        f"{launch} is given {given}, not {owner} own: a gradient laid out differently (the "
        f"narrow view `torch.cat`'s backward hands each input) {OTHER_STRIDES}"
    )


class CompiledGradients(Check):
    """AGL201 (raw read) and AGL202 (write into a shared grad buffer)."""

    codes: ClassVar[tuple[str, ...]] = ("AGL201", "AGL202")
    gate = function_gate(b"def backward", custom_ops=True)
    reads = Reads(functions=True, custom_ops=True)
    # The rule a raw read is reported under: AGL203 follows saved forward inputs through the
    # same machinery (checks/saved_inputs.py), the tensor it tracks being all that differs.
    read_code: ClassVar[str] = "AGL201"
    _collectives: CollectiveReads | None = None  # made on first use, per file
    _tree: ast.Module | None = None  # the file's whole `ast`, when the apply callers are read

    def run(self) -> None:
        facts = self.ctx.facts
        for info, method in backward_methods(facts):
            self.ctx.enter(info.subject)
            unless_guarded(self.ctx, method, functools.partial(self._method, info, method))

    def _method(self, info: BackwardOf, method: cst.FunctionDef) -> None:
        """AGL201 / AGL202 for the calls of one backward."""
        flow = self.ctx.flow(method)
        self.loaded: set[str] = set()  # names bound to loaded modules (by evidence)
        self._tracer = GradientTrace(self._origin)
        self.method = method
        self.info = info
        self._none_why: dict[int, str | None] = {}  # per method: why a gradient may be None
        self._nested = _nested_defs(method)
        self._methods: frozenset[str] | None = None
        self._raw_address = False  # the call being resolved is handed a gradient's address
        self._via = ""  # set while a Function's forward is read for the backward calling it
        grads = self._tracked(flow)
        if grads:
            self._calls(flow, grads, info.name)

    def _tracked(self, flow: MethodFlow) -> set[str]:
        """The names of backward whose values are followed: its gradient parameters."""
        grads = set(flow.params[1:])
        if flow.vararg:
            grads.add(flow.vararg)
        return grads

    def _calls(self, flow: MethodFlow, grads: set[str], cls: str) -> None:
        """AGL201 / AGL202 for the calls of `flow` that take one of `grads`."""
        facts = self.ctx.facts
        for site in flow.calls:
            if not self._via and self._through_apply(site, flow, grads, cls):
                continue
            if not site.in_nested_def and self._collective(site, flow, grads, cls):
                continue
            callee = compiled_callee(site.node, facts, self.ctx.settings, self.ctx.native)
            if (
                callee is None
                and not site.in_nested_def
                and self._takes_gradient(site, flow, grads)
            ):
                self._raw_address = any(
                    (state := self._state(arg.value, flow, grads, site.order)) is not None
                    and state.pointer
                    for arg in site.node.args
                )
                if self._may_lead_somewhere(site.node, flow):
                    callee = compiled_by_evidence(site.node, facts, self.ctx.native)
                    callee = callee or self._loaded_module_call(site, flow)
                if callee is None:
                    where = self._where(site, flow)
                    if isinstance(where, Unreadable):
                        self._unreadable(site, flow, grads, where, cls)
                    elif isinstance(where, tuple):
                        self._check_call(site, where, flow, grads, cls)
                    elif isinstance(where, list):
                        self._check_first(site, where, flow, grads, cls)
                    elif where == PYTHON:
                        self._through_helper(site, flow, grads, cls)
                    continue
            if callee is not None:
                self._check_call(site, callee, flow, grads, cls)

    def _through_apply(self, site: CallSite, flow: MethodFlow, grads: set[str], cls: str) -> bool:
        """`Other.apply(ctx, g, ...)` in backward, `Other` a Function of this file: its forward
        gets the gradient (tiny-cuda-nn computes a backward as another Function, so that it
        has a double backward), and what that forward hands it to is read as backward's own
        calls. Whether the call was such an `apply`."""
        written = dotted(site.node.func) or ""
        owner, _, last = written.rpartition(".")
        if last != "apply" or not owner or "." in owner or owner == self.info.name:
            return False
        contract = self.ctx.contract()
        found = {c.name: c for c in contract.classes()}.get(owner)
        forward = contract.method(found, "forward") if found is not None else None
        if forward is None or contract.is_foreign(forward):
            return False
        inner = self.ctx.flow(forward)
        params = inner.params[1:]  # after ctx: what `apply` is handed, in order
        handed: dict[str, GradState] = {}
        for position, arg in enumerate(site.node.args):
            if arg.star or arg.keyword is not None or position >= len(params):
                break
            state = self._state(arg.value, flow, grads, site.order)
            if state is not None and not (state.read_safe and state.write_safe):
                handed[params[position]] = state  # guarded as far as it was when handed
        if not handed:
            return True
        method, self.method = self.method, forward
        self._via = f"`{owner}.apply` hands it to `{owner}.forward`, where "
        self._tracer.handed = handed
        self._tracer.forget(inner)  # traced afresh: another `apply` hands other states
        try:
            self._calls(inner, set(handed), cls)
        finally:
            self.method, self._via, self._tracer.handed = method, "", {}
        return True

    def _collective(self, site: CallSite, flow: MethodFlow, grads: set[str], cls: str) -> bool:
        """AGL201, a warning, at each gradient not made contiguous that reaches a
        `torch.distributed` collective, in this call or a project function it calls (NCCL
        raises, B2.11). Whether the call is a collective itself (nothing else to read)."""

        def unguarded(value: cst.BaseExpression) -> bool:
            state = self._state(value, flow, grads, site.order)
            return state is not None and not state.read_safe and not state.pointer

        if self._collectives is None:
            self._collectives = CollectiveReads(self.ctx)
        itself, reads = self._collectives.of_call(site.node, unguarded)
        for read in reads:
            if read.when and not _passes(site.node, read.when, read.params):
                continue  # under `if sizes is not None:` in the helper, not passed here
            self._raw_read(
                read.arg.value,
                None,
                "warning",
                callee=read.callee,
                cls=cls,
                evidence=read.evidence(),
            )
        return itself

    # --- one call deeper ---------------------------------------------------------------------
    def _through_helper(self, site: CallSite, flow: MethodFlow, grads: set[str], cls: str) -> None:
        """A gradient handed to a project function (this file's or an imported one) that
        passes it on to compiled code: judged by that function's summary."""
        call = site.node
        written = dotted(call.func)
        if written is None:
            return
        head = written.split(".", 1)[0]
        if head in flow.defs:
            self._through_member(site, flow, grads, cls, written)
            return
        facts = self.ctx.facts
        if facts.imports.resolve_dotted(written).split(".", 1)[0] == "torch":
            return  # torch's own functions go through ATen, which honours strides
        if not (
            head in facts.functions
            or head in facts.class_nodes
            or facts.imports.is_imported(head)
            or (head not in _BUILTINS and self.ctx.summaries.files.own.defines(head))
        ):
            return  # a builtin or a name this file does not define: nothing to follow
        summaries = self.ctx.summaries
        found = summaries.function(written)
        if found is None:
            return
        summary = summaries.summary(*found)
        if summary is None or not summary.reaches:
            return
        for position, arg in enumerate(call.args):
            state = self._state(arg.value, flow, grads, site.order)
            if state is None or any(a.star for a in call.args[: position + 1]):
                continue
            index = position if arg.keyword is None else None
            if arg.keyword is not None and arg.keyword.value in summary.params:
                index = summary.params.index(arg.keyword.value)
            for reach in summary.reaches:
                if reach.when and not _passes(call, reach.when, summary.params):
                    continue  # under `if flag:`, `flag` left at its False/None default
                if reach.param == index and self._helper_reach(arg, state, reach, flow, cls):
                    break  # one finding per argument

    def _helper_reach(
        self, arg: cst.Arg, state: GradState, reach: Reach, flow: MethodFlow, cls: str
    ) -> bool:
        """AGL202 when the C++ at the end writes into the gradient and no copy was made on
        the way; else AGL201 when it reads it unguarded. Whether it reported."""
        via = " -> ".join(f"`{step}`" for step in reach.via)
        callee = reach.callee.lstrip(".")
        if reach.kind in ("unknown", "runtime"):
            if state.read_safe or reach.guarded:
                return False
            unknown = (
                unreadable_import(reach.callee, None)
                if reach.kind == "unknown"
                else _set_at_run_time(callee)
            )
            assert unknown is not None
            self._raw_read(
                arg.value,
                None,
                "warning",
                callee=callee,
                cls=cls,
                evidence=f"Through {via}: {unknown.text}",
            )
            return True
        if reach.kind == "triton":
            stores = self._launch_writes(reach.callee, reach.slot, reach)
            if stores and not (state.write_safe or reach.copied):
                stored = f"the Triton kernel `{callee}` stores into it (`tl.store`)."
                self._write(arg.value, state, flow, callee, cls, f"Through {via}: {stored}")
                return True
            if state.read_safe or reach.guarded:
                return False
            if self.ctx.summaries.kernel_reads_one_element(
                reach.callee, reach.path, reach.slot, reach.keyword
            ):
                return False  # `tl.load(grad_ptr)`: one element, strides cannot matter
            unread = "" if stores is not None else callee
            fix = (
                None if reach.strides else self._direct_fix(arg, reach, flow, bool(stores), unread)
            )
            told = _launch_evidence(reach)
            self._raw_read(
                arg.value,
                fix,
                "warning" if reach.asserted else told.severity,
                callee=callee,
                cls=cls,
                evidence=f"Through {via}: {told.text}{_asserted(reach)}",
            )
            return True
        native = self.ctx.summaries.native_for(reach.path)
        loaded = not reach.callee.split(".")[0].lstrip(".") or reach.loaded
        found = evidence_for(native, reach.callee, reach.slot, reach.keyword, loaded)
        if found.writes and not (state.write_safe or reach.copied):
            self._write(arg.value, state, flow, callee, cls, f"Through {via}: {found.write_text}")
            return True
        if state.read_safe or reach.guarded or found.safe:
            return False
        self._raw_read(
            arg.value,
            self._direct_fix(
                arg, reach, flow, found.writes, callee if not found.known else "", found.may_write
            ),
            "warning" if reach.asserted else found.severity,
            callee=callee,
            cls=cls,
            evidence=f"Through {via}: {found.text}".rstrip(": ") + _asserted(reach),
        )
        return True

    def _direct_fix(
        self,
        arg: cst.Arg,
        reach: Reach,
        flow: MethodFlow,
        writes: bool,
        unread: str,
        handed_on: bool = False,
    ) -> Fix | None:
        """`.contiguous()` at the call is a fix only when the helper hands it on as is."""
        if not reach.direct:
            return None
        unproven = self._write_unproven(writes, unread, reach.callee, handed_on)
        return self._contiguous_fix(arg, flow, unproven)

    def _loaded_module_call(self, site: CallSite, flow: MethodFlow) -> tuple[str, str] | None:
        """`ext.fn(...)` where `ext` was bound to a loaded extension, here or at module level:
        `load(...)`, a builder's `SomeOpBuilder().load()`, or a project function that returns
        one (`ext = get_ext()`), whatever it is called."""
        written = dotted(site.node.func)
        if written is None or "." not in written:
            return None
        head = written.split(".", 1)[0]
        summaries = self.ctx.summaries
        definition = flow.definition_before(head, site.order)
        if definition is not None:
            value = definition.value
            loaded = isinstance(value, cst.Call) and summaries.loads(
                code_of(value, self.ctx.facts.module)
            )
        else:
            loaded = head not in flow.defs and summaries.loads_module(head)
        if not loaded:
            return None
        self.loaded.add(head)
        return "extension", written

    def _through_member(
        self, site: CallSite, flow: MethodFlow, grads: set[str], cls: str, written: str
    ) -> None:
        """`fn = get_fn("GlobalPoolingForward", x)` then `fn(grad, ...)`: a project function
        that returns `getattr(<compiled module>, name + ...)` picked the compiled entry."""
        definition = flow.definition_before(written, site.order)
        value = definition.value if definition is not None else None
        if "." in written or not isinstance(value, cst.Call):
            return
        helper = dotted(value.func)
        found = self.ctx.summaries.function(helper) if helper is not None else None
        summary = self.ctx.summaries.summary(*found) if found is not None else None
        if summary is None or summary.returns_member is None:
            return
        module, index = summary.returns_member
        literal = positional(value, index)
        prefix = literal.evaluated_value if isinstance(literal, cst.SimpleString) else ""
        if not isinstance(prefix, str):
            prefix = ""
        native = self.ctx.summaries.native_for(found[0])  # type: ignore[index]
        for position, arg in enumerate(site.node.args):
            state = self._state(arg.value, flow, grads, site.order)
            if state is None or state.read_safe or arg.keyword is not None:
                continue
            evidence = member_evidence(native, prefix, position)
            if evidence.safe:
                continue
            shown = f"{module.lstrip('.')}.{prefix}*" if prefix else module.lstrip(".")
            unproven = self._write_unproven(
                evidence.writes, "" if evidence.known else shown, shown, evidence.may_write
            )
            self._raw_read(
                arg.value,
                self._contiguous_fix(arg, flow, unproven),
                evidence.severity,
                callee=shown,
                cls=cls,
                evidence=f"`{written}` is `{helper}(...)`, a function of compiled "
                f"`{module.lstrip('.')}`: {evidence.text}",
            )

    # --- where a callee's code lives (issue 31 §4: unknown is never clean) --------------------
    def _where(
        self, site: CallSite, flow: MethodFlow
    ) -> str | Unreadable | tuple[str, str] | list[tuple[str, str]]:
        """Where the code of a call that takes a gradient lives: TORCH or PYTHON (followed
        elsewhere, or nothing to report), a compiled callee `(kind, name)` to judge by its C++,
        or Unreadable (a warning names what could not be read)."""
        func = site.node.func
        module = self.ctx.facts.module
        if isinstance(func, cst.Attribute) and self._typed_method(func, flow, site.order):
            return TORCH
        if isinstance(func, cst.Call):
            built = self._built_op(func)
            if built is not None:
                return built
            return Unreadable(code_of(func, module), "is called on what a call returned")
        if isinstance(func, cst.Subscript):
            table = self._table(func.value, site, flow)
            if table:
                return table
            held = dotted(func.value) or ""
            if flow.params and held.startswith(f"{flow.params[0]}."):
                stored = self._stored_on_ctx(held.split(".", 1)[1], site, 0)
                if stored in (TORCH, PYTHON):
                    return stored  # `ctx.factors[i](g)`: a container `apply` was handed
            picked = code_of(func.value, module)
            return Unreadable(code_of(func, module), f"is picked from `{picked}` at run time")
        written = dotted(func)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
            # `torch.fx.Interpreter(bwd).run(g)`: a method of what torch or Python made
            maker = dotted(func.value.func)
            made_by = self._where_written(maker, site, flow, 1) if maker else None
            if made_by in (TORCH, PYTHON):
                return made_by
        if written is None:
            shown = code_of(func, module)
            return Unreadable(shown, "is a method of a value the linter cannot type")
        return self._where_written(written, site, flow, 0)

    def _built_op(self, made: cst.Call) -> str | tuple[str, str] | list[tuple[str, str]] | None:
        """`factory(f"{cls.base}_bwd")(g)`: a project factory that returns what calls
        `torch.ops.<ns>.<name>` with its arguments is that op, judged by its C++ like any
        `torch.ops` call: one op per name the text builds (a subclass may inherit the method
        with its own `base`). None when the name is not built in the text (unknown)."""
        helper = dotted(made.func)
        summaries = self.ctx.summaries
        found = summaries.function(helper) if helper is not None else None
        summary = summaries.summary(*found) if found is not None else None
        if summary is None or summary.returns_op is None:
            return None
        namespace, index = summary.returns_op
        arg = positional(made, index, summary.params[index])
        names = (
            built_names(arg, self.method, self.ctx.facts.class_nodes) if arg is not None else None
        )
        if not names:
            return None
        if any(f"{namespace}.{name}" in self.ctx.facts.python_custom_ops for name in names):
            return PYTHON  # an op this file defines in Python: followed as Python
        ops = [("extension", f"torch.ops.{namespace}.{name}") for name in names]
        return ops[0] if len(ops) == 1 else ops

    def _where_written(
        self, written: str, site: CallSite, flow: MethodFlow, depth: int
    ) -> str | Unreadable | tuple[str, str]:
        """`_where` for a callee written as a dotted name (`ext.fn`, `ctx.fn`, `fn`)."""
        head, _, rest = written.partition(".")
        facts = self.ctx.facts
        if head in self._nested:
            return PYTHON  # a function of backward's own
        if head in ("self", "cls") and (
            not flow.params
            or head != flow.params[0]
            or rest.split(".", 1)[0] in self._class_methods()
        ):
            # a method of its class; `self.kernel` of a legacy Function, whose `self` is its
            # ctx, is judged by what the class stored there, as `ctx.kernel` is
            return PYTHON
        definition = flow.definition_before(head, site.order)
        if definition is not None and depth < 8:
            return self._where_local(written, definition, site, flow, depth)
        if facts.imports.is_imported(head):
            resolved = facts.imports.resolve_dotted(written)
            found = imported_code(resolved, self.ctx.summaries.path, self.ctx.native)
            if found == COMPILED:
                return "extension", resolved
            if found == PYTHON and "." in written:
                held = self._imported_variable(resolved, written)
                if held is not None:
                    return held
            unread = unreadable_import(resolved, found)
            return unread if unread is not None else (found or PYTHON)
        if head in facts.functions or head in facts.class_nodes:
            return PYTHON
        if self.ctx.summaries.files.own.defines(head):
            return self._module_variable(written, site, flow, depth)
        if head in _BUILTINS:
            return PYTHON
        return Unreadable(
            written, f"names `{head}`, which nothing the linter can read defines or imports"
        )

    def _imported_variable(
        self, resolved: str, written: str
    ) -> Unreadable | tuple[str, str] | None:
        """`from scale_ext import scale_ext; scale_ext.raw_scale(g)`: a module-level variable of
        a project Python file, judged by its value there: a loaded extension (`load_inline`,
        `load`, `importlib.import_module`, a project function that returns one) is compiled
        code, read from its C++; `None`, set at run time, is unknown. None otherwise."""
        summaries = self.ctx.summaries
        native = self.ctx.native
        parts = resolved.split(".")
        for cut in range(len(parts) - 2, 0, -1):
            path = module_file(summaries.path, ".".join(parts[:cut]), native.root)
            if path is None:
                continue
            name = parts[cut]
            statements = summaries.files.top(path, name)
            if not statements or any(
                isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                for s in statements
            ):
                return None
            value = last_value(statements)
            if value is None:
                return None
            if isinstance(value, ast.Constant) and value.value is None:
                return Unreadable(written, f"is a method of `{name}`, set at run time")
            if summaries.loads_in(path, value):
                self.loaded.add(written.split(".", 1)[0])
                return "extension", resolved
            return None
        return None

    def _module_variable(
        self, written: str, site: CallSite, flow: MethodFlow, depth: int
    ) -> str | Unreadable | tuple[str, str]:
        """A callee that is (a method of) a module-level name of this file: a function or class
        (however defined) is Python; a variable is judged by the value it was given. `KERNEL =
        None`, set under `global` at run time (colossalai's `MOE_KERNEL = MoeLoader().load()`),
        is nothing the linter can read."""
        head, _, rest = written.partition(".")
        summaries = self.ctx.summaries
        statements = summaries.files.top(summaries.path, head)
        if any(
            isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for s in statements
        ):
            return PYTHON
        value = last_value(statements)
        if isinstance(value, ast.Constant) and value.value is None:
            return _set_at_run_time(written)
        if isinstance(value, (ast.Name, ast.Attribute)) and depth < 8:
            bound = ast_dotted(value)
            if bound is not None and bound != head:
                return self._where_written(
                    bound + (f".{rest}" if rest else ""), site, flow, depth + 1
                )
        return PYTHON

    def _where_local(
        self, written: str, definition: Definition, site: CallSite, flow: MethodFlow, depth: int
    ) -> str | Unreadable | tuple[str, str]:
        """`_where` for a callee bound in backward itself (a parameter, `fn = ...`)."""
        head, _, rest = written.partition(".")
        if definition.kind == "param":
            if head == flow.params[0] and rest in CTX_METHODS:
                return TORCH
            if head == flow.params[0] and rest and depth < 8:
                stored = self._stored_on_ctx(rest, site, depth)
                if stored is not None:
                    return stored
            held = "a value stored on ctx" if head == flow.params[0] else "a parameter"
            return Unreadable(written, f"is {held}: the code it runs is not known here")
        value = definition.expression
        if isinstance(value, cst.Lambda):
            return PYTHON
        bound_to = (dotted(value) if value is not None else None) or ""
        if rest and bound_to.endswith((".saved_tensors", ".saved_variables")):
            # a saved tensor: a method torch's API lacks is a Python attribute set on it
            return PYTHON
        holder = value
        while isinstance(holder, cst.Subscript):
            holder = holder.value  # `for block in ctx.blocks[::-1]`, `f = ctx.fns[0]`
        ctx_value = (dotted(holder) if holder is not None else None) or ""
        if flow.params and ctx_value.startswith(f"{flow.params[0]}.") and depth < 8:
            stored = self._stored_on_ctx(ctx_value.split(".", 1)[1], site, depth)
            if stored in (TORCH, PYTHON):
                return stored  # what `apply` was handed, or what Python or torch made
        if rest and rest.rsplit(".", 1)[-1] in self._class_methods():
            return PYTHON  # `block.backward_pass(...)`: the file's own classes define it
        if isinstance(value, (cst.Name, cst.Attribute)) and definition.kind == "assign":
            bound = dotted(value)
            if bound is not None:
                again = bound + (f".{rest}" if rest else "")
                return self._where_written(
                    again, replace(site, order=definition.order), flow, depth + 1
                )
        if isinstance(value, cst.Call):
            made = self.ctx.facts.imports.resolve(value.func) or ""
            if made in _DYNAMIC_IMPORTS:
                return Unreadable(written, _DYNAMIC)
            if not rest and self._member_helper(value):
                return PYTHON  # `fn = get_fn("Name", x)`: `_through_member` judges it
            maker = dotted(value.func)
            if rest and maker is not None:
                # `tsr = self.tree(...)`, `w = torch.empty(...)`: a method of what Python or
                # torch made is Python or torch; of what compiled or unread code made, unknown.
                at = replace(site, order=definition.order)
                made_by = self._where_written(maker, at, flow, depth + 1)
                if made_by == PYTHON and depth < 4:
                    # `buffer = get_buffer(...)`: a project function, judged by what it
                    # returns (Megatron's DeepEP `Buffer(...)`, a compiled communicator)
                    unread = self._returned_by(maker, site, flow)
                    if unread is not None:
                        return Unreadable(
                            written,
                            f"is a method of what `{maker}()` returns, made by "
                            f"`{unread.callee}`, which {unread.why.removeprefix('is ')}",
                            unread.compiled,
                        )
                if made_by in (TORCH, PYTHON):
                    return made_by
            shown = code_of(value, self.ctx.facts.module)
            return Unreadable(
                written, f"is what `{shown}` returned, which the linter cannot follow"
            )
        shown = code_of(value, self.ctx.facts.module) if value is not None else head
        return Unreadable(written, f"is bound to `{shown}`, whose code the linter cannot follow")

    def _returned_by(self, maker: str, site: CallSite, flow: MethodFlow) -> Unreadable | None:
        """What makes the object the project function `maker` returns, when that is code the
        linter cannot read: `return Maker(...)`, or `return NAME` where the function (or its
        module) binds `NAME = Maker(...)`. None when every maker is torch's or Python."""
        summaries = self.ctx.summaries
        found = summaries.function(maker)
        if found is None:
            return None
        path, function = found
        returned: list[ast.expr] = []
        bound: dict[str, list[ast.expr]] = {}
        pending: list[ast.AST] = list(function.body)
        while pending:
            node = pending.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue  # a nested def returns for itself
            if isinstance(node, ast.Return) and node.value is not None:
                returned.append(node.value)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        bound.setdefault(target.id, []).append(node.value)
            pending.extend(ast.iter_child_nodes(node))
        makers: list[str | None] = []
        for value in returned:
            values: list[ast.expr | None] = [value]
            if isinstance(value, ast.Name):
                # bound in the function, else (`global _buffer`) by its module
                values = list(bound.get(value.id, ())) or [
                    last_value(summaries.files.top(path, value.id))
                ]
            makers += [ast_dotted(v.func) for v in values if isinstance(v, ast.Call)]
        start = replace(site, order=0)  # the module's names, not backward's
        for made in makers:
            if made is None or made.split(".", 1)[0] in flow.defs:
                continue
            if path == summaries.path:
                where = self._where_written(made, start, flow, 7)
            else:
                resolved = summaries.files.bindings(path).resolve_dotted(made)
                code = imported_code(resolved, path, self.ctx.native)
                where = unreadable_import(resolved, code) or PYTHON
                if code == COMPILED:
                    where = "extension", resolved
            if isinstance(where, Unreadable):
                return where
            if isinstance(where, tuple):
                return Unreadable(where[1].lstrip("."), UNREAD_SOURCE, True)
        return None

    def _table(
        self, table: cst.BaseExpression, site: CallSite, flow: MethodFlow
    ) -> list[tuple[str, str]] | Unreadable | str | None:
        """`Cls.ops[device](g)`, `OPS[key](g)`: the functions a dict literal of this file (a
        class attribute or a module-level name) holds. Compiled ones are judged each by its
        C++; one the linter cannot read makes the call unknown; None when it is no such dict."""
        written = dotted(table)
        if written is None:
            return None
        owner, _, attr = written.rpartition(".")
        names: list[str | None] | None = None
        if owner in self.ctx.facts.class_nodes and "." not in owner:
            found = _class_value(self.ctx.facts.class_nodes[owner], attr)
            if isinstance(found, cst.Dict):
                names = [
                    dotted(e.value) if isinstance(e, cst.DictElement) else None
                    for e in found.elements
                ]
        elif not owner and flow.definition_before(attr, site.order) is None:
            # The file's top level, read whole: the slicer may have left the dict out.
            summaries = self.ctx.summaries
            value = last_value(summaries.files.top(summaries.path, attr))
            if isinstance(value, ast.Dict):
                names = [
                    ast_dotted(v) if k is not None else None
                    for k, v in zip(value.keys, value.values, strict=True)
                ]
        if not names or None in names:
            return None
        callees: list[tuple[str, str]] = []
        for name in names:
            assert name is not None
            where = self._where_written(name, site, flow, 1)
            if isinstance(where, Unreadable):
                return where
            if isinstance(where, tuple):
                callees.append(where)
        return callees or PYTHON  # every function it holds is torch's or Python

    def _class_methods(self) -> frozenset[str]:
        """The names of the methods the file's classes define."""
        if self._methods is None:
            self._methods = frozenset(
                statement.name.value
                for node in self.ctx.facts.class_nodes.values()
                for statement in node.body.body
                if isinstance(statement, cst.FunctionDef)
            )
        return self._methods

    def _stored_on_ctx(
        self, rest: str, site: CallSite, depth: int, owner: str | None = None
    ) -> str | Unreadable | tuple[str, str] | None:
        """`ctx.attr...(g)`: what forward stored as `ctx.attr`, judged where forward made it
        (`ctx.impl = ScanImpl(...)`: Python). A parameter stored as it came is what the caller
        handed to `apply` (or, for a legacy Function, to its constructor): the file's `apply`
        calls are read for it (`_handed_by_callers`). Handed a gradient, a parameter no caller
        shows to be compiled is taken as Python (a hook, a state object, a portal: what
        callers pass there); handed a gradient's raw address (`g.data_ptr()`) it is code that
        reads memory, not known here (spline_conv's CuPy kernel stored on `self`). None when
        the class (`owner`, else backward's own) stores no such attribute."""
        if self.info.node is None or depth >= 8:
            return None
        contract = self.ctx.contract()
        found = {c.name: c for c in contract.classes()}.get(owner or self.info.name)
        if found is None:
            return None
        attr, _, more = rest.partition(".")
        stored = value = None
        for method in ("forward", "setup_context", "__init__"):
            defined = contract.method(found, method)
            flow = self.ctx.flow(defined) if defined is not None else None
            if flow is not None and flow.params:
                stored = flow.definition_before(f"{flow.params[0]}.{attr}", 1 << 30)
                value = stored.expression if stored is not None else None
                if stored is not None and value is not None:
                    break
        if stored is None or value is None or flow is None:
            return None
        at = replace(site, order=stored.order)
        if isinstance(value, cst.Name):
            given = flow.definition_before(value.value, stored.order)
            if given is not None and given.kind == "unpack":
                # `state, _ = inputs` in setup_context: still what `apply` was handed
                source = given.expression
                name = source.value if isinstance(source, cst.Name) else ""
                given = flow.definition_before(name, given.order) if name else None
            if given is not None and given.kind == "param":
                if not self._raw_address:
                    slot = flow.params.index(value.value) - 1 if method == "forward" else -1
                    held = self._handed_by_callers(found.name, slot, more, site, depth)
                    return held if held is not None else PYTHON
                called = dotted(site.node.func) or f"ctx.{rest}"
                return Unreadable(
                    called,
                    f"is `{value.value}`, handed to `{method}` by its caller and stored as it "
                    "came: the code it runs is not read here",
                )
        if isinstance(value, cst.Call):
            if (self.ctx.facts.imports.resolve(value.func) or "") in _DYNAMIC_IMPORTS:
                return Unreadable(f"ctx.{rest}", _DYNAMIC)
            maker = dotted(value.func)
            made_by = self._where_written(maker, at, flow, depth + 1) if maker else None
            if made_by in (TORCH, PYTHON):
                return made_by
            return None
        bound = dotted(value)
        if bound is None:
            return None
        return self._where_written(bound + (f".{more}" if more else ""), at, flow, depth + 1)

    def _handed_by_callers(
        self, cls: str, slot: int, rest: str, site: CallSite, depth: int
    ) -> Unreadable | tuple[str, str] | None:
        """What the file's `cls.apply(...)` calls hand forward's input `slot`, which forward
        stores on ctx as it came, when one of them is compiled code: a compiled function
        (judged by its C++), or an object that compiled code made (its methods are not
        read). tiny-cuda-nn's double backward calls `ctx.ctx_fwd.native_tcnn_module.bwd_bwd_input`:
        `ctx_fwd` is the first Function's ctx, handed by its backward, and that ctx holds the
        module `_C.create_network(...)` made. None when no caller shows compiled code."""
        if slot < 0:
            return None
        for expr, owner, function in self.ctx.apply_sites.handed(cls, slot):
            where = self._caller_value(expr, owner, function, rest, site, depth + 1)
            if where is not None:
                return where
        return None

    def _caller_value(
        self,
        expr: ast.expr,
        owner: ast.ClassDef | None,
        function: ast.FunctionDef | ast.AsyncFunctionDef | None,
        rest: str,
        site: CallSite,
        depth: int,
    ) -> Unreadable | tuple[str, str] | None:
        """`_handed_by_callers` for one argument: another Function's ctx (its backward hands
        its own, `Other.apply(ctx, g)`), the calling module's `self.attr`, or a name the file
        imports."""
        params = (
            [a.arg for a in (*function.args.posonlyargs, *function.args.args)] if function else []
        )
        if isinstance(expr, ast.Name) and params and expr.id == params[0] and owner is not None:
            if rest and owner.name != self.info.name:
                stored = self._stored_on_ctx(rest, site, depth, owner.name)
                if isinstance(stored, (Unreadable, tuple)):
                    return stored
            return None
        written = ast_dotted(expr)
        if written is None:
            return None
        head, _, attr = written.partition(".")
        called = dotted(site.node.func) or rest
        if head == "self" and owner is not None and attr and "." not in attr:
            for value in self._held_by_module(owner, attr):
                made = self._made_by(value, owner, called, depth)
                if made is not None:
                    return made
            return None
        if head in params or (function is not None and _binds(function, head)):
            return None  # the caller's own local: what it holds is not known here
        facts = self.ctx.facts
        if not facts.imports.is_imported(head):
            return None
        resolved = facts.imports.resolve_dotted(written + (f".{rest}" if rest else ""))
        code = imported_code(resolved, self.ctx.summaries.path, self.ctx.native)
        if code == COMPILED:
            return "extension", resolved
        return unreadable_import(resolved, code)

    def _held_by_module(self, owner: ast.ClassDef, attr: str) -> list[ast.expr]:
        """What a class (or a subclass of the file) assigns to `self.<attr>`."""
        values = []
        for cls in self._with_subclasses(owner):
            for node in walk_ast(cls):
                if isinstance(node, ast.Assign) and any(
                    ast_dotted(t) == f"self.{attr}" for t in node.targets
                ):
                    values.append(node.value)
        return values

    def _made_by(
        self, value: ast.expr, owner: ast.ClassDef, called: str, depth: int
    ) -> Unreadable | None:
        """Whether compiled code made `value`: a call of an imported compiled function, or a
        method of the class (or of a subclass) that returns one (`self._native_module()`)."""
        if not isinstance(value, ast.Call) or depth >= 8:
            return None
        maker = ast_dotted(value.func)
        if maker is None:
            return None
        head, _, method = maker.partition(".")
        if head == "self" and method and "." not in method:
            for cls in self._with_subclasses(owner):
                for node in cls.body:
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                        node.name == method
                    ):
                        for returned in walk_ast(node):
                            if isinstance(returned, ast.Return) and returned.value is not None:
                                made = self._made_by(returned.value, owner, called, depth + 1)
                                if made is not None:
                                    return made
            return None
        unread = self._unread_maker(maker)
        if unread is None:
            return None  # torch or Python made it: its methods are Python
        return Unreadable(
            called,
            f"is a method of what `{unread.callee}` made (the `apply` callers hand it to "
            f"forward, which keeps it on ctx), and `{unread.callee}` {unread.why}",
            unread.compiled,
        )

    def _unread_maker(self, maker: str) -> Unreadable | None:
        """Why the code of `maker` (a function written at the file's top level: imported, or
        a method of a module-level name) cannot be read; None when it is torch's or Python."""
        head = maker.partition(".")[0]
        facts = self.ctx.facts
        if facts.imports.is_imported(head):
            resolved = facts.imports.resolve_dotted(maker)
            code = imported_code(resolved, self.ctx.summaries.path, self.ctx.native)
            return unreadable_import(resolved, code)
        if head in _BUILTINS:
            return None
        values = _module_values(self._whole_tree(), head)
        if values is None:
            return None  # a function or class of the file: Python
        for value in values:
            if isinstance(value, ast.Call):
                loader = facts.imports.resolve_dotted(ast_dotted(value.func) or "")
                if loader in _DYNAMIC_IMPORTS:
                    # `_C = importlib.import_module(f"bindings_{cc}._C")` in a loop, under `try`
                    return Unreadable(maker, _DYNAMIC)
        if values and all(isinstance(v, ast.Constant) and v.value is None for v in values):
            return _set_at_run_time(maker)
        return None

    def _whole_tree(self) -> ast.Module:
        """The file's whole `ast` (the slice libcst parsed may leave its modules out)."""
        if self._tree is None:
            self._tree = parse_quietly(self.ctx.facts.source) or ast.Module([], [])
        return self._tree

    def _with_subclasses(self, owner: ast.ClassDef) -> list[ast.ClassDef]:
        """The class and the file's classes derived from it (a base class calls
        `self._native_module()`, which each subclass defines)."""
        classes = [n for n in walk_ast(self._whole_tree()) if isinstance(n, ast.ClassDef)]
        found = [c for c in classes if c.name == owner.name and c.lineno == owner.lineno] or [owner]
        names = {owner.name}
        grown = True
        while grown:
            grown = False
            for cls in classes:
                bases = {(ast_dotted(b) or "").rsplit(".", 1)[-1] for b in cls.bases}
                if cls.name not in names and bases & names:
                    names.add(cls.name)
                    found.append(cls)
                    grown = True
        return found

    def _typed_method(self, func: cst.Attribute, flow: MethodFlow, order: int) -> bool:
        """`x.mm(g)`, `grads.append(g)`, `super().backward(...)`: a method of torch's own API
        or of a Python container, on a receiver that is not a module the file imports."""
        name = func.attr.value
        receiver = func.value
        if isinstance(receiver, cst.Call) and dotted(receiver.func) == "super":
            return True
        if name not in TENSOR_METHODS and name not in CONTAINER_METHODS:
            return False
        head = (dotted(receiver) or "").split(".", 1)[0]
        if head and flow.definition_before(head, order) is None:
            facts = self.ctx.facts
            if facts.imports.is_imported(head) and facts.imports.resolve_dotted(head) != "torch":
                return False  # `ext.backward(g)`: a function of a module, not a tensor method
            if head not in facts.class_nodes and self.ctx.summaries.files.own.defines(head):
                return False  # `softmax_ext.backward(g)`: a module-level name, not a tensor
        return True

    def _member_helper(self, value: cst.Call) -> bool:
        helper = dotted(value.func)
        found = self.ctx.summaries.function(helper) if helper is not None else None
        summary = self.ctx.summaries.summary(*found) if found is not None else None
        return summary is not None and summary.returns_member is not None

    def _check_first(
        self,
        site: CallSite,
        callees: list[tuple[str, str]],
        flow: MethodFlow,
        grads: set[str],
        cls: str,
    ) -> None:
        """A call that runs one of several compiled functions (per device, per dtype): the
        first that reads the gradient unsafely reports, once."""
        before = len(self.ctx.violations)
        given = len(site.node.args)
        plain = all(a.keyword is None and not a.star for a in site.node.args)
        for callee in callees:
            index = self.ctx.native.index_for_callee(callee[1])
            module, _, last = callee[1].rpartition(".")
            takes = index.arities(module or None, last)
            if plain and takes and given not in takes:
                continue  # `{"cpu": f, "cuda": g}` where g takes other arguments: not this call
            self._check_call(site, callee, flow, grads, cls)
            if len(self.ctx.violations) > before:
                return

    def _unreadable(
        self, site: CallSite, flow: MethodFlow, grads: set[str], where: Unreadable, cls: str
    ) -> None:
        """AGL201, a warning, at each unguarded gradient handed to code the linter cannot read."""
        if any(fnmatchcase(where.callee, p) for p in self.ctx.settings.stride_safe):
            return
        # What the Python call names decides a write, as for compiled code whose C++ is not
        # read (AGL202): an `_`-suffixed name (`ext.scale_(g)`), or one `writing-extensions`
        # lists. A result thrown away proves nothing here: unread code may be a launcher
        # (`ct.launch(stream, grid, kernel, (dy, dx))`) that writes only its outputs.
        last = where.callee.rsplit(".", 1)[-1]
        writes = self._listed_writer(where.callee) or (
            last.endswith("_") and not last.endswith("__")
        )
        for arg in site.node.args:
            state = self._state(arg.value, flow, grads, site.order)
            if state is None:
                continue
            if writes and not state.write_safe:
                self._write(arg.value, state, flow, where.callee, cls, where.text)
                continue
            if state.read_safe:
                continue
            if state.pointer:
                # `args=[g.data_ptr(), ...]` (a CuPy launch): the finding points at the address
                # taken, and the fix belongs on the tensor it is taken from, not here
                taken = self._pointer_taken(arg.value, flow, grads, site.order)
                self._raw_read(
                    taken,
                    None,
                    "warning",
                    callee=where.callee,
                    cls=cls,
                    evidence=f"{where.text} It is handed `{code_of(taken, self.ctx.facts.module)}`"
                    ", a raw address with no strides: whatever reads through it indexes the "
                    "memory as if dense.",
                    grad=state.root,
                )
                continue
            unproven = self._write_unproven(False, where.callee, where.callee)
            self._raw_read(
                arg.value,
                self._contiguous_fix(arg, flow, unproven),
                "warning",
                callee=where.callee,
                cls=cls,
                evidence=where.text,
            )

    def _pointer_taken(
        self, expr: cst.BaseExpression, flow: MethodFlow, grads: set[str], order: int
    ) -> cst.BaseExpression:
        """The element of a list or tuple argument that holds the gradient's raw address
        (`args=[g.data_ptr(), out.data_ptr()]`), else the argument itself."""
        while isinstance(expr, (cst.Tuple, cst.List)):
            held = [
                e.value
                for e in expr.elements
                if (found := self._state(e.value, flow, grads, order)) is not None
                and found.pointer
                and not found.read_safe
            ]
            if not held:
                break
            expr = held[0]
        return expr

    def _may_lead_somewhere(self, call: cst.Call, flow: MethodFlow) -> bool:
        """A call whose callee is a name the file imports, defines or binds (cheap, before
        any argument is traced): a method of a tensor (`g.view(...)`) leads nowhere."""
        written = dotted(call.func)
        if written is None:
            return False
        head = written.split(".", 1)[0]
        facts = self.ctx.facts
        return (
            head in flow.defs
            or facts.imports.is_imported(head)
            or head in facts.functions
            or head in facts.class_nodes
            or (head not in _BUILTINS and self.ctx.summaries.files.own.defines(head))
        )

    def _takes_gradient(self, site: CallSite, flow: MethodFlow, grads: set[str]) -> bool:
        return any(
            self._state(arg.value, flow, grads, site.order) is not None for arg in site.node.args
        )

    # --- gradient aliases ----------------------------------------------------------------
    def _state(
        self,
        expr: cst.BaseExpression,
        flow: MethodFlow,
        grads: set[str],
        order: int,
    ) -> GradState | None:
        """What gradient `expr` is derived from at `order` (checks/gradient_trace.py)."""
        return self._tracer.state(expr, flow, grads, order)

    def _origin(self, expr: cst.BaseExpression, flow: MethodFlow, order: int) -> GradState | None:
        """A tracked tensor that is no parameter (AGL203: a binding of `ctx.saved_tensors`);
        a gradient is a parameter, found by name (checks/gradient_trace.py)."""
        return None

    # --- findings --------------------------------------------------------------------------
    def _check_call(
        self, site: CallSite, callee: tuple[str, str], flow: MethodFlow, grads: set[str], cls: str
    ) -> None:
        kind, name = callee
        call = site.node
        written = (dotted(call.func) if kind == "extension" else None) or name.lstrip(".")
        guessed = kind == "extension" and self._writes(name, site, flow, grads)
        stride_safe = any(fnmatchcase(name, p) for p in self.ctx.settings.stride_safe)
        stride_names = self._stride_arguments(call) if kind == "triton" else set()
        evidence = {
            position: read_evidence(
                self.ctx.native, self.ctx.facts, kind, name, call, position, self.loaded
            )
            for position, arg in enumerate(call.args)
            if self._state(arg.value, flow, grads, site.order) is not None
        }
        # The C++ names the argument it writes (`token_scatter_(all, layer, ...)` writes `all`):
        # then the Python-side guess (an `_` name, a discarded result) is explained by it.
        proven = any(found.writes for found in evidence.values())
        for position, arg in enumerate(call.args):
            state = self._state(arg.value, flow, grads, site.order)
            if state is None:
                continue
            found = evidence[position]
            if kind == "triton" and not arg.star and self._launch_stores(name, position, arg):
                # The kernel `tl.store`s through the gradient's pointer (unsloth's RoPE
                # backward rotates `dY` in place): a write into the buffer autograd shares.
                found = replace(
                    found,
                    writes=True,
                    write_text=f"The Triton kernel `{name}` stores into it (`tl.store`).",
                )
            # A write the C++ (or the Triton kernel) shows, or what the Python call looks like
            # (a token-level read cannot prove that a kernel never writes through a pointer).
            writes = found.writes or (guessed and not proven)
            if writes and not state.write_safe:
                self._write(arg.value, state, flow, written, cls, found.write_text)
            elif state.name in stride_names and not (state.read_safe or stride_safe):
                asserted = self._asserted_layout(state.name)
                if asserted is not None:
                    # Given its own strides, but backward asserts the layout first (Megatron's
                    # `assert dk.stride(-1) == 1`): the Python twin of a C++ contiguity check.
                    self._raw_read(
                        arg.value,
                        None,
                        "warning",
                        callee=written,
                        cls=cls,
                        evidence=f"Backward asserts `{asserted}` before the launch: training "
                        "raises on a gradient laid out otherwise; make it contiguous first "
                        f"(`{state.name} = {state.name}.contiguous()`) so every caller works.",
                    )
            elif not state.read_safe and not stride_safe and state.name not in stride_names:
                if found.safe:
                    continue  # the C++ makes it contiguous or reads it through its strides
                if kind == "triton" and self.ctx.summaries.kernel_reads_one_element(
                    name, None, position
                ):
                    continue  # `tl.load(grad_ptr)`: one element, strides cannot matter
                text = found.text
                if kind == "triton":
                    stores = self._launch_writes(name, position)
                    unread = "" if stores is not None else name
                    unproven = self._write_unproven(bool(stores), unread, name)
                else:
                    unread = "" if found.known else name
                    unproven = self._write_unproven(found.writes, unread, name, found.may_write)
                # `.contiguous()` belongs on the tensor a raw address is taken from, not on it
                fix = None if state.pointer else self._contiguous_fix(arg, flow, unproven)
                if kind == "triton" and stride_names:
                    # `.contiguous()` is no safe fix here: where the other tensor is not
                    # contiguous and the gradient happened to match it, it would break a
                    # launch that was right. The fix is the gradient's own strides.
                    fix = None
                    text = (
                        _other_strides("The launch", stride_names, f"`{state.name}`'s")
                        + ", and gradcheck/opcheck, which feed contiguous gradients, cannot see "
                        f"it. Pass `{state.name}.stride(...)` for it."
                    )
                self._raw_read(
                    arg.value, fix, found.severity, callee=written, cls=cls, evidence=text
                )

    def _write(
        self,
        value: cst.BaseExpression,
        state: GradState,
        flow: MethodFlow,
        callee: str,
        cls: str,
        evidence: str,
    ) -> None:
        """AGL202 at the gradient argument `value`, with FIX-B2 (a private dense copy)."""
        evidence = self._via_text(evidence)
        owner = self.info.name if self.info.node is not None else None
        reason = torch_unreachable(self.ctx, owner, self.method)
        fix = (
            None
            if self._via
            else copy_gradient_first(
                self.method,
                flow,
                state.root,
                dense=True,
                title=f"pass a private dense copy of `{state.root}`",
                rule_id="AGL202",
                unproven=[Unproven("AGL202", "torch-in-scope", reason) if reason else None],
            )
        )
        grad = source_of(self.ctx.facts.module, value)
        self.report("AGL202", value, fix=fix, grad=grad, callee=callee, cls=cls, evidence=evidence)

    def _raw_read(
        self,
        value: cst.BaseExpression,
        fix: Fix | None,
        severity: str | None,
        *,
        callee: str,
        cls: str,
        evidence: str,
        grad: str = "",
    ) -> None:
        """AGL201 at the gradient argument `value` (`grad`: the tensor to make contiguous,
        when `value` is not it)."""
        judged = self._judged(value, severity, evidence)
        if judged is None:
            return
        evidence, fixable = judged
        grad = grad or source_of(self.ctx.facts.module, value)
        if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation, cst.IfExp)):
            grad = f"({grad})"  # the help says `{grad}.contiguous()`: keep the precedence
        evidence = self._via_text(evidence)
        self.report(
            self.read_code,
            value,
            fix=fix if fixable and not self._via else None,
            severity=severity,
            grad=grad,
            callee=callee,
            cls=cls,
            evidence=evidence,
        )

    def _judged(
        self, value: cst.BaseExpression, severity: str | None, evidence: str
    ) -> tuple[str, bool] | None:
        """Whether a raw read of `value` is reported: the evidence it is told with and
        whether its fix is offered, or None. A gradient's always is, with its fix."""
        return evidence, True

    def _via_text(self, evidence: str) -> str:
        """The evidence, led by the `apply` the gradient went through (when it did)."""
        if not self._via:
            return evidence
        return self._via + evidence[:1].lower() + evidence[1:]

    # --- fixes (FIX-B1; FIX-B2 is gradient_copy.copy_gradient_first) ------------------------
    def _contiguous_fix(
        self, arg: cst.Arg, flow: MethodFlow, unproven: Unproven | None
    ) -> Fix | None:
        """FIX-B1: `g` -> `g.contiguous()` at the call: bitwise-identical for kernels that read
        it through its strides, safe where its preconditions hold (rules/AGL201.yaml): the
        callee does not write into it (`.contiguous()` returns the same buffer for dense input
        and a copy otherwise, so a write would reach the caller only sometimes), and it is never
        None. A value that may be None is passed as it is when it is (`g if g is None else
        g.contiguous()`): then the None case is exactly what it was."""
        value = arg.value
        if arg.star or not isinstance(value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
            return None  # `*grads` and other forms have no single tensor to make contiguous
        order = self._order_of(flow, value)
        if self._is_gradient_tuple(value, flow, order):
            return None  # the tuple of every gradient: no tensor to make contiguous
        failures: list[Unproven | None] = [unproven]
        keep_none = False
        if self._may_be_none(value, flow, order):
            why = self._none_unproven(flow)
            if why is not None and _evaluated_freely(value):
                keep_none = True  # still exact: a None is passed on as it was
            elif why is not None:
                failures.append(Unproven("AGL201", "gradient-not-none", why))

        def build(edits: Edits) -> None:
            def edit(updated: cst.CSTNode) -> cst.CSTNode:
                assert isinstance(updated, cst.BaseExpression)
                made = cst.Call(cst.Attribute(updated, cst.Name("contiguous")))
                if not keep_none:
                    return made
                return cst.IfExp(
                    test=cst.Comparison(
                        updated.deep_clone(),
                        [cst.ComparisonTarget(cst.Is(), cst.Name("None"))],
                    ),
                    body=updated.deep_clone(),
                    orelse=made,
                )

            edits.nodes[id(value)] = edit

        safety, note = verdict(failures)
        return Fix(safety, self.method, build, "pass `.contiguous()`", note)

    def _write_unproven(
        self, writes: bool, unread: str, callee: str, handed_on: bool = False
    ) -> Unproven | None:
        """The `callee-does-not-write` precondition: the C++ (or Triton kernel) behind the
        call was read (`unread` names the callee when it was not), writes nothing into the
        gradient, and hands no writable pointer into it to code that was not read
        (`handed_on`: a kernel whose source is missing)."""
        if writes:
            why = f"`{callee}` writes into it"
        elif unread:
            why = f"the source of `{unread}` is not among the project's, so its writes are unknown"
        elif handed_on:
            why = f"`{callee}` hands it to code whose source is not read, so its writes are unknown"
        else:
            return None
        return Unproven("AGL201", "callee-does-not-write", why)

    def _launch_stores(self, kernel: str, position: int, arg: cst.Arg) -> bool:
        """Whether the Triton kernel launched here stores through the launch argument `arg`
        (at `position`, or named by its keyword)."""
        keyword = arg.keyword.value if arg.keyword is not None else None
        return bool(self._launch_writes(kernel, None if keyword else position, keyword=keyword))

    def _launch_writes(
        self,
        kernel: str,
        position: int | None,
        reach: Reach | None = None,
        keyword: str | None = None,
    ) -> bool | None:
        """Whether a Triton kernel launched here (or at the end of a helper's `reach`) stores
        through argument `position`; None when the kernel's source is not found (nothing is
        proven then)."""
        summaries = self.ctx.summaries
        path = reach.path if reach is not None else summaries.path
        if summaries.function(kernel.lstrip("."), path) is None:
            return None
        if reach is None:
            reach = Reach(0, kernel, position, keyword, False, True, path, (), kind="triton")
        return summaries.kernel_writes(reach)

    @staticmethod
    def _order_of(flow: MethodFlow, value: cst.BaseExpression) -> int:
        """The order of the call whose argument `value` is (where its names are read)."""
        for site in flow.calls:
            if any(arg.value is value for arg in site.node.args):
                return site.order
        return 1 << 30

    def _may_be_none(self, expr: cst.BaseExpression, flow: MethodFlow, order: int) -> bool:
        """Whether a gradient-derived value may be None where it is read: a gradient as it
        came (a parameter, an alias of one, an element of `*grads`); not what dereferenced it
        (`g.view(-1)`, `g.T`, `g *= 2`: they raise on None first)."""
        for _ in range(32):
            if isinstance(expr, cst.Subscript):
                return self._is_gradient_tuple(expr.value, flow, order)
            if not isinstance(expr, cst.Name):
                return not isinstance(expr, (cst.Attribute, cst.Call))
            definition = flow.definition_before(expr.value, order)
            if definition is None or definition.kind in ("unpack", "loop", "with"):
                return True
            if definition.kind == "param":
                return expr.value != flow.vararg
            if definition.kind == "augassign" or definition.expression is None:
                return definition.kind != "augassign"
            expr, order = definition.expression, definition.order
        return True

    @staticmethod
    def _is_gradient_tuple(expr: cst.BaseExpression, flow: MethodFlow, order: int) -> bool:
        """Whether `expr` is backward's `*grads` tuple (or a name bound to it)."""
        for _ in range(32):
            if not isinstance(expr, cst.Name):
                return False
            definition = flow.definition_before(expr.value, order)
            if definition is None:
                return False
            if definition.kind == "param":
                return expr.value == flow.vararg
            if definition.kind != "assign" or definition.expression is None:
                return False
            expr, order = definition.expression, definition.order
        return False

    def _none_unproven(self, flow: MethodFlow) -> str | None:
        """Why a gradient of this backward may arrive as None (None: it never does). It is
        never None when backward takes one gradient (of the one output) and materialization
        is left on: the engine then passes zeros for an unused output (a non-tensor output
        makes no graph, so backward never runs)."""
        if id(flow) not in self._none_why:
            self._none_why[id(flow)] = self._none_reason(flow)
        return self._none_why[id(flow)]

    def _none_reason(self, flow: MethodFlow) -> str | None:
        info = self.info
        if info.node is None:
            return "the backward of a custom op is not proven to get materialized gradients"
        if flow.vararg or len(flow.params) != 2:
            return (
                "backward takes several gradients: that of a non-tensor output, or of an "
                "unused one with materialization off, is None"
            )
        source = self.ctx.facts.source
        calls = re.findall(r"set_materialize_grads\s*\(([^)]*)\)", source)
        if any(argument.strip() != "True" for argument in calls):
            return "the file calls `set_materialize_grads`, which can turn materialization off"
        contract = self.ctx.contract()
        classes = {c.name: c for c in contract.classes()}
        found = classes.get(info.name)
        if found is None:
            return "its class is not read here"
        forward = contract.method(found, "forward")
        if forward is None or contract.is_foreign(forward):
            # the other file's text is not searched for `set_materialize_grads` here
            return "its forward is not in this file"
        for method in (forward, contract.method(found, "setup_context")):
            if method is None:
                continue
            handed = _ctx_handed_on(method, self.ctx.facts.functions)
            if handed is not None:
                return f"`{method.name.value}` hands ctx to `{handed}`, which is not read"
        return subclassed_elsewhere(self.ctx, info.name)

    def _listed_writer(self, name: str) -> bool:
        return any(fnmatchcase(name, p) for p in self.ctx.settings.writing_extensions)

    def _writes(self, name: str, site: CallSite, flow: MethodFlow, grads: set[str]) -> bool:
        """What the Python call says when the C++ cannot be read: an `_`-suffixed name, or a
        result thrown away (it can only act through its arguments)."""
        last = name.rsplit(".", 1)[-1]
        if self._listed_writer(name):
            return True
        if last.endswith("_") and not last.endswith("__"):
            return True
        if not site.discarded:
            return False
        # Called for its effect, it can only act through its arguments. When another argument
        # is plainly the output (a `.grad`/`.main_grad` buffer, a fresh `torch.empty*`), the
        # gradient is an input: check it as a read instead.
        for arg in site.node.args:
            if self._state(arg.value, flow, grads, site.order) is None and self._is_output(
                arg.value, flow, site.order
            ):
                return False
        return True

    def _is_output(self, expr: cst.BaseExpression, flow: MethodFlow, order: int) -> bool:
        if isinstance(expr, cst.Name):
            definition = flow.definition_before(expr.value, order)
            if definition is None or definition.expression is None:
                return False  # a parameter, or `g *= 2`: the name holds what it held
            return self._is_output(definition.expression, flow, definition.order)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value.endswith("grad")
        if isinstance(expr, cst.Call):
            name = dotted(expr.func) or ""
            return name.rsplit(".", 1)[-1] in ("empty", "empty_like", "zeros", "zeros_like")
        return False

    def _asserted_layout(self, name: str) -> str | None:
        """The condition of an `assert` of backward that asks `name` for its layout
        (`assert g.stride(-1) == 1`, `assert g.is_contiguous()`), or None."""
        found: list[cst.BaseExpression] = []

        class _Asserts(FastVisitor):
            def visit_Assert(self, node: cst.Assert) -> None:
                found.append(node.test)

        _Asserts().walk(self.method.body)
        for test in found:
            for node in _calls_in(test):
                func = node.func
                if (
                    isinstance(func, cst.Attribute)
                    and func.attr.value in ("stride", "is_contiguous")
                    and dotted(func.value) == name
                ):
                    return code_of(test, self.ctx.facts.module)
        return None

    @staticmethod
    def _stride_arguments(call: cst.Call) -> set[str]:
        """Names whose `.stride(...)` is handed to the kernel: it indexes them stride-aware."""
        names: set[str] = set()

        class _Strides(FastVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value == "stride":
                    base = dotted(func.value)
                    if base is not None:
                        names.add(base)

        for arg in call.args:
            _Strides().walk(arg.value)
        return names


def _asserted(reach: Reach) -> str:
    """What a helper's `assert g.is_contiguous()` before the call changes: it raises instead."""
    if not reach.asserted:
        return ""
    return (
        f" `{reach.via[-1]}` asserts it contiguous first: training raises on a gradient laid out "
        "otherwise (the stride-0 one of `out.sum()`, a transposed one) instead of computing."
    )


def _passes(call: cst.Call, name: str, params: Sequence[str]) -> bool:
    """`may_pass` of a libcst call (`Arg.star` is `*` or `**`)."""
    keywords = [arg.keyword.value for arg in call.args if arg.keyword is not None]
    given = sum(1 for arg in call.args if arg.keyword is None)
    return may_pass(name, params, given, keywords, any(arg.star for arg in call.args))


def _set_at_run_time(written: str) -> Unreadable:
    """`KERNEL.fn` where the module binds `KERNEL = None` and sets it under `global` at run
    time (colossalai's `MOE_KERNEL = MoeLoader().load()`): nothing the linter can read."""
    head, _, rest = written.partition(".")
    return Unreadable(
        written,
        f"is a method of `{head}`, a module-level name set at run time"
        if rest
        else f"is `{head}`, a module-level name set at run time",
    )


def _calls_in(expr: cst.BaseExpression) -> list[cst.Call]:
    """Every call inside `expr`."""
    calls: list[cst.Call] = []

    class _Calls(FastVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            calls.append(node)

    _Calls().walk(expr)
    return calls


def _evaluated_freely(value: cst.BaseExpression) -> bool:
    """Whether evaluating `value` again has no effect and gives the same object: a name, or
    a name indexed by a literal (`grads[0]`)."""
    if isinstance(value, cst.Name):
        return True
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name):
        return all(
            isinstance(element.slice, cst.Index)
            and isinstance(element.slice.value, (cst.Integer, cst.Name))
            for element in value.slice
        )
    return False


def _class_value(node: cst.ClassDef, name: str) -> cst.BaseExpression | None:
    """The value a class body last assigns to `name` (`ops = {...}`)."""
    return _assigned(node.body.body, name)


def _assigned(body: Sequence[cst.CSTNode], name: str) -> cst.BaseExpression | None:
    found: cst.BaseExpression | None = None
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets
            ):
                found = small.value
    return found


def _nested_defs(method: cst.FunctionDef) -> frozenset[str]:
    """The names of the functions backward defines in its own body."""
    found: set[str] = set()

    class _Defs(FastVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            if node is not method:
                found.add(node.name.value)

    _Defs().walk(method.body)
    return frozenset(found)


def _ctx_handed_on(method: cst.FunctionDef, functions: dict[str, cst.FunctionDef]) -> str | None:
    """A call `method` passes its ctx to, other than one of this file's functions (whose
    text the `set_materialize_grads` search covered); None when it keeps ctx to itself."""
    params = method.params.params
    if not params:
        return None
    ctx_name = params[0].name.value
    found: list[str] = []

    class _Find(FastVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            callee = dotted(call.func) or "?"
            if callee in functions:
                return
            if any(isinstance(a.value, cst.Name) and a.value.value == ctx_name for a in call.args):
                found.append(callee)

    _Find().walk(method.body)
    return found[0] if found else None


def _binds(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether a function binds `name` itself (an assignment, a loop, a `with ... as`)."""
    return any(
        isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)
        for node in walk_ast(function)
    )


def _module_values(tree: ast.Module, name: str) -> list[ast.expr] | None:
    """The values a module binds to `name` at its top level, under `if`, `try`, `for`, `while`
    and `with` too (tiny-cuda-nn binds `_C` in a loop over compute capabilities); None when
    the module defines it as a function or class."""
    values: list[ast.expr] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if statement.name == name:
                return None
            continue
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in statement.targets
        ):
            values.append(statement.value)
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            if isinstance(statement.target, ast.Name) and statement.target.id == name:
                values.append(statement.value)
        for field in ("body", "orelse", "finalbody", "handlers"):
            for inner in getattr(statement, field, ()):
                if isinstance(inner, ast.ExceptHandler):
                    pending.extend(inner.body)
                elif isinstance(inner, ast.stmt):
                    pending.append(inner)
    return values
