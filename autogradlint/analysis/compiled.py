"""Which calls reach compiled code: C++/CUDA extensions, `torch.ops` namespaces, Triton launches."""

from __future__ import annotations

from fnmatch import fnmatchcase

import libcst as cst

from ..settings import Settings
from .facts import FileFacts
from .names import dotted

# torch's own operator namespaces: they go through ATen, which honours strides.
DISPATCHER_NAMESPACES = frozenset({"aten", "prims", "prim", "higher_order", "_c10d_functional"})


def compiled_callee(call: cst.Call, facts: FileFacts, settings: Settings) -> tuple[str, str] | None:
    """(kind, display name) for a call into compiled code; kind is `triton` or `extension`."""
    func = call.func
    if isinstance(func, cst.Subscript):
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
    for component in parts[:-1]:
        component = component.lstrip(".")
        if component and any(fnmatchcase(component, p) for p in settings.extension_modules):
            return "extension", name
    return None


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
