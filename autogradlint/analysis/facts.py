"""Per-file facts: imports, autograd.Function classes, overrides, compiled-code bindings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase

import libcst as cst

from ..settings import DEFAULT_LOADERS
from ..text.functions import FUNCTION_BASES
from ..text.hierarchy import inherited
from ..view import EMPTY, FileView
from .names import ImportTable, callee_text, dotted, iter_statements

TENSOR_BASES = frozenset(
    {
        "torch.Tensor",
        "torch._C.TensorBase",
        "torch._C._TensorBase",
        "torch.nn.Parameter",
        "torch.nn.parameter.Parameter",
    }
)
FUNCTION_MODE_NAMES = frozenset({"TorchFunctionMode", "BaseTorchFunctionMode"})
DISPATCH_MODE_NAMES = frozenset({"TorchDispatchMode"})
TRITON_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics")
_CUSTOM_OP_RE = re.compile(r"""custom_op\(\s*["']([\w.]+)::(\w+)["']""")


@dataclass
class ClassInfo:
    """One class of interest and its methods (defs directly in the class body)."""

    node: cst.ClassDef
    name: str
    kinds: set[str] = field(
        default_factory=set
    )  # function | tensor | function_mode | dispatch_mode | mixin
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    base_names: list[str] = field(default_factory=list)

    @property
    def is_function(self) -> bool:
        return "function" in self.kinds

    @property
    def is_mode(self) -> bool:
        return bool(self.kinds & {"function_mode", "dispatch_mode"})


@dataclass(frozen=True)
class CustomOpAutograd:
    """A `torch.library` custom op's autograd registration: its backward function (called
    with ctx and one gradient per output, like `Function.backward`) and setup_context."""

    op: str  # the op as Python names it (`scale`), or its qualified name (`mylib::scale`)
    backward: cst.FunctionDef | None  # None: a lambda (only its setup_context is read)
    setup_context: cst.FunctionDef | None
    call: cst.Call  # the register_autograd call
    schema: cst.FunctionDef | None = None  # the op's own Python definition, when in this file
    qualified: str = ""  # `ns::op`, when the file says it
    # The op's inputs by name, from a schema string the file defines it with
    # (`lib.define("scale(Tensor x, float s) -> Tensor")`), when it has no Python definition.
    declared: tuple[str, ...] | None = None

    @property
    def subject(self) -> str | None:
        """What the confirmer runs: the op as this module binds it (`scale`), else `ns::op`,
        found through `torch.ops` once the module is imported (an op defined from a schema
        string has no Python name)."""
        return op_subject(self.op if self.op.isidentifier() else self.qualified or self.op)


_QUALIFIED_OP = re.compile(r"[A-Za-z_]\w*::[A-Za-z_]\w*")


def op_subject(name: str) -> str | None:
    """`name` when the confirmer can resolve it: a Python name, or `ns::op`."""
    return name if name.isidentifier() or _QUALIFIED_OP.fullmatch(name) else None


@dataclass
class FileFacts:
    """Everything the checks share about one parsed file, computed by one statement walk."""

    module: cst.Module
    imports: ImportTable
    classes: list[ClassInfo]
    compiled_names: set[str]  # local names bound to loaded extensions (`ext = load_inline(...)`)
    triton_kernels: set[str]  # functions decorated with triton.jit / autotune / heuristics
    python_custom_ops: set[str]  # `ns.op` defined in Python in this file via custom_op("ns::op")
    class_nodes: dict[str, cst.ClassDef] = field(default_factory=dict)  # every class, by name
    source: str = ""  # the full text (the module may be a slice of it)
    project: FileView = EMPTY  # what the rest of the project says about this file
    # Module-level functions, by name (those a Function calls are kept in the slice).
    functions: dict[str, cst.FunctionDef] = field(default_factory=dict)
    parsed: str = ""  # the text libcst parsed: the slice, or the full text
    custom_ops: list[CustomOpAutograd] = field(default_factory=list)

    @property
    def function_classes(self) -> list[ClassInfo]:
        return [info for info in self.classes if info.is_function]


def _decorator_name(decorator: cst.Decorator, imports: ImportTable) -> str | None:
    expr = decorator.decorator
    if isinstance(expr, cst.Call):
        expr = expr.func
    return imports.resolve(expr)


def collect_facts(
    module: cst.Module,
    source: str,
    *,
    loaders: tuple[str, ...] = DEFAULT_LOADERS,
    project: FileView = EMPTY,
    imports: ImportTable | None = None,
) -> FileFacts:
    """Walk the statements once and derive every file-level fact the checks need.

    `imports` comes from the slicer (CPython's `ast`) when it could read the file; otherwise
    the module's own import statements are collected."""
    collect_imports = imports is None
    imports = ImportTable() if imports is None else imports
    class_defs: list[cst.ClassDef] = []
    assigns: list[cst.Assign] = []
    triton: set[str] = set()
    function_defs: list[cst.FunctionDef] = []
    calls: list[cst.Call] = []  # module-level expression statements that are calls
    for stmt in iter_statements(module):
        # Exact types (no libcst node class is subclassed): a failed isinstance against one
        # goes through ABCMeta, five times per statement here.
        if type(stmt) is cst.Expr and type(stmt.value) is cst.Call:
            calls.append(stmt.value)
        if type(stmt) is cst.Import or type(stmt) is cst.ImportFrom:
            if collect_imports:
                imports.add(stmt)
        elif type(stmt) is cst.ClassDef:
            class_defs.append(stmt)
        elif type(stmt) is cst.FunctionDef:
            function_defs.append(stmt)
        elif type(stmt) is cst.Assign:
            assigns.append(stmt)

    for fn in function_defs:
        for decorator in fn.decorators:
            name = _decorator_name(decorator, imports) or ""
            if name.startswith(TRITON_DECORATORS):
                triton.add(fn.name.value)

    compiled: set[str] = set()
    for assign in assigns:
        if not isinstance(assign.value, cst.Call):
            continue
        text = callee_text(assign.value.func)
        if text is None:
            continue
        resolved = imports.resolve_dotted(text)
        if any(fnmatchcase(resolved, pattern) for pattern in loaders):
            for target in assign.targets:
                bound = dotted(target.target)
                if bound is not None:
                    compiled.add(bound)

    classes = _classify(class_defs, imports, project)
    functions = {stmt.name.value: stmt for stmt in module.body if isinstance(stmt, cst.FunctionDef)}
    registrations = _custom_op_autograd(module, imports, functions, calls)
    if "register_autograd" in source:
        registrations += _handed_class_autograd(imports, functions, calls, class_defs)
    if any(op.schema is None and op.qualified for op in registrations):
        declared = declared_inputs(source)
        registrations = [
            replace(op, declared=declared.get(op.qualified.rpartition("::")[2]))
            if op.schema is None and op.qualified
            else op
            for op in registrations
        ]
    custom_ops = {f"{ns}.{op}" for ns, op in _CUSTOM_OP_RE.findall(source)}
    class_nodes = {node.name.value: node for node in class_defs}
    return FileFacts(
        module,
        imports,
        classes,
        compiled,
        triton,
        custom_ops,
        class_nodes,
        source,
        project,
        functions,
        custom_ops=registrations,
    )


# `Library.define("scale(Tensor x, float s) -> Tensor")` and
# `torch.library.define("ns::scale", "(Tensor x, float s) -> Tensor")`: read from the text (the
# slice libcst parsed holds the registration, not the definition).
_LIBRARY_DEFINE = re.compile(r"""\.define\(\s*["'](\w+)\(([^()]*)\)\s*->""")
_QUALIFIED_DEFINE = re.compile(r"""define\(\s*["']\w+::(\w+)["']\s*,\s*["']\(([^()]*)\)\s*->""")


def declared_inputs(source: str) -> dict[str, tuple[str, ...]]:
    """Op name -> its input names, for the ops the text defines from a schema string. Schemas
    with alias annotations (`Tensor(a!) x`) or keyword-only inputs are left out: their count
    is not read here."""
    out: dict[str, tuple[str, ...]] = {}
    for pattern in (_LIBRARY_DEFINE, _QUALIFIED_DEFINE):
        for name, arguments in pattern.findall(source):
            pieces = [piece.strip() for piece in arguments.split(",") if piece.strip()]
            if any(piece == "*" for piece in pieces):
                continue
            names = [piece.split("=", 1)[0].split()[-1] for piece in pieces]
            if all(n.isidentifier() for n in names):
                out[name] = tuple(names)
    return out


_REGISTER = frozenset({"torch.library.register_autograd", "torch._library.register_autograd"})
_OP_DECORATORS = frozenset({"torch.library.custom_op", "torch.library.triton_op"})


def _custom_op_autograd(
    module: cst.Module,
    imports: ImportTable,
    functions: dict[str, cst.FunctionDef],
    calls: list[cst.Call],
) -> list[CustomOpAutograd]:
    """`op.register_autograd(backward, setup_context=...)` on an op this file defines, and
    `torch.library.register_autograd("ns::op", backward, ...)`, with module-level functions."""
    ops: dict[str, cst.FunctionDef] = {}
    qualified_of: dict[str, str] = {}  # python name -> ns::op
    for name, function in functions.items():
        for decorator in function.decorators:
            expr = decorator.decorator
            target = imports.resolve(expr.func if isinstance(expr, cst.Call) else expr) or ""
            if target in _OP_DECORATORS:
                ops[name] = function
                first = expr.args[0].value if isinstance(expr, cst.Call) and expr.args else None
                qualified = first.evaluated_value if isinstance(first, cst.SimpleString) else None
                if isinstance(qualified, str):
                    ops[qualified] = function  # `register_autograd("ns::op", ...)` names it so
                    qualified_of[name] = qualified
    found: list[CustomOpAutograd] = []
    for call in calls:
        func = call.func
        args = [arg for arg in call.args if arg.keyword is None]
        kwargs = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        resolved = imports.resolve(func) or ""
        if resolved in _REGISTER and len(args) >= 2:
            op_expr, backward = args[0].value, args[1].value
            text = op_expr.evaluated_value if isinstance(op_expr, cst.SimpleString) else None
            op = text if isinstance(text, str) else (dotted(op_expr) or "")
        elif isinstance(func, cst.Attribute) and func.attr.value == "register_autograd" and args:
            op, backward = dotted(func.value) or "", args[0].value
        else:
            continue
        backward = kwargs.get("backward", backward)
        setup = kwargs.get("setup_context")
        if isinstance(backward, cst.Name) and backward.value in functions:
            backward_node: cst.FunctionDef | None = functions[backward.value]
        elif isinstance(backward, cst.Lambda):
            backward_node = None
        else:
            continue
        setup_node = functions.get(setup.value) if isinstance(setup, cst.Name) else None
        schema = ops.get(op) or ops.get(op.rsplit(".", 1)[-1])
        shown = schema.name.value if schema is not None else op
        found.append(
            CustomOpAutograd(
                shown,
                backward_node,
                setup_node,
                call,
                schema,
                qualified_of.get(shown, op if "::" in op else ""),
            )
        )
    return found


def _handed_class_autograd(
    imports: ImportTable,
    functions: dict[str, cst.FunctionDef],
    calls: list[cst.Call],
    class_defs: list[cst.ClassDef],
) -> list[CustomOpAutograd]:
    """gsplat's `def _register(register): torch.library.register_autograd(f"ns::{register.base}",
    register.backward, setup_context=register.setup_context)`, called as `_register(Hooks)` with
    a class of this file: each class's `backward` (and `setup_context`, inherited from a base of
    the file too) is a custom-op backward. A `@classmethod` backward gets the class bound, so
    ctx is still the first parameter passed (analyse_method drops `cls`)."""
    classes = {node.name.value: node for node in class_defs}
    found: list[CustomOpAutograd] = []
    seen: set[int] = set()  # a backward inherited by two hook classes is read once
    for call in calls:
        if (imports.resolve(call.func) or "") not in _REGISTER:
            continue
        args = [arg for arg in call.args if arg.keyword is None]
        kwargs = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        backward = kwargs.get("backward", args[1].value if len(args) > 1 else None)
        op_expr = kwargs.get("op", args[0].value if args else None)
        if not (
            isinstance(backward, cst.Attribute)
            and isinstance(backward.value, cst.Name)
            and backward.attr.value == "backward"
        ):
            continue
        handed = backward.value.value
        setup = kwargs.get("setup_context")
        setup_attr = (
            setup.attr.value
            if isinstance(setup, cst.Attribute) and dotted(setup.value) == handed
            else None
        )
        for name, function in functions.items():
            position = _param_position(function, handed)
            if position is None or not _holds(function, call):
                continue
            for caller in calls:
                if not (isinstance(caller.func, cst.Name) and caller.func.value == name):
                    continue
                positional = [arg for arg in caller.args if arg.keyword is None and not arg.star]
                if position >= len(positional):
                    continue
                given = positional[position].value
                node = classes.get(given.value) if isinstance(given, cst.Name) else None
                if node is None:
                    continue
                backward_node = class_method(node, "backward", classes)
                if backward_node is None or id(backward_node) in seen:
                    continue
                seen.add(id(backward_node))
                setup_node = class_method(node, setup_attr, classes) if setup_attr else None
                aliases = _handed_attributes(function, handed)
                op = filled_string(op_expr, handed, aliases, node, classes)
                op = op or node.name.value  # `Hooks.backward` in messages; never confirmed
                found.append(
                    CustomOpAutograd(
                        op, backward_node, setup_node, call, None, op if "::" in op else ""
                    )
                )
    return found


def _handed_attributes(function: cst.FunctionDef, handed: str) -> dict[str, str]:
    """Names that stand for an attribute of the handed class: `register.base` itself, and
    `base` after `base = register.base` in the registrar (gsplat's spelling)."""
    out: dict[str, str] = {}
    for stmt in iter_statements(function.body):
        if (
            type(stmt) is cst.Assign
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0].target, cst.Name)
            and isinstance(stmt.value, cst.Attribute)
            and dotted(stmt.value.value) == handed
        ):
            out[stmt.targets[0].target.value] = stmt.value.attr.value
    return out


