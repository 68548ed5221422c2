"""Per-file facts: imports, autograd.Function classes, overrides, compiled-code bindings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

import libcst as cst

from ..project import EMPTY, FUNCTION_BASES, FileView
from ..settings import DEFAULT_LOADERS
from .hierarchy import inherited
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
    )  # function | tensor | function_mode | dispatch_mode
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    base_names: list[str] = field(default_factory=list)

    @property
    def is_function(self) -> bool:
        return "function" in self.kinds

    @property
    def is_mode(self) -> bool:
        return bool(self.kinds & {"function_mode", "dispatch_mode"})


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
    for stmt in iter_statements(module):
        if isinstance(stmt, (cst.Import, cst.ImportFrom)):
            if collect_imports:
                imports.add(stmt)
        elif isinstance(stmt, cst.ClassDef):
            class_defs.append(stmt)
        elif isinstance(stmt, cst.FunctionDef):
            function_defs.append(stmt)
        elif isinstance(stmt, cst.Assign):
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
                name = dotted(target.target)
                if name is not None:
                    compiled.add(name)

    classes = _classify(class_defs, imports, project)
    custom_ops = {f"{ns}.{op}" for ns, op in _CUSTOM_OP_RE.findall(source)}
    class_nodes = {node.name.value: node for node in class_defs}
    functions = {stmt.name.value: stmt for stmt in module.body if isinstance(stmt, cst.FunctionDef)}
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
    )


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
