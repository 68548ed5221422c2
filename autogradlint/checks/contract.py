"""Family D (AGL4xx): the autograd.Function contract (static methods, arity, ctx, in-place)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from ..analysis.aliasing import ALIASING_METHODS
from ..analysis.facts import ClassInfo
from ..analysis.flow import MethodFlow
from ..analysis.names import dotted
from ..analysis.walk import FastVisitor
from ..fix.edits import Edits, Fix
from ..prefilter import CONTRACT
from ..preselect import direct_call_offsets
from .base import Check
from .common import add_decorator_fix, source_of, statement_in_block
from .gradient_copy import copy_gradient_first

CONTRACT_METHODS = ("forward", "backward", "setup_context", "jvp", "vmap")
# Views and no-op conversions (`contiguous` included: it returns self when already contiguous).
ALIASING = ALIASING_METHODS | {"contiguous", "data", "T", "mT"}
# In-place methods that only change metadata (shape/strides) or flags, never the values.
METADATA_INPLACE = frozenset(
    {
        "requires_grad_",
        "retain_grad",
        "unsqueeze_",
        "squeeze_",
        "transpose_",
        "t_",
        "resize_",
        "as_strided_",
        "swapdims_",
        "swapaxes_",
        "share_memory_",
        "pin_memory_",
        "rename_",
    }
)
METADATA_USES = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "size",
        "dim",
        "ndim",
        "numel",
        "is_cuda",
        "layout",
        "requires_grad",
        "ndimension",
        "is_contiguous",
        "stride",
    }
)
METADATA_FUNCTIONS = frozenset({"zeros_like", "empty_like", "ones_like", "full_like", "rand_like"})
TENSOR_EVIDENCE = frozenset(
    METADATA_USES
    | {
        "contiguous",
        "view",
        "reshape",
        "to",
        "float",
        "half",
        "t",
        "transpose",
        "clone",
        "detach",
        "new_empty",
        "new_zeros",
        "new_ones",
        "unsqueeze",
        "squeeze",
        "permute",
        "expand",
        "sum",
        "mean",
        "matmul",
        "mm",
        "bmm",
        "data_ptr",
        "numel",
        "element_size",
        "flatten",
        "masked_fill",
        "softmax",
        "exp",
        "log",
        "abs",
        "pow",
        "sqrt",
        "mul",
        "add",
        "sub",
        "div",
        "cuda",
        "cpu",
        "chunk",
        "split",
        "narrow",
        "gather",
        "scatter",
        "index_select",
    }
)


def _instantiated(source: str, name: str) -> bool:
    """Whether `Name(` is called anywhere in the text other than its class statement (asked
    only for classes with a non-static method: a literal search each, no whole-file scan)."""
    pattern = re.compile(rf"{re.escape(name)}[ \t]*\(")
    for match in pattern.finditer(source):
        before = source[match.start() - 1 : match.start()]
        if before and (before.isalnum() or before in "._"):
            continue  # `MyName(` or `x.Name(`: another name
        line_start = source.rfind("\n", 0, match.start()) + 1
        if not source[line_start : match.start()].rstrip(" \t").endswith("class"):
            return True
    return False


def _is_static(function: cst.FunctionDef) -> bool:
    return any(dotted(d.decorator) == "staticmethod" for d in function.decorators)


def _params(function: cst.FunctionDef) -> list[cst.Param]:
    return [*function.params.posonly_params, *function.params.params]


def _mutation(node: cst.CSTNode) -> tuple[cst.BaseExpression, cst.CSTNode] | None:
    """(the mutated expression, the node to report) for in-place statements, else None."""
    if isinstance(node, cst.AugAssign):
        return node.target, node
    if isinstance(node, cst.Assign):
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                return target.target.value, node
        return None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        name = node.func.attr.value
        if name.endswith("_") and not name.endswith("__") and name not in METADATA_INPLACE:
            return node.func.value, node
    return None


@dataclass
class _Helper:
    """What a static helper method of the class does to its parameters."""

    params: list[str]
    mutates: dict[int, cst.CSTNode] = field(default_factory=dict)  # param index -> statement
    returns: dict[int | None, int] = field(default_factory=dict)  # tuple index -> param index


class FunctionContract(Check):
    """AGL401-AGL408 over every autograd.Function class, plus AGL407 on call sites."""

    GATE = CONTRACT

    def run(self) -> None:
        facts = self.ctx.facts
        self.by_name = {info.name: info for info in facts.classes}
        for info in facts.function_classes:
            self.ctx.enter(info.node)
            legacy = [info.name, *(b.rsplit(".", 1)[-1] for b in info.base_names)]
            if "NestedIOFunction" in legacy:
                continue  # the legacy NestedIOFunction API (and torch's own) is non-static
            self._static_methods(info)
            forward = self._method(info, "forward")
            backward = info.methods.get("backward")
            if forward is not None and "forward" in info.methods:
                self._forward(info, forward)
            if backward is not None:
                self._backward_inplace(info, backward)
                self._backward_ctx_state(info, backward)
                if forward is not None:
                    self._arity(info, forward, backward)
        self._direct_calls()

    def _method(self, info: ClassInfo, name: str) -> cst.FunctionDef | None:
        """`name` as `info` resolves it: its own, else its first known base's (memoised, so a
        long chain of subclasses costs one step per class)."""
        # By class node, not name: a test module may define several local classes of one name.
        memo: dict[tuple[int, str], cst.FunctionDef | None] = self.__dict__.setdefault(
            "_method_memo", {}
        )
        chain: list[ClassInfo] = []
        current: ClassInfo | None = info
        found: cst.FunctionDef | None = None
        while current is not None:
            key = (id(current.node), name)
            if key in memo:
                found = memo[key]
                break
            if name in current.methods:
                found = current.methods[name]
                chain.append(current)
                break
            memo[key] = None  # provisional: a cycle of bases ends here
            chain.append(current)
            parents = [self.by_name.get(b.rsplit(".", 1)[-1]) for b in current.base_names]
            current = next((p for p in parents if p is not None), None)
        for visited in chain:
            memo[(id(visited.node), name)] = found
        return found

    # --- AGL402 ------------------------------------------------------------------------------
    def _static_methods(self, info: ClassInfo) -> None:
        instantiated: bool | None = None
        for name in CONTRACT_METHODS:
            method = info.methods.get(name)
            if method is None or _is_static(method):
                continue
            is_classmethod = any(dotted(d.decorator) == "classmethod" for d in method.decorators)
            fix = None
            if not is_classmethod:
                # Through the class (`apply`, `Fn.forward(ctx, x)`) a plain function and a
                # static method are the same; through an instance the plain one gets the
                # instance as its first argument, so the fix is proven only without instances.
                if instantiated is None:
                    instantiated = _instantiated(self.ctx.facts.source, info.name)
                note = (
                    f"`{info.name}(...)` is instantiated in this file: looked up on an instance, "
                    f"`{name}` gets the instance as its first argument until it is static"
                    if instantiated
                    else ""
                )
                fix = add_decorator_fix(method, "staticmethod", note=note)
            self.report("AGL402", method, anchor=method.name, fix=fix, cls=info.name, method=name)

    # --- AGL401 ------------------------------------------------------------------------------
    def _arity(self, info: ClassInfo, forward: cst.FunctionDef, backward: cst.FunctionDef) -> None:
        params = forward.params
        if isinstance(params.star_arg, cst.Param) or params.kwonly_params:
            return  # *args forwards or keyword-only inputs: the count is not knowable
        inputs = _params(forward)
        setup_style = self._method(info, "setup_context") is not None
        if not setup_style:
            inputs = inputs[1:]
        total = len(inputs)
        required = sum(1 for p in inputs if p.default is None)
        flow = self.ctx.flow(backward)
        for ret, _order in flow.returns:
            count, extras_none = self._count(ret.value, total)
            if count is None:
                continue
            if count < required or (count > total and not extras_none):
                expected = str(total) if required == total else f"{required} to {total}"
                self.report(
                    "AGL401",
                    ret,
                    cls=info.name,
                    expected=expected,
                    actual=count,
                    shown=expected.split(" ")[-1],
                )

    @staticmethod
    def _count(value: cst.BaseExpression | None, total: int) -> tuple[int | None, bool]:
        """(number of gradients returned, whether those past `total` are all None)."""
        if value is None:
            return None, True
        elements = _tuple_elements(value)
        if elements is not None:
            extras = elements[total:]
            return len(elements), all(isinstance(e, cst.Name) and e.value == "None" for e in extras)
        if _has_tuple(value):
            return None, True  # `(None, None) + grads`: the length depends on runtime values
        if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)) or (
            isinstance(value, cst.Name) and value.value == "None"
        ):
            return 1, True
        return None, True

    # --- AGL403 / AGL404 / AGL405 in forward ------------------------------------------------
    def _forward(self, info: ClassInfo, forward: cst.FunctionDef) -> None:
        flow = self.ctx.flow(forward)
        setup_style = self._method(info, "setup_context") is not None
        params = _params(forward)
        ctx_name = None if setup_style or not params else params[0].name.value
        inputs = [p for p in (params if setup_style else params[1:])]
        input_names = [p.name.value for p in inputs]
        vararg = (
            forward.params.star_arg.name.value
            if isinstance(forward.params.star_arg, cst.Param)
            else None
        )
        tensors = self._tensor_inputs(inputs, flow, forward)
        if vararg:
            tensors.add(vararg)
        outputs = self._returned_names(flow)
        helpers = self._helpers(info.name)
        if ctx_name:
            self._ctx_stash(info, flow, ctx_name, tensors | outputs)
            self._save_for_backward(info, flow, ctx_name, inputs)
        self._forward_inplace(
            info,
            forward,
            flow,
            set(input_names) | ({vararg} if vararg else set()),
            tensors,
            ctx_name,
            helpers,
        )

    def _tensor_inputs(
        self, inputs: list[cst.Param], flow: MethodFlow, forward: cst.FunctionDef
    ) -> set[str]:
        """Inputs that are tensors: by annotation, or by how forward uses them."""
        evidence = {
            node.value.value
            for node in flow.attribute_reads
            if isinstance(node.value, cst.Name) and node.attr.value in TENSOR_EVIDENCE
        }
        for site in flow.calls:
            if (dotted(site.node.func) or "").endswith("save_for_backward"):
                for arg in site.node.args:
                    if isinstance(arg.value, cst.Name):
                        evidence.add(arg.value.value)
        out: set[str] = set()
        for param in inputs:
            name = param.name.value
            annotation = param.annotation
            if annotation is not None:
                text = cst.Module([]).code_for_node(annotation.annotation)
                if "Tensor" in text or "Parameter" in text:
                    out.add(name)
                continue
            if name in evidence:
                out.add(name)
        return out

    @staticmethod
    def _returned_names(flow: MethodFlow) -> set[str]:
        names: set[str] = set()
        for ret, _ in flow.returns:
            value = ret.value
            elements = value.elements if isinstance(value, cst.Tuple) else [value]
            for element in elements:
                expr = element.value if isinstance(element, cst.BaseElement) else element
                if isinstance(expr, cst.Name) and expr.value != "None":
                    names.add(expr.value)
        return names

    def _ctx_stash(
        self, info: ClassInfo, flow: MethodFlow, ctx_name: str, tensors: set[str]
    ) -> None:
        metadata_only = self._metadata_only_attrs(info, ctx_name)

        found: list[tuple[cst.CSTNode, str, str]] = []
        for node, _order in flow.statements:
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
                        base = v
                        while isinstance(base, cst.Subscript):
                            base = base.value
                        if isinstance(base, cst.Name) and base.value in tensors:
                            found.append((node, t.attr.value, base.value))
        for node, attr, name in found:
            if attr in metadata_only:
                continue
            self.report("AGL403", node, cls=info.name, attr=attr, name=name)

    def _metadata_only_attrs(self, info: ClassInfo, ctx_name: str) -> set[str]:
        """ctx attributes every other method reads only for shape/dtype/device."""
        uses: dict[str, list[bool]] = {}

        def ctx_attr(expr: cst.BaseExpression) -> str | None:
            if (
                isinstance(expr, cst.Attribute)
                and isinstance(expr.value, cst.Name)
                and expr.value.value in ("ctx", ctx_name)
            ):
                return expr.attr.value
            return None

        for name, method in info.methods.items():
            if name == "forward":
                continue
            flow = self.ctx.flow(method)
            for node in flow.attribute_reads:
                attr = ctx_attr(node.value)
                if attr is not None:
                    uses.setdefault(attr, []).append(node.attr.value in METADATA_USES)
            for site in flow.calls:
                callee = (dotted(site.node.func) or "").rsplit(".", 1)[-1]
                for arg in site.node.args:
                    attr = ctx_attr(arg.value)
                    if attr is not None:
                        uses.setdefault(attr, []).append(callee in METADATA_FUNCTIONS)
        return {attr for attr, flags in uses.items() if flags and all(flags)}

    def _save_for_backward(
        self, info: ClassInfo, flow: MethodFlow, ctx_name: str, inputs: list[cst.Param]
    ) -> None:
        scalars = {
            p.name.value
            for p in inputs
            if p.annotation is not None
            and re.fullmatch(
                r"(Optional\[)?(int|float|bool|str)\]?",
                cst.Module([]).code_for_node(p.annotation.annotation).replace(" ", ""),
            )
        }
        calls = [
            site
            for site in flow.calls
            if dotted(site.node.func) == f"{ctx_name}.save_for_backward" and not site.in_nested_def
        ]
        for site in calls:
            for position, arg in enumerate(site.node.args):
                if self._non_tensor(arg.value, scalars):
                    self.report(
                        "AGL404",
                        arg.value,
                        cls=info.name,
                        problem=f"argument {position} (`{source_of(self.ctx.facts.module, arg.value)}`)"
                        " is not a tensor: PyTorch raises TypeError",
                    )
        method = flow.function
        for earlier, later in zip(calls, calls[1:], strict=False):
            a = statement_in_block(method, earlier.node)
            b = statement_in_block(method, later.node)
            if a is not None and b is not None and a[0] is b[0]:
                self.report(
                    "AGL404",
                    later.node,
                    cls=info.name,
                    problem="it is called a second time: the second call replaces the tensors "
                    "of the first",
                )

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

    # --- AGL405: forward mutates an input ---------------------------------------------------
    def _helpers(self, class_name: str) -> dict[str, _Helper]:
        """Summaries of the static helpers of a class of this file (memoised per class)."""
        cache: dict[str, dict[str, _Helper]] = self.__dict__.setdefault("_helper_cache", {})
        if class_name in cache:
            return cache[class_name]
        helpers: dict[str, _Helper] = {}
        cache[class_name] = helpers
        node = self.ctx.facts.class_nodes.get(class_name)
        methods = (
            [s for s in node.body.body if isinstance(s, cst.FunctionDef)]
            if node is not None and isinstance(node.body, cst.IndentedBlock)
            else []
        )
        for method in methods:
            name = method.name.value
            if name in CONTRACT_METHODS or not _is_static(method):
                continue
            flow = self.ctx.flow(method)
            helper = _Helper(params=flow.params)
            for node, order in flow.statements:
                found = _mutation(node)
                if found is None:
                    continue
                origin = self._alias_of(found[0], flow, order, set(flow.params), {})
                if origin is not None and origin in flow.params:
                    helper.mutates.setdefault(flow.params.index(origin), found[1])
            for ret, order in flow.returns:
                value = ret.value
                elements = value.elements if isinstance(value, cst.Tuple) else None
                items = (
                    [(i, e.value) for i, e in enumerate(elements)]
                    if elements is not None
                    else [(None, value)]
                )
                for index, expr in items:
                    if expr is None:
                        continue
                    origin = self._alias_of(expr, flow, order, set(flow.params), {})
                    if origin is not None:
                        helper.returns[index] = flow.params.index(origin)
            helpers[name] = helper
        return helpers

    def _alias_of(
        self,
        expr: cst.BaseExpression,
        flow: MethodFlow,
        order: int,
        roots: set[str],
        helpers: dict[str, _Helper],
        cls: str | None = None,
        depth: int = 0,
    ) -> str | None:
        """The root parameter whose storage `expr` may share, if any."""
        if depth > 20:
            return None
        if isinstance(expr, cst.Name):
            definition = flow.definition_before(expr.value, order)
            if definition is None:
                return None
            if definition.kind == "param":
                return expr.value if expr.value in roots else None
            if definition.value is None or definition.kind in ("with", "loop"):
                return None
            if definition.kind == "augassign":
                return self._alias_of(
                    cst.Name(expr.value), flow, definition.order, roots, helpers, cls, depth + 1
                )
            value = definition.value
            if isinstance(value, cst.Call) and cls is not None:
                helper = self._helper_of(value, helpers, cls)
                if helper is not None:
                    key = definition.index if definition.kind == "unpack" else None
                    param = helper.returns.get(key)
                    if param is not None and param < len(value.args):
                        return self._alias_of(
                            value.args[param].value,
                            flow,
                            definition.order,
                            roots,
                            helpers,
                            cls,
                            depth + 1,
                        )
                    return None
            if definition.kind == "unpack":
                return None
            return self._alias_of(value, flow, definition.order, roots, helpers, cls, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._alias_of(expr.value, flow, order, roots, helpers, cls, depth + 1)
        if isinstance(expr, cst.Attribute) and expr.attr.value in ALIASING:
            return self._alias_of(expr.value, flow, order, roots, helpers, cls, depth + 1)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in ALIASING:
                return self._alias_of(expr.func.value, flow, order, roots, helpers, cls, depth + 1)
        return None

    def _helper_of(self, call: cst.Call, helpers: dict[str, _Helper], cls: str) -> _Helper | None:
        """The summary of `Cls.helper(...)`: a static method of this class or another one here."""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            owner = func.value.value
            if owner in (cls, "cls", "self", "ctx"):
                return helpers.get(func.attr.value)
            if owner in self.ctx.facts.class_nodes:
                return self._helpers(owner).get(func.attr.value)
        return None

    def _forward_inplace(
        self,
        info: ClassInfo,
        forward: cst.FunctionDef,
        flow: MethodFlow,
        inputs: set[str],
        tensors: set[str],
        ctx_name: str | None,
        helpers: dict[str, _Helper],
    ) -> None:
        dirty: set[str] = set()
        for site in flow.calls:
            if (dotted(site.node.func) or "").endswith("mark_dirty"):
                for arg in site.node.args:
                    origin = self._alias_of(arg.value, flow, site.order, inputs, helpers, info.name)
                    if origin:
                        dirty.add(origin)
        reported: set[str] = set()
        for node, order in flow.statements:
            found = _mutation(node)
            if found is not None:
                origin = self._alias_of(found[0], flow, order, inputs, helpers, info.name)
                # `x += 1` on an int and `d[k] = v` on a dict are not tensor mutations: those
                # forms need evidence that the input is a tensor; `x.add_()` is evidence itself.
                if origin and not isinstance(node, cst.Call) and origin not in tensors:
                    continue
                if origin and origin not in dirty and origin not in reported:
                    reported.add(origin)
                    self.report("AGL405", found[1], cls=info.name, name=origin)
        for site in flow.calls:  # helpers that mutate what forward hands them
            helper = self._helper_of(site.node, helpers, info.name)
            if helper is None:
                continue
            for index, statement in helper.mutates.items():
                if index >= len(site.node.args):
                    continue
                origin = self._alias_of(
                    site.node.args[index].value, flow, site.order, inputs, helpers, info.name
                )
                if origin and origin not in dirty and origin not in reported:
                    reported.add(origin)
                    self.report("AGL405", statement, cls=info.name, name=origin)

    # --- AGL406 / AGL408 in backward --------------------------------------------------------
    def _backward_inplace(self, info: ClassInfo, backward: cst.FunctionDef) -> None:
        flow = self.ctx.flow(backward)
        grads = set(flow.params[1:]) | ({flow.vararg} if flow.vararg else set())
        reported: set[str] = set()
        for node, order in flow.statements:
            found = _mutation(node)
            if found is None:
                continue
            origin = self._alias_of(found[0], flow, order, grads, {})
            if origin and origin not in reported:
                reported.add(origin)
                fix = copy_gradient_first(
                    backward, flow, origin, dense=False, title=f"copy `{origin}` before changing it"
                )
                self.report("AGL406", found[1], fix=fix, cls=info.name, name=origin)

    def _backward_ctx_state(self, info: ClassInfo, backward: cst.FunctionDef) -> None:
        flow = self.ctx.flow(backward)
        ctx_name = flow.params[0] if flow.params else "ctx"
        ctx_aliases = {ctx_name}
        attr_aliases: set[str] = set()
        for name, defs in flow.defs.items():
            for d in defs:
                if isinstance(d.value, cst.Attribute) and dotted(d.value.value) == ctx_name:
                    attr_aliases.add(name)

        def on_ctx(expr: cst.BaseExpression) -> bool:
            while isinstance(expr, cst.Subscript):
                expr = expr.value
            if isinstance(expr, cst.Attribute):
                return dotted(expr.value) in ctx_aliases
            return isinstance(expr, cst.Name) and expr.value in attr_aliases

        for node, _order in flow.statements:
            if isinstance(node, cst.Del):
                target = node.target
                targets = (
                    [e.value for e in target.elements]
                    if isinstance(target, cst.Tuple)
                    else [target]
                )
                for t in targets:
                    if isinstance(t, cst.Name):
                        continue  # `del local` only unbinds the local name
                    if on_ctx(t):
                        self.report(
                            "AGL408",
                            node,
                            cls=info.name,
                            code=source_of(self.ctx.facts.module, node),
                        )
                        return
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                # A bare `.pop()` takes from a stack a paired Function refills (fairscale's pipe
                # checkpointing); popping a key or clearing destroys state for good.
                method = node.func.attr.value
                consumes = (method == "pop" and node.args) or method in ("popitem", "clear")
                if consumes and on_ctx(node.func.value):
                    self.report(
                        "AGL408", node, cls=info.name, code=source_of(self.ctx.facts.module, node)
                    )
                    return

    # --- AGL407 -----------------------------------------------------------------------------
    def _direct_calls(self) -> None:
        facts = self.ctx.facts
        self.ctx.enter(None)  # call sites can be anywhere in the module
        imported = facts.project.function_names  # Functions of other files, by their names here
        functions = {info.name for info in facts.function_classes} | imported
        if not functions:
            return
        # The whole-module visit is the expensive part: only do it when the text has a call.
        if not direct_call_offsets(facts.source, functions):
            return
        reporter = self

        class _Calls(FastVisitor):
            def __init__(self) -> None:
                self.ctx_names: list[str | None] = []

            def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
                params = _params(node)
                self.ctx_names.append(params[0].name.value if params else None)

            def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
                self.ctx_names.pop()

            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                if (
                    isinstance(func, cst.Attribute)
                    and func.attr.value == "forward"
                    and isinstance(func.value, cst.Name)
                    and func.value.value in functions
                ):
                    if reporter._passes_a_ctx(func.value.value, node):
                        return  # forward called as a plain function with a ctx (or stand-in)
                    reporter._report_direct(node, func.value.value, "forward")
                elif (
                    isinstance(func, cst.Call)
                    and isinstance(func.func, cst.Name)
                    and func.func.value in functions
                    and not func.args
                ):
                    reporter._report_direct(node, func.func.value, "instance")

        _Calls().walk(facts.module)

    def _passes_a_ctx(self, cls: str, call: cst.Call) -> bool:
        """True when the call supplies forward's ctx slot itself (`Base.forward(ctx, x)`,
        `Fn.forward(None, x)`): a deliberate plain call. Only a call one argument short is the
        forgotten `.apply`."""
        info = self.by_name.get(cls)
        given = len([a for a in call.args if a.keyword is None])
        if info is None:  # a Function of another file: its forward, as the index read it
            signature = dict(self.ctx.facts.project.signatures).get(cls)
            if signature is None or signature.setup_context or any(a.star for a in call.args):
                return True
            return given >= signature.required + 1
        forward = self._method(info, "forward")
        if forward is None or any(arg.star for arg in call.args):
            return True
        params = _params(forward)
        if self._method(info, "setup_context") is not None:  # type: ignore[arg-type]
            return True  # forward has no ctx slot: a direct call is ambiguous
        required = sum(1 for p in params if p.default is None)
        return given >= required

    def _report_direct(self, call: cst.Call, cls: str, how: str) -> None:
        shown = f"{cls}.forward(...)" if how == "forward" else f"{cls}()(...)"

        def build(edits: Edits) -> None:
            edits.nodes[id(call)] = lambda updated: updated.with_changes(  # type: ignore[attr-defined]
                func=cst.Attribute(cst.Name(cls), cst.Name("apply"))
            )

        fix = Fix("unsafe", call, build, f"call `{cls}.apply(...)`")
        self.report("AGL407", call, anchor=call.func, fix=fix, cls=cls, shown=shown)


def _tuple_elements(expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The elements of a tuple expression built from literals: `(a,) + (None,) * 3`."""
    if isinstance(expr, cst.Tuple):
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return None
        return [e.value for e in expr.elements]
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Add):
            left, right = _tuple_elements(expr.left), _tuple_elements(expr.right)
            return None if left is None or right is None else left + right
        if isinstance(expr.operator, cst.Multiply):
            for seq, times in ((expr.left, expr.right), (expr.right, expr.left)):
                items = _tuple_elements(seq)
                if items is not None and isinstance(times, cst.Integer):
                    return items * int(times.value)
    return None


def _has_tuple(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Tuple):
        return True
    if isinstance(expr, cst.Call) and dotted(expr.func) in ("tuple", "list"):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return _has_tuple(expr.left) or _has_tuple(expr.right)
    return False