def _param_position(function: cst.FunctionDef, name: str) -> int | None:
    """Where `name` sits among `function`'s positional parameters (None: not one of them)."""
    names = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    return names.index(name) if name in names else None


def _holds(function: cst.FunctionDef, target: cst.CSTNode) -> bool:
    """Whether `target` is a statement-level call below `function` (not in a nested def)."""
    for stmt in iter_statements(function.body):
        if type(stmt) is cst.Expr and stmt.value is target:
            return True
    return False


def class_method(
    node: cst.ClassDef, name: str, classes: dict[str, cst.ClassDef], depth: int = 0
) -> cst.FunctionDef | None:
    """`name` defined in the class, else in a base class of this file (a few levels up)."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    for stmt in body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            return stmt
    if depth < 3:
        for arg in node.bases:
            base = classes.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
            if base is not None and base is not node:
                method = class_method(base, name, classes, depth + 1)
                if method is not None:
                    return method
    return None


def class_string(
    node: cst.ClassDef, name: str, classes: dict[str, cst.ClassDef], depth: int = 0
) -> str | None:
    """The string literal class attribute `name = "..."` of the class (or a base of this file)."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    for line in body:
        for stmt in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if (
                isinstance(stmt, cst.Assign)
                and len(stmt.targets) == 1
                and dotted(stmt.targets[0].target) == name
                and isinstance(stmt.value, cst.SimpleString)
            ):
                value = stmt.value.evaluated_value
                return value if isinstance(value, str) else None
    if depth < 3:
        for arg in node.bases:
            base = classes.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
            if base is not None and base is not node:
                return class_string(base, name, classes, depth + 1)
    return None


