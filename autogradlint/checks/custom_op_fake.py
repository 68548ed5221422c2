"""AGL413: a custom op with no fake implementation anywhere in the project.

A `torch.library.custom_op` runs eagerly without one, but `torch.compile`, `torch.export` and
`opcheck` trace it on fake tensors and fail (semantics D13.1); `@op.register_fake` (or
`torch.library.register_fake("ns::op")`) fixes it (D13.2). An op defined from a schema string
(`Library.define`, `torch.library.define`) whose Python kernels are all for backend keys
(`"CPU"`, `"cuda"`) fails the same way; a `Meta` kernel or a composite one is its fake (D13.3).
Not flagged: `triton_op` (its function is its fake, D13.4), an op that mutates its arguments
and returns nothing (torch generates that fake, D13.6), a schema op with no Python kernel (its
kernels are C++, unknown here), and an op whose name the file spells only at run time.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

import libcst as cst

from ..analysis.fake_kernels import (
    Registrations,
    library_namespace,
    registers_fake,
    registrations,
)
from ..analysis.names import dotted
from ..text.ast_walk import ast_dotted, walk
from ..text.statements import parse_holding
from .base import Check
from .gates import Gate, pattern
from .reads import Reads

CUSTOM_OP = frozenset({"torch.library.custom_op", "torch._library.custom_ops.custom_op"})
DEFINE = frozenset({"torch.library.define"})
BACKEND_KEYS = frozenset(
    {"CPU", "CUDA", "XPU", "MPS", "HIP", "MTIA", "HPU", "PrivateUse1"}
    | {"cpu", "cuda", "xpu", "mps", "hip", "mtia", "hpu", "privateuseone"}
)
_SCHEMA = re.compile(r"^\s*([A-Za-z_]\w*)(?:\.\w+)?\s*\(.*\)\s*->", re.S)
_QUALIFIED = re.compile(r"^(?:([A-Za-z_{][\w{}.]*)::)?([A-Za-z_]\w*)(?:\.\w+)?$")


@dataclass(frozen=True)
class OpDefinition:
    node: cst.CSTNode  # what the finding points at
    name: str  # as the file writes it: `ns::op`, `{NS}::op`, or `op` (a Library's define)
    short: str  # the op's name after `::`
    namespace: str | None  # when the file spells it
    python: str | None  # the name the module binds the op to
    kind: str  # custom_op | define
    trivial: bool = False  # mutates its arguments and returns nothing: torch makes its fake
    library: str | None = None  # `lib` of `lib.define(...)`: its namespace is the Library's


class CustomOpFake(Check):
    """AGL413 on the file's module-level op definitions."""

    codes = ("AGL413",)
    gate = Gate(
        (pattern(b"custom_op", rb"custom_op[ \t]*\("), pattern(b"define", rb"define[ \t]*\(")),
        (b"torch",),
    )
    reads = Reads(op_definitions=True)

    _project: Registrations | None = None

    def _faked_elsewhere(self, op: OpDefinition, module: str) -> bool:
        """Whether another file of the project registers the op's fake. A text with no file
        (stdin, a test's source) has no project around it to read."""
        if not os.path.isfile(self.ctx.path):
            return False
        if self._project is None:
            self._project = registrations(self.ctx.native.root)
            # the result stays valid while the files that can register a fake do
            self.ctx.summaries.consulted.update(path for path, _ in self._project.files)
        return self._project.faking(op.short, op.python, op.namespace, module) is not None

    def run(self) -> None:
        impl_calls: list[ast.Call] | None = None
        module = os.path.splitext(os.path.basename(self.ctx.path or "ops.py"))[0]
        for op in _definitions(self.ctx.facts.module, self.ctx.facts.imports):
            if op.trivial:
                continue
            text = self.ctx.facts.source
            if op.namespace is None and op.library is not None:
                namespace = library_namespace(text, op.library)
                if namespace is not None:
                    op = replace(op, namespace=namespace)
            if op.kind == "define":
                if impl_calls is None:
                    impl_calls = _impl_calls(text)
                if not _backend_only(impl_calls, op):
                    continue
            if registers_fake(text, op.short, op.python, op.namespace):
                continue
            if self._faked_elsewhere(op, module):
                continue
            self.ctx.enter(op.python or (op.name if "{" not in op.name else None))
            register = (
                f"`@{op.python}.register_fake`"
                if op.kind == "custom_op" and op.python
                else f'`torch.library.register_fake("{op.name}")`'
            )
            self.report("AGL413", op.node, shown=op.name, detail=register)


