"""Which calls reach compiled code: C++/CUDA extensions, `torch.ops` namespaces, Triton launches."""

from __future__ import annotations

from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

import libcst as cst

from ..native.index import Evidence, merge
from ..native.modules import ProjectNative
from ..native.scan import CHECKED, RAW, SAFE
from ..settings import Settings
from .facts import FileFacts
from .names import dotted
from .reading import UNREAD_SOURCE, Unreadable

# torch's own operator namespaces: they go through ATen, which honours strides.
DISPATCHER_NAMESPACES = frozenset({"aten", "prims", "prim", "higher_order", "_c10d_functional"})


def compiled_callee(
    call: cst.Call, facts: FileFacts, settings: Settings, native: ProjectNative | None = None
) -> tuple[str, str] | None:
    """(kind, display name) for a call into compiled code; kind is `triton` or `extension`.
    `extension-modules` names are a fallback: Python source of that name in the project
    (`native`) overrules them."""
    func = call.func
    if isinstance(func, cst.Subscript):
        wrapped = _wrapped_triton(func.value, facts)
        if wrapped is not None:
            return "triton", wrapped
        kernel = dotted(func.value)
        if kernel is not None and _is_triton_launch(kernel, func, facts):
            return "triton", kernel
        return None
    name = facts.imports.resolve(func)
    if name is None:
        return None
    parts = name.split(".")
    if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
        namespace, op = parts[2], parts[3]
        if namespace in DISPATCHER_NAMESPACES or f"{namespace}.{op}" in facts.python_custom_ops:
            return None
        return "extension", name
    if len(parts) < 2 or parts[0] == "torch":
        return None  # torch's own bindings (torch._C...) go through ATen and honour strides
    if parts[0] in facts.compiled_names:
        return "extension", name
    if named_extension(name, settings):
        if native is not None and native.is_python(name.rsplit(".", 1)[0]):
            return None
        return "extension", name
    return None


def named_extension(name: str, settings: Settings) -> bool:
    """Whether a module on the way to `name` matches `extension-modules` (the fallback for a
    module nothing in the project describes)."""
    return any(
        component and any(fnmatchcase(component, p) for p in settings.extension_modules)
        for component in (part.lstrip(".") for part in name.split(".")[:-1])
    )


_WRAPPERS = frozenset(
    {"torch.library.wrap_triton", "torch.library.capture_triton", "torch._library.wrap_triton"}
)


def _wrapped_triton(expr: cst.BaseExpression, facts: FileFacts) -> str | None:
    """`wrap_triton(kernel)`, the launcher a `triton_op` uses: the kernel's name."""
    if not isinstance(expr, cst.Call) or not expr.args:
        return None
    if (facts.imports.resolve(expr.func) or "") not in _WRAPPERS:
        return None
    return dotted(expr.args[0].value) or "kernel"


def _is_triton_launch(kernel: str, func: cst.Subscript, facts: FileFacts) -> bool:
    if kernel.rsplit(".", 1)[-1] in facts.triton_kernels:
        return True
    # `table[device](...)` and `OPS[dim](...)` are dict lookups; a launch grid looks like one.
    if len(func.slice) != 1 or not isinstance(func.slice[0].slice, cst.Index):
        return False
    index = func.slice[0].slice.value
    if isinstance(index, (cst.Tuple, cst.Lambda)):
        return True
    text = dotted(index) or ""
    return "grid" in text.lower()


def compiled_by_evidence(
    call: cst.Call, facts: FileFacts, native: ProjectNative
) -> tuple[str, str] | None:
    """A call into a module the project's files show to be compiled (a binary beside it, a
    build declaration, a pybind11 module name), whatever it is called."""
    text = dotted(call.func) if isinstance(call.func, cst.Attribute) else None
    if text is None or not facts.imports.is_imported(text.split(".", 1)[0]):
        return None
    name = facts.imports.resolve_dotted(text)
    parts = name.split(".")
    if len(parts) < 2 or parts[0] == "torch":
        return None
    module = name.rsplit(".", 1)[0]
    return ("extension", name) if native.is_compiled(module) else None


