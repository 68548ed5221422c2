"""Whether a custom op has a fake (meta) implementation anywhere in its project, from the text.

`torch.compile`, `torch.export` and `opcheck` trace an op on fake tensors (semantics D13.1): a
`torch.library.custom_op` needs `@op.register_fake` (or `torch.library.register_fake("ns::op")`,
the older `impl_abstract`), an op defined from a schema string needs a `Meta` kernel or a
composite one (D13.3). The registration may sit in any module of the project, or in its C++
(`TORCH_LIBRARY_IMPL(ns, Meta, m)`), so every file that can hold one is read once per process
and project root, and an op counts as faked when a file registers a fake under its Python name
or its op name. That leans towards quiet: a registration for a same-named op elsewhere counts,
except a kernel named without its namespace (`lib.impl("op", fn, "Meta")`) in a file that
builds no Library of the op's namespace.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..config import DEFAULT_EXCLUDE

# Bytes a file that registers a fake or a kernel for a non-backend key contains.
TOKENS = (b"register_fake", b"impl_abstract", b"Meta", b"meta", b"Composite", b"register_kernel")
_SKIP_DIRS = frozenset(DEFAULT_EXCLUDE) | {"site-packages", "dist-packages"}
_MAX_BYTES = 2_000_000  # a larger file is not read (treated as registering nothing)
_MAX_FILES = 20_000  # a tree with more files than this is not one project's own code
_NATIVE = (".cpp", ".cc", ".cu", ".cxx", ".h", ".hpp", ".cuh")
_FAKE_KEYS = r"Meta|meta|CompositeExplicitAutograd|CompositeImplicitAutograd"


@dataclass(frozen=True)
class Registrations:
    """The files of one project that can register a fake: path -> text."""

    files: tuple[tuple[str, str], ...]

    def faking(
        self, short: str, python: str | None, namespace: str | None, module: str
    ) -> str | None:
        """The first file that registers a fake for the op `short` (its name after `::`) of
        namespace `namespace`, bound in Python as `python` in module `module` (a file stem):
        by the op's name, or by its Python name where that file imports the module."""
        for path, text in self.files:
            native = path.endswith(_NATIVE)
            imports = not native and python is not None and _imports(text, module)
            if registers_fake(text, short, python if imports else None, namespace, native):
                return path
        return None


def _imports(text: str, module: str) -> bool:
    """Whether `text` imports the module whose file stem is `module` (any package path)."""
    word = re.escape(module)
    return bool(
        re.search(
            rf"^[ \t]*(?:from[ \t]+[\w.]*\b{word}[ \t]+import|import[ \t]+[\w.]*\b{word}\b)",
            text,
            re.M,
        )
    )


def registers_fake(
    text: str, short: str, python: str | None, namespace: str | None, native: bool = False
) -> bool:
    """Whether `text` registers a fake implementation (or a meta or composite kernel) for the
    op `short`, bound in Python as `python`."""
    if native:
        return namespace is not None and bool(
            re.search(
                rf"TORCH_LIBRARY_IMPL\s*\(\s*{re.escape(namespace)}\s*,\s*(?:{_FAKE_KEYS})\b", text
            )
        )
    # Each pattern holds a literal of the op's name (`::op"`, `.op`, `"op"`) or its Python
    # name, and a registering word: one whose literals the text lacks cannot match, and is
    # neither built nor compiled (each op's patterns are new to `re`, which compiles them at
    # more cost than the search). A short name (`mm`) is in most texts; quoted, rarely.
    by_name = short in text
    by_python = python is not None and python in text
    if not (by_name or by_python):
        return False
    registers = any(word in text for word in _REGISTER_WORDS)
    keyed = any(word in text for word in _FAKE_KEY_WORDS)
    spaced = by_name and (f"::{short}'" in text or f'::{short}"' in text)
    quoted = by_name and (f"'{short}'" in text or f'"{short}"' in text)
    dotted = by_name and f".{short}" in text and "torch.ops." in text
    name = re.escape(short)
    space = re.escape(namespace) if namespace else r"[^\"']*"
    ops_space = re.escape(namespace) if namespace else r"\w+"
    patterns = []
    if spaced and registers:
        # torch.library.register_fake("ns::op") / impl_abstract / register_meta, f-strings
        patterns.append(
            rf"(?:register_fake|impl_abstract|register_meta)\s*\(\s*f?[\"']{space}::{name}[\"']"
        )
    if dotted and registers:
        # register_fake(torch.ops.ns.op.default)
        patterns.append(
            rf"(?:register_fake|impl_abstract)\s*\(\s*torch\.ops\.{ops_space}\.{name}\b"
        )
    if spaced and keyed:
        # torch.library.impl("ns::op", "Meta"), register_kernel
        patterns.append(rf"[\"']{space}::{name}[\"'][^\n]*[\"'](?:{_FAKE_KEYS})[\"']")
    if quoted and keyed:
        # lib.impl("op", fn, "Meta") names the op without its namespace: that of the Library
        # the file builds, so it is the op's only where the file builds one of its namespace
        bare = "" if namespace is None or _builds_library(text, namespace) else "(?!)"
        patterns.append(rf"{bare}[\"']{name}[\"'][^\n]*[\"'](?:{_FAKE_KEYS})[\"']")
    if by_python and registers:
        word = re.escape(python or "")
        patterns += [
            rf"\b{word}\s*\.\s*(?:register_fake|impl_abstract|_register_fake)\b",
            rf"(?:register_fake|impl_abstract)\s*\(\s*{word}\b",
        ]
    return any(re.search(pattern, text) for pattern in patterns)


# The words one of the registering patterns above holds, and the kernel keys of the others.
_REGISTER_WORDS = ("register_fake", "impl_abstract", "register_meta")
_FAKE_KEY_WORDS = ("Meta", "meta", "Composite")


def library_namespace(text: str, library: str) -> str | None:
    """The namespace `library` (a module-level name) is built with in `text`:
    `LIB = torch.library.Library("ns", "DEF")` -> ns (None when it is not spelled so)."""
    found = re.search(
        rf"^{re.escape(library)}[ \t]*(?::[^=\n]*)?=[ \t]*(?:[\w.]+\.)?Library\(\s*[\"'](\w+)[\"']",
        text,
        re.M,
    )
    return found.group(1) if found else None


def _builds_library(text: str, namespace: str) -> bool:
    return bool(re.search(rf"\bLibrary\(\s*f?[\"']{re.escape(namespace)}[\"']", text))


def registrations(root: str) -> Registrations:
    """The project's files under `root` that can register a fake. The tree is walked on every
    call (the check asks only for an op its own file does not fake), a file is read again only
    when its size or modification time changed: a long-lived language server sees edits."""
    found: list[tuple[str, str]] = []
    visited = 0
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(files):
            visited += 1
            if visited > _MAX_FILES:
                return Registrations(tuple(found))
            if name.endswith((".py", *_NATIVE)):
                path = os.path.join(directory, name)
                text = _cached(path)
                if text is not None:
                    found.append((path, text))
    return Registrations(tuple(found))


_SEEN: dict[str, tuple[tuple[int, int], str | None]] = {}


def _cached(path: str) -> str | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    stamp = (info.st_mtime_ns, info.st_size)
    known = _SEEN.get(path)
    if known is None or known[0] != stamp:
        if len(_SEEN) > 50_000:
            _SEEN.clear()
        known = _SEEN[path] = (stamp, _read(path))
    return known[1]


def _read(path: str) -> str | None:
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return None
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    if not any(token in raw for token in TOKENS):
        return None
    return raw.decode("utf-8", "replace")
