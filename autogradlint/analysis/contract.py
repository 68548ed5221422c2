"""What the Function-contract checks share: how a class resolves its methods, what its static
helpers do to their parameters, and which storage an expression may share with an input."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from .aliasing import ALIASING_METHODS
from .facts import ClassInfo, FileFacts
from .flow import CallSite, MethodFlow
from .names import ImportTable, dotted
from .tensor_api import is_tensor_attribute
from .tensor_kinds import TensorKinds

if TYPE_CHECKING:
    from .inherited import Inherited

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


def is_static(function: cst.FunctionDef) -> bool:
    return any(dotted(d.decorator) == "staticmethod" for d in function.decorators)


def params(function: cst.FunctionDef) -> list[cst.Param]:
    """The positional parameters a caller passes, positional-only ones first: a
    `@classmethod`'s `cls` is bound by Python, never passed (semantics D1.5)."""
    found = [*function.params.posonly_params, *function.params.params]
    return found[1:] if is_classmethod(function) else found


def is_classmethod(function: cst.FunctionDef) -> bool:
    return any(dotted(d.decorator) == "classmethod" for d in function.decorators)


def mutation(node: cst.CSTNode) -> tuple[cst.BaseExpression, cst.CSTNode] | None:
    """(the mutated expression, the node to report) for in-place statements, else None."""
    if isinstance(node, cst.AugAssign):
        return node.target, node
    if isinstance(node, cst.Assign):
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                return target.target.value, node
            if isinstance(target.target, cst.Attribute) and target.target.attr.value == "data":
                # `x.data = t` gives the caller's tensor other memory, and the version counter
                # never hears of it (semantics D5.7)
                return target.target.value, node
        return None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        name = node.func.attr.value
        if name.endswith("_") and not name.endswith("__") and name not in METADATA_INPLACE:
            if name == "copy_" and _copies_onto_itself(node):
                return None  # `t.copy_(t)`: the values never change (semantics D5.5)
            return node.func.value, node
    if isinstance(node, cst.Call) and (dotted(node.func) or "").startswith("torch."):
        # `torch.exp(x, out=y)`: the op writes its result into `y`'s memory
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                if not isinstance(arg.value, (cst.Tuple, cst.List)):
                    return arg.value, node
    return None


def _names_in(expr: cst.CSTNode) -> Iterator[cst.Name]:
    """The variables an expression reads (not the attribute names in `x.attr`)."""
    if isinstance(expr, cst.Name):
        yield expr
    elif isinstance(expr, cst.Attribute):
        yield from _names_in(expr.value)
    else:
        for child in expr.children:
            yield from _names_in(child)


def _copies_onto_itself(call: cst.Call) -> bool:
    assert isinstance(call.func, cst.Attribute)  # a method call: `t.copy_(...)`
    target = dotted(call.func.value)
    source = call.args[0].value if call.args and call.args[0].keyword is None else None
    return target is not None and source is not None and dotted(source) == target


def save_for_backward_calls(flow: MethodFlow, ctx_name: str) -> list[CallSite]:
    """forward's own `ctx.save_for_backward(...)` calls (not those of nested functions)."""
    target = f"{ctx_name}.save_for_backward"
    return [
        site for site in flow.calls if dotted(site.node.func) == target and not site.in_nested_def
    ]


def returned_names(flow: MethodFlow) -> set[str]:
    """The names a method returns, alone or as tuple elements (`return out, None`)."""
    names: set[str] = set()
    for ret, _ in flow.returns:
        value = ret.value
        elements = value.elements if isinstance(value, cst.Tuple) else [value]
        for element in elements:
            expr = element.value if isinstance(element, cst.BaseElement) else element
            if isinstance(expr, cst.Name) and expr.value != "None":
                names.add(expr.value)
    return names


# Evidence a tensor shares with common non-tensors: a config or a module has `dtype` and
# `device`, `to()`, `cuda()`, `float()`; a `torch.Size` has `numel()`; a process group has
# `size()`; `new()` is the legacy Tensor constructor, and a name other classes use. It counts
# only when nothing else read of the value is foreign to a tensor.
WEAK_EVIDENCE = frozenset(
    {"dtype", "device", "shape", "to", "cuda", "cpu", "float", "half", "numel", "is_cuda", "new"}
)