def filled_string(
    expr: cst.BaseExpression | None,
    handed: str,
    aliases: dict[str, str],
    node: cst.ClassDef,
    classes: dict[str, cst.ClassDef],
) -> str | None:
    """The op's name with the handed class's string attributes filled in
    (`f"gsplat::{base}"` after `base = register.base` -> `gsplat::spherical_harmonics`), or
    None. `aliases`: a local name -> the class attribute it holds."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    if not isinstance(expr, cst.FormattedString):
        return None
    out: list[str] = []
    for part in expr.parts:
        if isinstance(part, cst.FormattedStringText):
            out.append(part.value)
            continue
        inner = part.expression if isinstance(part, cst.FormattedStringExpression) else None
        if not (
            isinstance(part, cst.FormattedStringExpression)
            and part.conversion is None
            and part.format_spec is None
        ):
            return None
        if isinstance(inner, cst.Attribute) and dotted(inner.value) == handed:
            attribute: str | None = inner.attr.value
        else:
            attribute = aliases.get(inner.value) if isinstance(inner, cst.Name) else None
        if attribute is None:
            return None
        filled = class_string(node, attribute, classes)
        if filled is None:
            return None
        out.append(filled)
    return "".join(out)


def _classify(
    class_defs: list[cst.ClassDef], imports: ImportTable, project: FileView
) -> list[ClassInfo]:
    infos: dict[int, ClassInfo] = {}
    for node in class_defs:
        written = [dotted(arg.value) or "" for arg in node.bases if arg.keyword is None]
        bases = [imports.resolve_dotted(text) if text else "" for text in written]
        info = ClassInfo(node=node, name=node.name.value, base_names=bases)
        for stmt in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if isinstance(stmt, cst.FunctionDef):
                info.methods[stmt.name.value] = stmt
        for text, base in zip(written, bases, strict=True):
            last = base.rsplit(".", 1)[-1]
            # A base is a Function when it resolves to torch's, or when the project index
            # says the class this file's import names is one (never by a bare class name).
            if (
                base in FUNCTION_BASES
                or text in project.function_bases
                or text in project.function_names
            ):
                info.kinds.add("function")
            elif base in TENSOR_BASES:
                info.kinds.add("tensor")
            elif last in FUNCTION_MODE_NAMES:
                info.kinds.add("function_mode")
            elif last in DISPATCH_MODE_NAMES:
                info.kinds.add("dispatch_mode")
        if info.name in project.mixins:
            info.kinds.add("mixin")  # a Function of the project derives from it (view.py)
        infos[id(node)] = info
    # Subclasses of classes of interest in the same file inherit their kinds (a base may be
    # defined after its subclass: rare, but legal inside functions).
    by_name = {info.name: info for info in infos.values()}
    kinds = inherited(
        {key: info.kinds for key, info in infos.items()},
        {
            key: [id(by_name[b].node) for b in info.base_names if b in by_name]
            for key, info in infos.items()
        },
    )
    for key, info in infos.items():
        info.kinds = kinds[key]
    return [
        info
        for info in infos.values()
        if info.kinds
        or "__torch_function__" in info.methods
        or "__torch_dispatch__" in info.methods
    ]
