"""Whether a value a method holds can be a tensor: read from the definitions that may reach a
statement, the expressions that made them, and the `if` tests around it.

Three answers: a tensor (evidence: a torch op, a tensor method, arithmetic on one, a forward
input known to be one), not a tensor (a literal, a shape, a count, `.tolist()`, a bool, a
`torch.Size`, a value an `isinstance` test just proved to be an int), or unknown (an opaque
call). The contract rules report only on evidence: a value nothing shows to be a tensor (a
process group, a handle a library returned) is not one to them.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from .aliasing import ALIASING_METHODS, VIEW_METHODS
from .branches import Branches
from .flow import Definition, MethodFlow
from .names import ImportTable, dotted

TENSOR, OTHER, UNKNOWN = "tensor", "other", "unknown"

# Builtins whose result is never a tensor.
_PLAIN_BUILTINS = frozenset(
    {
        "len",
        "int",
        "float",
        "bool",
        "str",
        "isinstance",
        "issubclass",
        "hasattr",
        "callable",
        "id",
        "type",
        "range",
        "repr",
        "hash",
        "round",
        "min",
        "max",
        "sum",
        "divmod",
    }
)
# Tensor methods whose result is a Python value or metadata, never a tensor.
PLAIN_METHODS = frozenset(
    {
        "tolist",
        "item",
        "size",
        "dim",
        "ndimension",
        "numel",
        "nelement",
        "stride",
        "storage_offset",
        "data_ptr",
        "element_size",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "get_device",
        "untyped_storage",
        "__len__",
    }
)
# Tensor attributes that are metadata.
PLAIN_ATTRIBUTES = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "ndim",
        "is_cuda",
        "requires_grad",
        "layout",
        "is_leaf",
        "is_sparse",
        "is_quantized",
        "names",
        "_version",
    }
)
# Tensor methods that return a tensor (their receiver is one too).
TENSOR_METHODS = VIEW_METHODS | frozenset(
    {
        "clone",
        "contiguous",
        "detach",
        "movedim",
        "type_as",
        "new_empty",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_tensor",
        "masked_fill",
        "matmul",
        "mm",
        "bmm",
        "softmax",
        "log_softmax",
        "exp",
        "log",
        "abs",
        "pow",
        "sqrt",
        "rsqrt",
        "mul",
        "add",
        "sub",
        "div",
        "neg",
        "sum",
        "mean",
        "amax",
        "amin",
        "clamp",
        "sigmoid",
        "tanh",
        "relu",
        "gather",
        "scatter",
        "index_select",
        "repeat",
        "repeat_interleave",
        "float",
        "half",
        "bfloat16",
        "double",
        "long",
        "int",
        "bool",
        "T",
        "mT",
        "data",
        "grad",
    }
)
# torch callables that return no tensor (the rest of `torch.*` is taken to make tensors).
_PLAIN_TORCH = frozenset(
    {
        "torch.Size",
        "torch.device",
        "torch.dtype",
        "torch.is_tensor",
        "torch.is_grad_enabled",
        "torch.is_inference_mode_enabled",
        "torch.get_default_dtype",
        "torch.finfo",
        "torch.iinfo",
        "torch.is_floating_point",
        "torch.is_complex",
        "torch.numel",
        "torch.Generator",
        "torch.get_autocast_gpu_dtype",
        "torch.get_autocast_dtype",
        "torch.is_autocast_enabled",
        "torch.compiler.is_compiling",
    }
)
# torch namespaces whose callables are about devices, processes or the engine, not tensors.
_PLAIN_TORCH_PREFIXES = (
    "torch.cuda.",
    "torch.backends.",
    "torch.distributed.",
    "torch.autograd.",
    "torch.utils.",
    "torch._C.",
    "torch.jit.",
    "torch.compiler.",
    "torch.library.",
)
_TENSOR_NN = ("torch.nn.functional.", "torch.nn.Parameter", "torch.nn.parameter.")
# Types an `isinstance` test proves a value not to be a tensor.
_PLAIN_TYPES = frozenset(
    {"int", "float", "bool", "str", "list", "tuple", "dict", "set", "numbers.Number", "Number"}
)
_TENSOR_TYPES = frozenset({"torch.Tensor", "Tensor", "torch.nn.Parameter", "Parameter"})


class TensorKinds:
    """What the values of one method can be, asked at a statement of it."""

    def __init__(
        self,
        flow: MethodFlow,
        imports: ImportTable,
        tensor_params: set[str],
        plain_params: set[str] = frozenset(),  # type: ignore[assignment]
        extensions: Callable[[cst.Call], bool] | None = None,
    ) -> None:
        self.flow = flow
        self.imports = imports
        self.tensor_params = tensor_params
        self.plain_params = plain_params
        self.extensions = extensions
        self.branches = Branches(flow.function)

    # --- names ------------------------------------------------------------------------------
    def reaching(self, name: str, at: cst.CSTNode, order: int) -> list[Definition]:
        """The definitions of `name` that may hold at statement `at` (order `order`): from the
        last one before it back to the first that runs on every path to it."""
        before = sorted(
            (d for d in self.flow.defs.get(name, ()) if d.order < order),
            key=lambda d: d.order,
            reverse=True,
        )
        found: list[Definition] = []
        for definition in before:
            found.append(definition)
            node = None if definition.kind == "param" else definition.node
            if self.branches.dominates(node, at):
                break
        return found

    def name_kind(self, name: str, at: cst.CSTNode, order: int, depth: int = 0) -> str:
        """TENSOR when one definition that may hold at `at` is a tensor, OTHER when none can
        be (or the `if` tests around `at` exclude one), else UNKNOWN."""
        if self.narrowed_plain(name, at):
            return OTHER
        kinds = {self._definition_kind(d, depth) for d in self.reaching(name, at, order)}
        if not kinds:
            return UNKNOWN
        if TENSOR in kinds:
            return TENSOR
        return OTHER if kinds == {OTHER} else UNKNOWN

    def roots(self, name: str, at: cst.CSTNode, order: int, depth: int = 0) -> set[str]:
        """The parameters a value that may hold at `at` may share storage with (`x =
        x.contiguous()`, `cos = cos.squeeze()`): the inputs it is, or a view or a no-op
        conversion of."""
        found: set[str] = set()
        if depth > 12:
            return found
        for definition in self.reaching(name, at, order):
            if definition.kind == "param":
                found.add(definition.name)
            elif definition.kind == "augassign" and definition.node is not None:
                found |= self.roots(name, definition.node, definition.order, depth + 1)
            elif definition.kind in ("assign", "unpack") and definition.expression is not None:
                value = definition.expression
                if definition.kind == "unpack":  # `cos, sin = cos.squeeze(), sin.squeeze()`
                    index = definition.index
                    elements = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
                    if index is None or not 0 <= index < len(elements):
                        continue
                    value = elements[index].value
                base = receiver_root(value)
                if base is not None and definition.node is not None:
                    found |= self.roots(base, definition.node, definition.order, depth + 1)
        return found

    def _definition_kind(self, definition: Definition, depth: int) -> str:
        if definition.kind == "param":
            if definition.name in self.plain_params:
                return OTHER
            return TENSOR if definition.name in self.tensor_params else UNKNOWN
        if definition.kind == "augassign":
            assert definition.node is not None  # recorded with its statement
            at = definition.node
            return self.name_kind(definition.name, at, definition.order, depth + 1)
        value = definition.expression
        if value is None or definition.kind in ("loop", "with"):
            return UNKNOWN
        if definition.kind == "unpack":
            # `a, b = torch.split(x, 2)`: the parts of what made a tensor are tensors; the
            # parts of an opaque call's tuple are whatever it returned.
            if isinstance(value, cst.Call) and self.expression_kind(value, definition, depth) == (
                TENSOR
            ):
                return TENSOR
            if isinstance(value, cst.Attribute) and self._saved_tensors(value):
                return TENSOR  # `row, count = ctx.saved_tensors`
            if isinstance(value, (cst.Tuple, cst.List)) and definition.index is not None:
                elements = value.elements
                if 0 <= definition.index < len(elements):
                    return self.expression_kind(elements[definition.index].value, definition, depth)
            return UNKNOWN
        return self.expression_kind(value, definition, depth)

    def _saved_tensors(self, expr: cst.Attribute) -> bool:
        """`ctx.saved_tensors`, on the method's first parameter."""
        params = self.flow.params
        return (
            expr.attr.value == "saved_tensors"
            and isinstance(expr.value, cst.Name)
            and bool(params)
            and expr.value.value == params[0]
        )

    def _ctx_attribute_kind(self, expr: cst.Attribute, where: Definition, depth: int) -> str:
        """`ctx.x` read back in the method that kept it (`ctx.x = x.contiguous()`, then
        `kernel(ctx.x, ...)`): what the last `ctx.x = ...` before `where` kept."""
        params = self.flow.params
        if not (isinstance(expr.value, cst.Name) and params and expr.value.value == params[0]):
            return UNKNOWN
        kept: tuple[cst.Assign, int] | None = None
        for node, order in self.flow.statements:
            if order >= where.order or not isinstance(node, cst.Assign):
                continue
            if any(
                isinstance(t.target, cst.Attribute)
                and isinstance(t.target.value, cst.Name)
                and t.target.value.value == params[0]
                and t.target.attr.value == expr.attr.value
                for t in node.targets
            ) and (kept is None or order > kept[1]):
                kept = (node, order)
        if kept is None:
            return UNKNOWN
        node, order = kept
        store = Definition(expr.attr.value, node.value, order, "", kind="assign", node=node)
        return self.expression_kind(node.value, store, depth + 1)

    # --- expressions ------------------------------------------------------------------------
    def expression_kind(self, expr: cst.BaseExpression, where: Definition, depth: int = 0) -> str:
        """What `expr`, evaluated at definition `where`, can be."""
        if depth > 12:
            return UNKNOWN
        if isinstance(
            expr,
            (
                cst.Integer,
                cst.Float,
                cst.Imaginary,
                cst.SimpleString,
                cst.ConcatenatedString,
                cst.FormattedString,
                cst.Lambda,
                cst.Dict,
                cst.DictComp,
                cst.Set,
                cst.SetComp,
            ),
        ):
            return OTHER
        if isinstance(expr, cst.Name):
            if expr.value in ("None", "True", "False"):
                return OTHER
            # a position with no statement of its own: every earlier definition may hold there
            at = where.node if where.node is not None else self.flow.function
            return self.name_kind(expr.value, at, where.order, depth + 1)
        if isinstance(expr, (cst.Tuple, cst.List)):
            kinds = {self.expression_kind(e.value, where, depth + 1) for e in expr.elements}
            # A tuple of tensors is kept the same way a tensor is (and escapes the same checks).
            if TENSOR in kinds:
                return TENSOR
            return OTHER if kinds <= {OTHER} else UNKNOWN
        if isinstance(expr, cst.Comparison):
            if all(
                isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn))
                for c in expr.comparisons
            ):
                return OTHER
            return self._operands_kind(
                [expr.left, *(c.comparator for c in expr.comparisons)], where, depth
            )
        if isinstance(expr, cst.UnaryOperation):
            if isinstance(expr.operator, cst.Not):
                return OTHER
            return self.expression_kind(expr.expression, where, depth + 1)
        if isinstance(expr, cst.BooleanOperation):
            return self._union(
                [
                    self.expression_kind(expr.left, where, depth + 1),
                    self.expression_kind(expr.right, where, depth + 1),
                ]
            )
        if isinstance(expr, cst.IfExp):
            return self._union(
                [
                    self.expression_kind(expr.body, where, depth + 1),
                    self.expression_kind(expr.orelse, where, depth + 1),
                ]
            )
        if isinstance(expr, cst.BinaryOperation):
            return self._operands_kind([expr.left, expr.right], where, depth)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in PLAIN_ATTRIBUTES:
                return OTHER
            if self._saved_tensors(expr):
                return TENSOR  # what forward saved: tensors (or None, which no test excludes)
            if expr.attr.value in TENSOR_METHODS:
                return TENSOR
            return self._ctx_attribute_kind(expr, where, depth)
        if isinstance(expr, cst.Subscript):
            # An element or a slice of a tensor is a tensor; of a shape, an int.
            return self.expression_kind(expr.value, where, depth + 1)
        if isinstance(expr, cst.Call):
            return self._call_kind(expr, where, depth)
        return UNKNOWN

    def _call_kind(self, call: cst.Call, where: Definition, depth: int) -> str:
        func = call.func
        if isinstance(func, cst.Name) and not self.imports.is_imported(func.value):
            if func.value in _PLAIN_BUILTINS and func.value not in self.flow.defs:
                return OTHER
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            resolved = self.imports.resolve(func) or ""
            if resolved.startswith("torch."):
                return self._torch_kind(resolved)
            if method in PLAIN_METHODS:
                return OTHER
            if method in TENSOR_METHODS:
                return TENSOR
            if method == "new" and self.expression_kind(func.value, where, depth + 1) == TENSOR:
                return TENSOR  # `x.new()`: the legacy constructor, a tensor only on one
        resolved = self.imports.resolve(func) or ""
        if resolved.startswith("torch."):
            return self._torch_kind(resolved)
        if self.extensions is not None and self.extensions(call):
            # a compiled kernel's result, when it is given a tensor (a constructor of the
            # extension's own objects, `CoordinateMapKey(size)`, makes no tensor)
            kinds = [self.expression_kind(arg.value, where, depth + 1) for arg in call.args]
            return TENSOR if TENSOR in kinds else UNKNOWN
        return UNKNOWN

    @staticmethod
    def _torch_kind(resolved: str) -> str:
        if resolved in _PLAIN_TORCH:
            return OTHER
        if resolved.startswith(_PLAIN_TORCH_PREFIXES):
            return UNKNOWN
        if resolved.startswith("torch.nn.") and not resolved.startswith(_TENSOR_NN):
            return UNKNOWN  # a module, an init helper
        return TENSOR

    def _operands_kind(
        self, operands: list[cst.BaseExpression], where: Definition, depth: int
    ) -> str:
        """Arithmetic: a tensor when one operand is; plain when all are."""
        kinds = [self.expression_kind(o, where, depth + 1) for o in operands]
        if TENSOR in kinds:
            return TENSOR
        return OTHER if all(k == OTHER for k in kinds) else UNKNOWN

    @staticmethod
    def _union(kinds: list[str]) -> str:
        if TENSOR in kinds:
            return TENSOR
        return OTHER if all(k == OTHER for k in kinds) else UNKNOWN

    # --- indexing ----------------------------------------------------------------------------
    def index_copies(self, subscript: cst.Subscript, order: int) -> bool:
        """Whether reading `subscript` at `order` copies: one of its indices is a tensor, a
        list or a boolean mask (advanced indexing, semantics D5.4). Integers, slices, `None`
        and `...` make a view; an index nothing shows to be a tensor is taken for an int."""
        where = Definition("", None, order, "", kind="assign")
        for element in subscript.slice:
            index = element.slice
            if not isinstance(index, cst.Index):
                continue  # a slice
            value = index.value
            if isinstance(value, (cst.List, cst.ListComp)):
                return True
            if isinstance(value, cst.Comparison) and not all(
                isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn))
                for c in value.comparisons
            ):
                return True  # `x[x > 0]`: a mask
            if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
                if self.expression_kind(value, where) == TENSOR:
                    return True
        return False

    # --- what the `if` tests around a statement say ------------------------------------------
    def narrowed_plain(self, name: str, at: cst.CSTNode) -> bool:
        """Whether an `if` around `at` proves `name` not a tensor there: the body of
        `isinstance(name, int)` (or of any non-tensor type), of `name is None`, or the else
        branch of `isinstance(name, torch.Tensor)` / `torch.is_tensor(name)`."""
        for test, held in self.branches.conditions(at):
            verdict = self._test_says(test.test, name)
            if verdict is None:
                continue
            if verdict == held:
                return True
        return False

    def _test_says(self, test: cst.BaseExpression, name: str) -> bool | None:
        """True when the test holding means `name` is no tensor, False when it failing does,
        None when it says nothing of that."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._test_says(test.expression, name)
            return None if inner is None else not inner
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            if (
                isinstance(test.left, cst.Name)
                and test.left.value == name
                and isinstance(target.comparator, cst.Name)
                and target.comparator.value == "None"
            ):
                if isinstance(target.operator, cst.Is):
                    return True
                if isinstance(target.operator, cst.IsNot):
                    return None
            return None
        if not isinstance(test, cst.Call) or not test.args:
            return None
        first = test.args[0].value
        if not (isinstance(first, cst.Name) and first.value == name):
            return None
        called = self.imports.resolve(test.func) or ""
        if called in ("torch.is_tensor",):
            return False
        if called != "isinstance" or len(test.args) != 2:
            return None
        second = test.args[1].value
        types = [e.value for e in second.elements] if isinstance(second, cst.Tuple) else [second]
        spelled = [dotted(t) or "" for t in types]
        if all(s in _PLAIN_TYPES for s in spelled):
            return True
        resolved = [self.imports.resolve_dotted(s) if s else "" for s in spelled]
        if all(
            r in _TENSOR_TYPES or s in _TENSOR_TYPES for s, r in zip(spelled, resolved, strict=True)
        ):
            return False
        return None


_SHARING = ALIASING_METHODS | {"contiguous", "data", "T", "mT"}


def receiver_root(expr: cst.BaseExpression) -> str | None:
    """`x` for `x`, `x.contiguous()`, `x.T`, `x[0]`, `x.view(-1).float()`: the name a chain of
    views, no-op conversions and indexing starts from (what may share its storage)."""
    while True:
        if isinstance(expr, cst.Name):
            return None if expr.value in ("None", "True", "False") else expr.value
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value not in _SHARING:
                return None
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute):
            if expr.attr.value not in _SHARING:
                return None
            expr = expr.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        else:
            return None