def tensor_inputs(inputs: list[cst.Param], flow: MethodFlow) -> set[str]:
    """Inputs that are tensors: by annotation, or by how forward uses them: a tensor method
    (`x.view(...)`, `x.size(0)`), `save_for_backward(x)`, or metadata (`x.dtype`) when
    nothing else forward reads of it is foreign to a tensor (`cfg.block_size`). An input
    forward calls (`provider(lo, hi)`) is never one; `.size()` without an argument is no
    evidence (a process group's `group.size()` is its world size)."""
    # Only what is read of the input itself counts: not of a value the name is rebound to.
    reads: dict[str, set[str]] = {}
    for node in flow.attribute_reads:
        if isinstance(node.value, cst.Name) and flow.binds_param_at(
            node.value.value, flow.read_orders.get(id(node), 0)
        ):
            reads.setdefault(node.value.value, set()).add(node.attr.value)
    strong: set[str] = set()
    for site in flow.calls:
        func = site.node.func
        if (dotted(func) or "").endswith("save_for_backward"):
            for arg in site.node.args:
                if isinstance(arg.value, cst.Name) and flow.binds_param_at(
                    arg.value.value, site.order
                ):
                    strong.add(arg.value.value)
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "size"
            and isinstance(func.value, cst.Name)
            and site.node.args
            and flow.binds_param_at(func.value.value, site.order)
        ):
            strong.add(func.value.value)  # `x.size(0)`: a tensor's dimension
    called = plain_inputs(flow)
    out: set[str] = set()
    for param in inputs:
        name = param.name.value
        annotation = param.annotation
        if annotation is not None:
            if is_tensor_annotation(annotation.annotation):
                out.add(name)
            continue
        if name in called:
            continue
        if number_default(param):
            # `scale=2.0` handed to save_for_backward is AGL404's bug (torch raises there),
            # not evidence that the number is a tensor (shown by tests/oracle, K23)
            strong.discard(name)
        attrs = reads.get(name, set())
        if name in strong or attrs & (TENSOR_EVIDENCE - WEAK_EVIDENCE - {"size"}):
            out.add(name)
        elif attrs & WEAK_EVIDENCE and all(is_tensor_attribute(a) for a in attrs):
            out.add(name)
    return out


def number_default(param: cst.Param) -> bool:
    """An unannotated parameter whose default is a number literal (`scale=2.0`, `eps=-1`)."""
    default = param.default
    if isinstance(default, cst.UnaryOperation) and isinstance(default.operator, cst.Minus):
        default = default.expression
    return param.annotation is None and isinstance(default, (cst.Integer, cst.Float))


def shape_varargs(flow: MethodFlow) -> bool:
    """Whether forward's `*args` holds sizes: unpacked into a method or factory that takes
    a shape (`x.view(*sizes)`, `torch.zeros(*shape)`)."""
    if flow.vararg is None:
        return False
    for site in flow.calls:
        func = site.node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else dotted(func) or ""
        if name.rsplit(".", 1)[-1] not in _SHAPE_TAKERS:
            continue
        if any(
            arg.star == "*" and isinstance(arg.value, cst.Name) and arg.value.value == flow.vararg
            for arg in site.node.args
        ):
            return True
    return False


_SHAPE_TAKERS = frozenset(
    {
        "view",
        "reshape",
        "expand",
        "repeat",
        "permute",
        "new_zeros",
        "new_empty",
        "new_ones",
        "new_full",
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "Size",
    }
)


def plain_inputs(flow: MethodFlow) -> set[str]:
    """Parameters the method calls (`provider(lo, hi)`): a tensor is not callable."""
    return {
        site.node.func.value
        for site in flow.calls
        if isinstance(site.node.func, cst.Name) and site.node.func.value in flow.params
    }


_UNIONS = frozenset({"Optional", "Union"})


