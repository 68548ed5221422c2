"""Settings the checks can be configured with (kept free of libcst so start-up stays cheap)."""

from __future__ import annotations

from dataclasses import dataclass

# Ops whose caller picks the result's dtype and device (in kwargs) and, for the second set, its
# size (args[1]): a __torch_dispatch__ handler of one must read them (AGL306). The slicer keeps
# handlers registered for them by decorator (`@implements(aten.empty_like.default)`).
DISPATCH_REQUEST_OPS = frozenset(
    {
        "empty_like",
        "zeros_like",
        "ones_like",
        "full_like",
        "rand_like",
        "randn_like",
        "_to_copy",
        "to",
    }
)
DISPATCH_SIZED_OPS = frozenset(
    {"new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided"}
)
# How many calls deep the checks follow backward into the file's own functions (backward ->
# helper -> its helper); the slicer keeps exactly those functions.
HELPER_DEPTH = 2
# Names are never evidence (issue 31 §4): the defaults hold only torch's own API. A module no
# file of the project describes is found on `sys.path` or, failing that, is unknown (a warning),
# never compiled by the look of its name; a decorator guards only when its source shows it.
DEFAULT_LOADERS = (
    "torch.utils.cpp_extension.load",
    "torch.utils.cpp_extension.load_inline",
)
DEFAULT_EXTENSION_MODULES: tuple[str, ...] = ()
# The user's overrides for entry points whose C++ is not in the project: ones that make their
# gradient contiguous themselves, and ones that write into it. Empty by default: what the C++
# in the project shows (native/) decides, never a name.
DEFAULT_STRIDE_SAFE: tuple[str, ...] = ()
DEFAULT_WRITING: tuple[str, ...] = ()
DEFAULT_GUARD_DECORATORS: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings:
    """What the checks may be configured with (from [tool.autogradlint])."""

    extension_modules: tuple[str, ...] = DEFAULT_EXTENSION_MODULES
    stride_safe: tuple[str, ...] = DEFAULT_STRIDE_SAFE
    writing_extensions: tuple[str, ...] = DEFAULT_WRITING
    guard_decorators: tuple[str, ...] = DEFAULT_GUARD_DECORATORS
    loaders: tuple[str, ...] = DEFAULT_LOADERS
    # C/C++/CUDA files or directories outside the project tree whose bindings the Python calls
    native_sources: tuple[str, ...] = ()
