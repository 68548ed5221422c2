"""Family B (AGL2xx): gradient tensors handed to compiled code without a layout or copy guard."""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

import libcst as cst

from ..analysis.aliasing import ALIASING_METHODS
from ..analysis.compiled import (
    ReadEvidence,
    compiled_by_evidence,
    compiled_callee,
    evidence_for,
    member_evidence,
    read_evidence,
)
from ..analysis.flow import CallSite, MethodFlow
from ..analysis.names import dotted
from ..analysis.source_text import code_of
from ..analysis.summaries import Reach
from ..analysis.walk import FastVisitor
from ..edits import Edits, Fix
from ..preconditions import Unproven, verdict
from ..text.ast_walk import walk as walk_ast
from .base import Check
from .common import BackwardOf, backward_methods, keyword, positional, source_of
from .fix_proofs import subclassed_elsewhere, torch_unreachable
from .gradient_copy import copy_gradient_first

ALIASING_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data"})


# `len(g)`, `max(...)`: never a project function (the file is not scanned for its definitions)
_BUILTINS = frozenset(dir(builtins))


def makes_arguments_contiguous(decorator: ast.FunctionDef) -> bool:
    """Whether a decorator's wrapper makes the arguments contiguous before calling what it
    wraps: a nested def that calls `.contiguous()` and then the decorator's parameter (the
    function), passing on what it built (`fn(ctx, *args, **kwargs)` after `args = [a.contiguous()
    ... for a in args]`)."""
    params = [a.arg for a in (*decorator.args.posonlyargs, *decorator.args.args)]
    if not params:
        return False
    wrapped = params[0]
    for inner in walk_ast(decorator):
        if not isinstance(inner, ast.FunctionDef) or inner is decorator:
            continue
        calls = [n for n in walk_ast(inner) if isinstance(n, ast.Call)]
        contiguous = any(
            isinstance(c.func, ast.Attribute) and c.func.attr == "contiguous" for c in calls
        )
        forwards = any(isinstance(c.func, ast.Name) and c.func.id == wrapped for c in calls)
        if contiguous and forwards:
            return True
    return False


def _launch_evidence(reach: Reach) -> ReadEvidence:
    """What a Triton launch in a helper says: it is given other tensors' strides, or none."""
    if not reach.strides:
        return ReadEvidence(
            False, None, f"The launch of `{reach.callee}` is given no strides for it."
        )
    text = _other_strides(f"The launch of `{reach.callee}`", reach.strides, "the gradient's")
    return ReadEvidence(False, None, f"{text}.")


def _other_strides(launch: str, others: Iterable[str], owner: str) -> str:
    """The pytorch#194719 sentence: a launch indexes the gradient with other tensors' strides."""
    given = ", ".join(f"`{n}.stride(...)`" for n in sorted(others))
    return (
        f"{launch} is given {given}, not {owner} own: a gradient laid out differently (the "
        "narrow view `torch.cat`'s backward hands each input) is read at the wrong places"
    )


@dataclass(frozen=True)
class GradState:
    """A value derived from a gradient, and which guards it went through."""

    name: str
    read_safe: bool  # dense row-major: `.contiguous()` or clone(memory_format=contiguous_format)
    write_safe: bool  # a private copy: any `.clone()`
    root: str = ""  # the gradient parameter it comes from