def _definitions(module: cst.Module, imports: object) -> Iterator[OpDefinition]:
    for statement in _module_statements(module):
        yield from _in_statement(statement, imports)


def _module_statements(module: cst.Module) -> Iterator[cst.CSTNode]:
    """Module-level statements, also those inside top-level `if` / `try` / `with` blocks."""
    stack: list[cst.CSTNode] = list(reversed(module.body))
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleStatementLine):
            yield from node.body
        elif isinstance(node, (cst.If, cst.Try, cst.With, cst.Else, cst.Finally)):
            blocks: list[cst.CSTNode] = [node.body]
            if isinstance(node, cst.If) and node.orelse is not None:
                blocks.append(node.orelse)
            if isinstance(node, cst.Try):
                blocks += [h.body for h in node.handlers]
                blocks += [b for b in (node.orelse, node.finalbody) if b is not None]
            for block in reversed(blocks):
                if isinstance(block, cst.IndentedBlock):
                    stack.extend(reversed(block.body))
                elif isinstance(block, (cst.If, cst.Else, cst.Finally)):
                    stack.append(block)
        else:
            yield node


def _in_statement(node: cst.CSTNode, imports: object) -> Iterator[OpDefinition]:
    resolve = imports.resolve  # type: ignore[attr-defined]
    if isinstance(node, cst.FunctionDef):
        for decorator in node.decorators:
            expr = decorator.decorator
            if isinstance(expr, cst.Call) and resolve(expr.func) in CUSTOM_OP:
                op = _custom_op(expr, node.name.value, node, node.name)
                if op is not None:
                    yield op
        return
    value: cst.BaseExpression | None = None
    target: str | None = None
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        value = node.value
        target = dotted(node.targets[0].target)
    elif isinstance(node, cst.Expr):
        value = node.value
    if not isinstance(value, cst.Call):
        return
    if resolve(value.func) in CUSTOM_OP:
        positional = [a for a in value.args if a.keyword is None]
        if len(positional) >= 2:  # custom_op("ns::op", fn, mutates_args=...)
            op = _custom_op(value, target, None, value)
            if op is not None:
                yield op
        return
    if isinstance(value.func, cst.Call) and resolve(value.func.func) in CUSTOM_OP:
        op = _custom_op(value.func, target, None, value)  # custom_op("ns::op", ...)(fn)
        if op is not None:
            yield op
        return
    define = _define(value, resolve)
    if define is not None:
        yield define


def _custom_op(
    call: cst.Call, python: str | None, function: cst.FunctionDef | None, anchor: cst.CSTNode
) -> OpDefinition | None:
    name = _string(call.args[0].value) if call.args and call.args[0].keyword is None else None
    if name is None:
        return None
    parsed = _QUALIFIED.match(name)
    if parsed is None:
        return None
    namespace, short = parsed.group(1), parsed.group(2)
    return OpDefinition(
        anchor,
        name,
        short,
        namespace if namespace and "{" not in namespace else None,
        python,
        "custom_op",
        _trivial(call, function),
    )


def _trivial(call: cst.Call, function: cst.FunctionDef | None) -> bool:
    """Mutates an argument and returns nothing: torch generates its fake (semantics D13.6)."""
    mutates = next(
        (a.value for a in call.args if a.keyword and a.keyword.value == "mutates_args"), None
    )
    if mutates is None:
        return False
    mutating = not (
        isinstance(mutates, (cst.Tuple, cst.List, cst.Set)) and not mutates.elements
    ) and not (isinstance(mutates, cst.Dict) and not mutates.elements)
    schema = next((a.value for a in call.args if a.keyword and a.keyword.value == "schema"), None)
    text = _string(schema) if schema is not None else None
    if text is not None:
        returns_nothing = text.replace(" ", "").endswith("->()")
    elif function is not None and function.returns is not None:
        annotation = function.returns.annotation
        returns_nothing = isinstance(annotation, cst.Name) and annotation.value == "None"
    else:
        returns_nothing = False
    return mutating and returns_nothing