def is_tensor_annotation(expr: cst.BaseExpression) -> bool:
    """`Tensor`, `torch.Tensor`, `nn.Parameter`, or an Optional / union holding one; never a
    container or a generic of it (`list[Tensor]`, `Request[Tensor]` is an awaitable)."""
    if isinstance(expr, cst.SimpleString):  # a forward reference: "torch.Tensor"
        try:
            expr = cst.parse_expression(expr.evaluated_value)  # type: ignore[arg-type]
        except (cst.ParserSyntaxError, TypeError):
            return False
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
        return is_tensor_annotation(expr.left) or is_tensor_annotation(expr.right)
    if isinstance(expr, cst.Subscript):
        head = (dotted(expr.value) or "").rsplit(".", 1)[-1]
        return head in _UNIONS and any(
            isinstance(element.slice, cst.Index) and is_tensor_annotation(element.slice.value)
            for element in expr.slice
        )
    name = (dotted(expr) or "").rsplit(".", 1)[-1]
    return name.endswith("Tensor") or name == "Parameter"


# Builtin containers: a `list[Tensor]` input holds the caller's very tensors. A generic of
# anything else (`Request[Tensor]`, an awaitable handle) holds what it likes.
_CONTAINERS = frozenset({"list", "List", "tuple", "Tuple", "Sequence", "MutableSequence"})


