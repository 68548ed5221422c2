"""Where the code a gradient is handed to lives: torch's own API, Python (the project's or an
installed package's), compiled code, or nothing the linter can read. The last is never clean
(issue 31 §4): a gradient handed to it is a warning that says how to settle it."""

from __future__ import annotations

from dataclasses import dataclass

from ..native.modules import COMPILED, PYTHON, ProjectNative, installed, module_file

TORCH = "torch"
UNREAD_SOURCE = "is compiled code whose C++ is not among the project's sources"

# What a finding tells the user to do about code it could not read.
SETTLE = (
    "point `native-sources` at its C/C++/CUDA source, list it in `stride-safe-extensions` if it "
    "reads through strides or makes its input contiguous, or pass `.contiguous()`"
)


@dataclass(frozen=True)
class Unreadable:
    """A callee whose code the linter cannot read, and why, as a finding says it."""

    callee: str
    why: str  # completes "`callee` ..." : "is an installed binary module (no source)"
    compiled: bool = False  # compiled code without its source (not a name the tool lost)

    @property
    def text(self) -> str:
        return f"`{self.callee}` {self.why}, so how it reads the gradient is not known: {SETTLE}."


def imported_code(resolved: str, importer: str, native: ProjectNative) -> str | None:
    """What an imported name (as its import resolved it: `pkg.ops.fn`, `.mod.fn`) runs: `torch`,
    `python` (the project's Python or an installed `.py`), `compiled` (the project's extension or
    an installed binary), or None when neither the project nor `sys.path` holds it. Nothing is
    imported: files are looked up by name."""
    parts = resolved.split(".")
    if parts[0] == TORCH:
        return TORCH
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        if not module.lstrip("."):
            continue
        if module_file(importer, module, native.root) is not None:
            return PYTHON
        if native.is_compiled(module):
            return COMPILED
    if resolved.startswith("."):
        return None
    return installed(resolved) if len(parts) > 1 else installed(resolved + ".x")


def unreadable_import(resolved: str, found: str | None) -> Unreadable | None:
    """The finding's reason for an imported callee that is compiled without source here, or
    that nothing on this interpreter provides; None for torch and Python."""
    shown = resolved.lstrip(".")
    if found == COMPILED:
        return Unreadable(shown, UNREAD_SOURCE, True)
    if found is None:
        module = shown.rsplit(".", 1)[0] if "." in shown else shown
        return Unreadable(
            shown, f"comes from `{module}`, which neither the project nor this interpreter holds"
        )
    return None


__all__ = ["COMPILED", "PYTHON", "TORCH", "Unreadable", "imported_code", "unreadable_import"]