def _define(call: cst.Call, resolve: object) -> OpDefinition | None:
    """`lib.define("op(Tensor x) -> Tensor")`, `torch.library.define("ns::op", "(...) -> ...")`."""
    func = call.func
    strings = [_string(a.value) for a in call.args if a.keyword is None]
    if resolve(func) in DEFINE and len(strings) >= 2 and strings[0] and strings[1]:  # type: ignore[operator]
        parsed = _QUALIFIED.match(strings[0])
        if parsed is None or "->" not in strings[1]:
            return None
        return OpDefinition(call, strings[0], parsed.group(2), parsed.group(1), None, "define")
    if isinstance(func, cst.Attribute) and func.attr.value == "define" and strings and strings[0]:
        schema = _SCHEMA.match(strings[0])
        if schema is None:
            return None
        library = dotted(func.value)
        return OpDefinition(
            call, schema.group(1), schema.group(1), None, None, "define", library=library
        )
    return None


def _string(expr: cst.BaseExpression | None) -> str | None:
    """A string literal's text; an f-string's text with its fields as `{...}`."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(expr, cst.ConcatenatedString):
        left, right = _string(expr.left), _string(expr.right)
        return left + right if left is not None and right is not None else None
    if isinstance(expr, cst.FormattedString):
        parts = []
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringText):
                parts.append(part.value)
            elif isinstance(part, cst.FormattedStringExpression):
                parts.append("{" + (dotted(part.expression) or "?") + "}")
        return "".join(parts)
    return None


# What the callee of every `impl(...)` call holds (`lib.impl`, `torch.library.impl`, `py_impl`).
_IMPL = re.compile("impl")


def _impl_calls(text: str) -> list[ast.Call]:
    """The file's calls of a callee whose name ends with `impl`, read once for all its ops
    from the top-level statements that mention `impl`."""
    tree, _lines = parse_holding(text, _IMPL)
    if tree is None:
        return []
    return [
        node
        for node in walk(tree)
        if isinstance(node, ast.Call) and (ast_dotted(node.func) or "").endswith("impl")
    ]


def _backend_only(impl_calls: list[ast.Call], op: OpDefinition) -> bool:
    """Whether the file gives the schema op Python kernels, and only for backend keys: a kernel
    for any other key (`Meta`, a composite one, none given: the composite default), or for a
    key it names at run time, may be its fake."""
    keys: list[str | None] = []
    for node in impl_calls:
        found = _kernel_keys(node, op)
        if found is not None:
            keys += found
    return bool(keys) and all(key in BACKEND_KEYS for key in keys)


def _kernel_keys(call: ast.Call, op: OpDefinition) -> list[str | None] | None:
    """The dispatch keys an `impl(...)` call registers `op` for (None: a key named at run
    time), or None when the call is not about `op`: `lib.impl("op", fn, "CPU")`,
    `torch.library.impl("ns::op", "cpu")` (also as a decorator), the older
    `torch.library.impl(lib, "op", "CPU")`."""
    args = list(call.args)
    at = next(
        (
            i
            for i, a in enumerate(args[:2])
            if isinstance(a, ast.Constant)
            and isinstance(a.value, str)
            and a.value.rsplit("::", 1)[-1].split(".")[0] == op.short
        ),
        None,
    )
    if at is None:
        return None
    callee = ast_dotted(call.func) or ""
    keywords: tuple[str, ...]
    if at == 1:  # torch.library.impl(lib, "op", key)
        position, keywords = 2, ("dispatch_key",)
    elif callee == "impl" or callee.endswith("library.impl"):  # torch.library.impl("ns::op", types)
        position, keywords = 1, ("types", "device_types")
    else:  # lib.impl("op", fn, key)
        position, keywords = 2, ("dispatch_key",)
    values = [k.value for k in call.keywords if k.arg in keywords]
    if position < len(args):
        values.insert(0, args[position])
    keys: list[str | None] = []
    for value in values:
        keys += _literal_keys(value)
    return keys or ["default"]  # no key: the composite default


def _literal_keys(value: ast.expr) -> list[str | None]:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return [value.value]
    if isinstance(value, (ast.List, ast.Tuple)):
        return [
            e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None
            for e in value.elts
        ]
    return [None]  # named at run time