class CompiledGradients(Check):
    """AGL201 (raw read) and AGL202 (write into a shared grad buffer)."""

    def run(self) -> None:
        facts = self.ctx.facts
        for info, method in backward_methods(facts):
            self.ctx.enter(info.subject)
            if self._guarded_by_decorator(method, read_source=False):
                continue
            reported = len(self.ctx.violations)
            self._method(info, method)
            # A decorator's source is read only when there is something it could answer for:
            # resolving every decorator of every backward (often in other files) costs more.
            if len(self.ctx.violations) > reported and self._guarded_by_decorator(method):
                del self.ctx.violations[reported:]

    def _method(self, info: BackwardOf, method: cst.FunctionDef) -> None:
        """AGL201 / AGL202 for the calls of one backward."""
        facts = self.ctx.facts
        flow = self.ctx.flow(method)
        self.loaded: set[str] = set()  # names bound to loaded modules (by evidence)
        self._states: dict[int, dict[tuple[int, int], GradState | None]] = {}
        grads = set(flow.params[1:])
        if flow.vararg:
            grads.add(flow.vararg)
        if not grads:
            return
        self.method = method
        self.info = info
        self._none_why: dict[int, str | None] = {}  # per method: why a gradient may be None
        for site in flow.calls:
            callee = compiled_callee(site.node, facts, self.ctx.settings, self.ctx.native)
            if (
                callee is None
                and self._may_lead_somewhere(site.node, flow)
                and self._takes_gradient(site, flow, grads)
            ):
                callee = compiled_by_evidence(site.node, facts, self.ctx.native)
                callee = callee or self._loaded_module_call(site, flow)
                if callee is None:
                    self._through_helper(site, flow, grads, info.name)
                    continue
            if callee is not None:
                self._check_call(site, callee, flow, grads, info.name)

    def _guarded_by_decorator(self, method: cst.FunctionDef, read_source: bool = True) -> bool:
        """A decorator that makes every tensor argument contiguous: one whose wrapper calls
        `.contiguous()` and then the function it wraps (liger's `@ensure_contiguous`, fla's
        `@input_guard`, read from their source), or one the configuration names."""
        for decorator in method.decorators:
            expr = decorator.decorator
            call = expr if isinstance(expr, cst.Call) else None
            written = dotted(call.func if call else expr) or ""
            named = written.rsplit(".", 1)[-1] in self.ctx.settings.guard_decorators
            if not named and not (read_source and self._contiguous_wrapper(written)):
                continue
            opt_out = call is not None and keyword(call, "no_guard_contiguous")
            if not (isinstance(opt_out, cst.Name) and opt_out.value == "True"):
                return True
        return False

    def _contiguous_wrapper(self, written: str) -> bool:
        if not written or written in ("staticmethod", "classmethod"):
            return False
        found = self.ctx.summaries.function(written)
        return found is not None and makes_arguments_contiguous(found[1])

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
                if reach.param == index and self._helper_reach(arg, state, reach, flow, cls):
                    break  # one finding per argument

    def _helper_reach(
        self, arg: cst.Arg, state: GradState, reach: Reach, flow: MethodFlow, cls: str
    ) -> bool:
        """AGL202 when the C++ at the end writes into the gradient and no copy was made on
        the way; else AGL201 when it reads it unguarded. Whether it reported."""
        via = " -> ".join(f"`{step}`" for step in reach.via)
        callee = reach.callee.lstrip(".")
        if reach.kind == "triton":
            if state.read_safe or reach.guarded:
                return False
            if self.ctx.summaries.kernel_reads_one_element(
                reach.callee, reach.path, reach.slot, reach.keyword
            ):
                return False  # `tl.load(grad_ptr)`: one element, strides cannot matter
            stores = self._launch_writes(reach.callee, reach.slot, reach)
            unread = "" if stores is not None else callee
            fix = (
                None if reach.strides else self._direct_fix(arg, reach, flow, bool(stores), unread)
            )
            told = _launch_evidence(reach)
            self._raw_read(
                arg.value,
                fix,
                told.severity,
                callee=callee,
                cls=cls,
                evidence=f"Through {via}: {told.text}",
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
            found.severity,
            callee=callee,
            cls=cls,
            evidence=f"Through {via}: {found.text}".rstrip(": "),
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
            self.report(
                "AGL201",
                arg.value,
                fix=self._contiguous_fix(arg, flow, unproven),
                severity=evidence.severity,
                grad=source_of(self.ctx.facts.module, arg.value),
                callee=f"{module.lstrip('.')}.{prefix}*" if prefix else module.lstrip("."),
                cls=cls,
                evidence=f"`{written}` is `{helper}(...)`, a function of compiled "
                f"`{module.lstrip('.')}`: {evidence.text}",
            )

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
        depth: int = 0,
    ) -> GradState | None:
        """What gradient `expr` is derived from at `order`, memoised per method: a chain of
        reassignments is walked once, not once per argument that reaches it."""
        key = (id(expr), order)
        memo = self._states.setdefault(id(flow), {})
        if key not in memo:
            memo[key] = self._trace(expr, flow, grads, order, depth)
        return memo[key]

    def _trace(
        self,
        expr: cst.BaseExpression,
        flow: MethodFlow,
        grads: set[str],
        order: int,
        depth: int = 0,
    ) -> GradState | None:
        if depth > 20:
            return None
        if isinstance(expr, cst.Name):
            definition = flow.definition_before(expr.value, order)
            if definition is None:
                return None
            if definition.kind == "param":
                return (
                    GradState(expr.value, False, False, expr.value) if expr.value in grads else None
                )
            value = definition.expression
            if value is None or definition.kind == "with":
                return None
            inner = self._state(value, flow, grads, definition.order, depth + 1)
            return (
                None
                if inner is None
                else GradState(expr.value, inner.read_safe, inner.write_safe, inner.root)
            )
        if isinstance(expr, cst.StarredElement):
            return self._state(expr.value, flow, grads, order, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._state(expr.value, flow, grads, order, depth + 1)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in ALIASING_ATTRIBUTES:
                return self._state(expr.value, flow, grads, order, depth + 1)
            return None
        if isinstance(expr, (cst.Tuple, cst.List)):
            for element in expr.elements:
                found = self._state(element.value, flow, grads, order, depth + 1)
                if found is not None and not (found.read_safe and found.write_safe):
                    return found
            return None
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            inner = self._state(expr.func.value, flow, grads, order, depth + 1)
            if inner is None:
                return None
            if method == "contiguous":
                return GradState(inner.name, True, inner.write_safe, inner.root)
            if method == "clone":
                fmt = dotted(keyword(expr, "memory_format") or cst.Name("x")) or ""
                dense = fmt.endswith("contiguous_format")
                return GradState(inner.name, inner.read_safe or dense, True, inner.root)
            if method in ALIASING_METHODS:
                return inner
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
            # A write the C++ shows, or what the Python call looks like (a token-level read
            # cannot prove that a kernel never writes through a pointer it was handed).
            writes = found.writes or (guessed and not proven)
            if writes and not state.write_safe:
                self._write(arg.value, state, flow, written, cls, found.write_text)
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
                fix = self._contiguous_fix(arg, flow, unproven)
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
        owner = self.info.name if self.info.node is not None else None
        reason = torch_unreachable(self.ctx, owner, self.method)
        fix = copy_gradient_first(
            self.method,
            flow,
            state.root,
            dense=True,
            title=f"pass a private dense copy of `{state.root}`",
            rule_id="AGL202",
            unproven=[Unproven("AGL202", "torch-in-scope", reason) if reason else None],
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
    ) -> None:
        """AGL201 at the gradient argument `value`."""
        grad = source_of(self.ctx.facts.module, value)
        self.report(
            "AGL201",
            value,
            fix=fix,
            severity=severity,
            grad=grad,
            callee=callee,
            cls=cls,
            evidence=evidence,
        )

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

    def _launch_writes(
        self, kernel: str, position: int | None, reach: Reach | None = None
    ) -> bool | None:
        """Whether a Triton kernel launched here (or at the end of a helper's `reach`) stores
        through argument `position`; None when the kernel's source is not found (nothing is
        proven then)."""
        summaries = self.ctx.summaries
        path = reach.path if reach is not None else summaries.path
        if summaries.function(kernel.lstrip("."), path) is None:
            return None
        if reach is None:
            reach = Reach(0, kernel, position, None, False, True, path, (), kind="triton")
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