@dataclass(frozen=True)
class ReadEvidence:
    """What the compiled side says about one gradient argument, as a finding tells it."""

    safe: bool
    severity: str | None  # None: the rule's own
    text: str  # the sentence the finding's help leads with ("" when there is nothing to add)
    known: bool = False  # the C++ behind the call was found (its writes are then known too)
    writes: bool = False
    write_text: str = ""
    # A write is not ruled out: the tensor, or a writable pointer into it, reaches code that
    # was not read (a kernel whose source is missing). A fix must not count on "no write".
    may_write: bool = False


def read_evidence(
    native: ProjectNative,
    facts: FileFacts,
    kind: str,
    name: str,
    call: cst.Call,
    position: int,
    loaded: set[str] | frozenset[str] = frozenset(),
) -> ReadEvidence:
    """How the C++ behind a compiled call reads the argument at `position`."""
    if kind != "extension":
        return ReadEvidence(False, None, "")
    args = call.args
    arg = args[position]
    if any(a.star for a in args[: position + 1]):
        slot: int | None = None
        keyword = None
    elif arg.keyword is not None:
        slot, keyword = None, arg.keyword.value
    else:
        slot, keyword = position, None
    head = name.split(".")[0]
    return evidence_for(native, name, slot, keyword, head in facts.compiled_names or head in loaded)


def evidence_for(
    native: ProjectNative, name: str, slot: int | None, keyword: str | None, loaded: bool
) -> ReadEvidence:
    """How the C++ bound as `name` reads its argument `slot` (or `keyword`). `loaded`: the
    module is an object a loader returned, so its name says nothing of the bindings'."""
    parts = name.split(".")
    index = native.index_for_callee(name)
    if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
        found = index.op_evidence(parts[2], parts[3], slot)
    else:
        module = None if loaded else ".".join(parts[:-1])
        found = index.evidence(module, parts[-1], slot, keyword)
    return _told(found, name)


def member_evidence(native: ProjectNative, prefix: str, slot: int | None) -> ReadEvidence:
    """Evidence for a function picked from a compiled module by a name built at run time
    (`getattr(_C, "GlobalPoolingForward" + postfix)`): every binding with that prefix."""
    index = native.index()
    names = sorted(n for n in index.bindings if n.startswith(prefix)) if prefix else []
    found = [index.evidence(None, n, slot) for n in names]
    known = [f for f in found if f is not None]
    return _told(merge(known) if known else None, f"{prefix}*")


def _told(found: Evidence | None, name: str) -> ReadEvidence:
    told = describe(found, name)
    if found is None:
        return told
    entry = " -> ".join(f"`{step}`" for step in found.chain)
    write_text = f"{entry} writes its result into it ({found.writes})." if found.writes else ""
    return replace(
        told,
        known=True,
        writes=bool(found.writes),
        write_text=write_text,
        may_write=bool(found.may_write),
    )


# What the help says of C++ proven to read a tensor as dense memory (AGL203 fires on it alone).
RAW_READ = "reads it through `data_ptr()` with dense indexing"


def describe(found: Evidence | None, name: str) -> ReadEvidence:
    if found is None:
        # Compiled code without its source: unknown, never clean, and never proven wrong either.
        return ReadEvidence(False, "warning", Unreadable(name, UNREAD_SOURCE, True).text)
    entry = " -> ".join(f"`{step}`" for step in found.chain)
    if found.how in SAFE:
        return ReadEvidence(True, None, "")
    if found.how == CHECKED:
        return ReadEvidence(
            False,
            "warning",
            f"{entry} checks contiguity ({found.where}): training raises on a non-contiguous "
            "gradient; make it contiguous in Python so every caller works.",
        )
    if found.how == RAW:
        return ReadEvidence(
            False,
            None,
            f"{entry} {RAW_READ} ({found.where}).",
        )
    where = f" ({found.where})" if found.where else ""
    return ReadEvidence(
        False, None, f"Its C++ ({entry}{where}) does not show how the gradient is read."
    )