def is_tensor_container_annotation(expr: cst.BaseExpression) -> bool:
    """`list[Tensor]`, `List[torch.Tensor]`, `tuple[Tensor, ...]`, `Sequence[Tensor]`, or an
    Optional / union holding one: a builtin container whose elements are the tensors."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
        return is_tensor_container_annotation(expr.left) or is_tensor_container_annotation(
            expr.right
        )
    if not isinstance(expr, cst.Subscript):
        return False
    head = (dotted(expr.value) or "").rsplit(".", 1)[-1]
    elements = [e.slice.value for e in expr.slice if isinstance(e.slice, cst.Index)]
    if head in _UNIONS:
        return any(is_tensor_container_annotation(e) for e in elements)
    return head in _CONTAINERS and any(is_tensor_annotation(e) for e in elements)


@dataclass
class ForwardInputs:
    """forward as the contract reads it."""

    flow: MethodFlow
    ctx_name: str | None  # None with setup_context (forward has no ctx slot)
    inputs: list[cst.Param]
    vararg: str | None
    tensors: set[str]  # inputs known to be tensors (the vararg counts as one)

    @property
    def names(self) -> set[str]:
        return {p.name.value for p in self.inputs} | ({self.vararg} if self.vararg else set())


@dataclass
class StaticHelper:
    """What a static helper method of the class does to its parameters."""

    params: list[str]
    mutates: dict[int, cst.CSTNode] = field(default_factory=dict)  # param index -> statement
    returns: dict[int | None, int] = field(default_factory=dict)  # tuple index -> param index


class ContractView:
    """One file's Function classes as the contract checks read them; built once per file
    (`CheckContext.shared`) so each check's questions are answered once."""

    def __init__(
        self,
        facts: FileFacts,
        flow: Callable[[cst.FunctionDef], MethodFlow],
        inherited: Inherited | None = None,
    ) -> None:
        self.facts = facts
        self.flow = flow
        self.inherited = inherited  # Function bases of other files (the project index)
        # Methods read from another file, by node: the imports their names resolve through.
        self.foreign_imports: dict[int, ImportTable] = {}
        self.foreign_paths: dict[int, str] = {}  # ... and the file that defines them
        self.by_name = {info.name: info for info in facts.classes}
        self._method_memo: dict[tuple[int, str], cst.FunctionDef | None] = {}
        self._helper_cache: dict[str, dict[str, StaticHelper]] = {}
        self._kinds: dict[int, TensorKinds] = {}

    def kinds(self, flow: MethodFlow, tensors: set[str] | None = None) -> TensorKinds:
        """What the values of a method can be (one per method; `tensors`: its parameters
        known to be tensors, given by the first to ask)."""
        found = self._kinds.get(id(flow))
        if found is None:
            found = TensorKinds(flow, self.facts.imports, set(tensors or ()))
            self._kinds[id(flow)] = found
        return found

    def forwards(self) -> Iterator[tuple[ClassInfo, ForwardInputs]]:
        """The Function classes that define forward themselves, with forward as read."""
        for info in self.classes():
            forward = info.methods.get("forward")
            if forward is not None:
                yield info, self.forward_of(info, forward)

    def classes(self) -> Iterator[ClassInfo]:
        """The Function classes the contract applies to."""
        for info in self.facts.function_classes:
            legacy = [info.name, *(b.rsplit(".", 1)[-1] for b in info.base_names)]
            if "NestedIOFunction" not in legacy:
                # the legacy NestedIOFunction API (and torch's own) is non-static
                yield info

    def backward_classes(self) -> Iterator[ClassInfo]:
        """The classes whose own backward torch runs: the Function classes, and the plain
        mixins a Function of the project derives from (`class Fn(GradMixin, Function)` runs
        `GradMixin.backward`, whichever module defines it: `FileView.mixins`)."""
        yield from self.classes()
        for info in self.facts.classes:
            if "mixin" in info.kinds and not info.is_function:
                yield info

    def method(self, info: ClassInfo, name: str) -> cst.FunctionDef | None:
        """`name` as `info` resolves it: its own, else its first known base's (memoised, so a
        long chain of subclasses costs one step per class)."""
        # By class node, not name: a test module may define several local classes of one name.
        memo = self._method_memo
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
            if current is None and self.inherited is not None:
                # The first base defined in another file: its lineage, from the project.
                found = self._foreign(chain[-1], name)
                break
        for visited in chain:
            memo[(id(visited.node), name)] = found
        return found

    def base_method(self, info: ClassInfo, name: str) -> cst.FunctionDef | None:
        """`name` as the bases of `info` resolve it, its own left out (the backward a forward
        of another module was written with, under a subclass here that defines its own)."""
        parents = [self.by_name.get(b.rsplit(".", 1)[-1]) for b in info.base_names]
        parent = next((p for p in parents if p is not None), None)
        if parent is not None:
            return self.method(parent, name)
        return self._foreign(info, name) if self.inherited is not None else None

    def _foreign(self, info: ClassInfo, name: str) -> cst.FunctionDef | None:
        """`name` as the first base of `info` defined in another file resolves it."""
        assert self.inherited is not None  # asked only with the project's view
        for arg in info.node.bases:
            written = dotted(arg.value) if arg.keyword is None else None
            found = self.inherited.method(written, name) if written else None
            if found is not None:
                method, owner = found
                self.foreign_imports[id(method)] = owner.imports
                self.foreign_paths[id(method)] = owner.path
                return method
        return None

    def is_foreign(self, method: cst.FunctionDef) -> bool:
        """Whether a method was read from another file (never a place to report)."""
        return id(method) in self.foreign_imports

    def forward_of(self, info: ClassInfo, forward: cst.FunctionDef) -> ForwardInputs:
        """forward's ctx slot and inputs, and which inputs are tensors."""
        flow = self.flow(forward)
        setup_style = self.method(info, "setup_context") is not None
        positional = params(forward)
        # With setup_context, forward has no ctx slot: every parameter is an input.
        ctx_name = None if setup_style or not positional else positional[0].name.value
        inputs = positional if setup_style else positional[1:]
        star = forward.params.star_arg
        vararg = star.name.value if isinstance(star, cst.Param) else None
        tensors = tensor_inputs(inputs, flow)
        if vararg and not shape_varargs(flow):
            tensors.add(vararg)
        self.kinds(flow, tensors)
        return ForwardInputs(flow, ctx_name, inputs, vararg, tensors)

    def helpers(self, class_name: str) -> dict[str, StaticHelper]:
        """Summaries of the static helpers of a class of this file (memoised per class)."""
        cache = self._helper_cache
        if class_name in cache:
            return cache[class_name]
        helpers: dict[str, StaticHelper] = {}
        cache[class_name] = helpers
        node = self.facts.class_nodes.get(class_name)
        methods = (
            [s for s in node.body.body if isinstance(s, cst.FunctionDef)]
            if node is not None and isinstance(node.body, cst.IndentedBlock)
            else []
        )
        for method in methods:
            name = method.name.value
            if name in CONTRACT_METHODS or not is_static(method):
                continue
            flow = self.flow(method)
            helper = StaticHelper(params=flow.params)
            for statement, order in flow.statements:
                found = mutation(statement)
                if found is None:
                    continue
                origin = self.alias_of(
                    found[0],
                    flow,
                    order,
                    set(flow.params),
                    {},
                    setitem=isinstance(statement, cst.AugAssign),
                )
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
                    origin = self.alias_of(expr, flow, order, set(flow.params), {})
                    if origin is not None:
                        helper.returns[index] = flow.params.index(origin)
            helpers[name] = helper
        return helpers

    def alias_of(
        self,
        expr: cst.BaseExpression,
        flow: MethodFlow,
        order: int,
        roots: set[str],
        helpers: dict[str, StaticHelper],
        cls: str | None = None,
        depth: int = 0,
        setitem: bool = False,
    ) -> str | None:
        """The root parameter whose storage `expr` may share, if any. `setitem`: `expr` is the
        target of an item assignment (`x[i] += v`), which writes into `x` whatever the index;
        read, an index tensor, a list or a mask copies (semantics D5.4)."""
        if depth > 20:
            return None
        if isinstance(expr, cst.Name):
            definition = flow.definition_before(expr.value, order)
            if definition is None:
                return None
            if definition.kind == "param":
                return expr.value if expr.value in roots else None
            if definition.kind == "loop" and isinstance(definition.value, cst.Name):
                # `for arg in args:` over an input that holds tensors (`*args`, a list of
                # them): each element is one the caller passed
                iterated = definition.value
                origin = self.alias_of(iterated, flow, definition.order, roots, {}, cls, depth + 1)
                return origin if origin == iterated.value else None
            if definition.value is None or definition.kind in ("with", "loop"):
                return None
            if definition.kind == "augassign":
                return self.alias_of(
                    cst.Name(expr.value), flow, definition.order, roots, helpers, cls, depth + 1
                )
            value = definition.expression
            assert value is not None  # neither a parameter nor an augmented assignment
            if isinstance(value, cst.Call) and cls is not None:
                helper = self.helper_of(value, helpers, cls)
                if helper is not None:
                    key = definition.index if definition.kind == "unpack" else None
                    param = helper.returns.get(key)
                    if param is not None and param < len(value.args):
                        return self.alias_of(
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
            return self.alias_of(value, flow, definition.order, roots, helpers, cls, depth + 1)
        if isinstance(expr, cst.Subscript):
            if not setitem and self.kinds(flow).index_copies(expr, order):
                return None
            return self.alias_of(expr.value, flow, order, roots, helpers, cls, depth + 1)
        if isinstance(expr, cst.IfExp):
            # `q if q.is_contiguous() else q.clone()`: the input itself on one branch, chosen
            # by what the tensor is. A flag the caller passes (`x if inplace else x.clone()`)
            # is the caller asking for the write, and a later `if not inplace:` may tell the
            # branches apart again: not followed.
            for branch in (expr.body, expr.orelse):
                origin = self.alias_of(branch, flow, order, roots, helpers, cls, depth + 1)
                if origin is not None and any(
                    self.alias_of(name, flow, order, roots, helpers, cls, depth + 1) == origin
                    for name in _names_in(expr.test)
                ):
                    return origin
            return None
        if isinstance(expr, cst.Attribute) and expr.attr.value in ALIASING:
            return self.alias_of(expr.value, flow, order, roots, helpers, cls, depth + 1)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in ALIASING:
                return self.alias_of(expr.func.value, flow, order, roots, helpers, cls, depth + 1)
        return None

    def helper_of(
        self, call: cst.Call, helpers: dict[str, StaticHelper], cls: str
    ) -> StaticHelper | None:
        """The summary of `Cls.helper(...)`: a static method of this class or another one here."""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            owner = func.value.value
            if owner in (cls, "cls", "self", "ctx"):
                return helpers.get(func.attr.value)
            if owner in self.facts.class_nodes:
                return self.helpers(owner).get(func.attr.value)
        return None
