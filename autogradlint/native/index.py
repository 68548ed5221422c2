"""The project's compiled code as one index: which names Python can call, and for each tensor
argument how the C++ behind it reads it, following the C++ one call at a time."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import DEFAULT_EXCLUDE
from . import scan as native
from .loaders import loaded_extensions
from .scan import RANK, UNKNOWN, Binding, Function, Source

SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl")
# Directories that hold no source of the project itself: what the configuration excludes by
# default (build outputs, environments), and installed packages.
_SKIP_DIRS = frozenset(DEFAULT_EXCLUDE) | {"site-packages", "dist-packages"}
_MAX_ENTRIES = 200_000  # directory entries walked before the walk stops (a loose file in /tmp)
_FOLLOW = 4  # C++ calls followed from a bound function to the code that reads the tensor
_MAX_FILES = 20_000  # a tree with more native files than this is not the project's own code


@dataclass(frozen=True)
class Evidence:
    """How compiled code reads one tensor argument, and where the text says so."""

    how: str  # a verdict of native.scan
    where: str  # "csrc/scale.cu:12" (relative to the project), "" when unknown
    chain: tuple[str, ...]  # the C++ functions followed, from the bound one
    writes: str = ""  # where the C++ writes into the tensor ("" when no write is seen)
    # Where the tensor, or a writable pointer into it, goes to code that was not read (a
    # kernel whose source is not there, a lambda): no write seen, and none ruled out either.
    may_write: str = ""


class NativeIndex:
    """Bindings, functions and macros of every native source of a project, read on demand:
    a project whose Python never hands a gradient to compiled code never reads its C++."""

    def __init__(self, sources: Iterable[Source], root: str = "") -> None:
        self.root = root
        self.sources = list(sources)
        self._bindings: dict[str, list[tuple[Binding, str]]] | None = None
        self._functions: dict[tuple[str, bool], list[tuple[Function, str]]] = {}
        self._macros: dict[str, str] | None = None
        self._python: dict[str, bool] = {}  # Python files asked about: whether they load_inline

    @property
    def bindings(self) -> dict[str, list[tuple[Binding, str]]]:
        if self._bindings is None:
            self._bindings = {}
            units = [s for s in self.sources if not s.header]
            # A header binds only through a function handed the module by the PYBIND11_MODULE
            # block beside it (MinkowskiEngine's pybind/extern.hpp): only those are read, so
            # 60 MB of ATen headers stay unread.
            beside = {os.path.dirname(s.path) for s in units if "PYBIND11_MODULE" in s.raw}
            headers = [s for s in self.sources if s.header and os.path.dirname(s.path) in beside]
            found = [(b, s.path) for s in units + headers for b in s.bindings()]
            if any(binding.registrar for binding, _ in found):
                # An op bound in a function handed a library: its namespace is that of the
                # block that calls the function (often in another file).
                handoffs: dict[str, str] = {}
                for source in units:
                    for function, namespace in source.library_handoffs().items():
                        handoffs.setdefault(function, namespace)
                found = [
                    (replace(b, module=handoffs.get(b.registrar, "")) if b.registrar else b, p)
                    for b, p in found
                ]
            for binding, path in found:
                self._bindings.setdefault(binding.name, []).append((binding, path))
        return self._bindings

    @property
    def macros(self) -> dict[str, str]:
        if self._macros is None:
            self._macros = {}
            for source in self.sources:
                self._macros.update(source.macros())
        return self._macros

    @property
    def modules(self) -> set[str]:
        """Literal pybind11 module names (`PYBIND11_MODULE(pkg_ops, m)`)."""
        return {
            b.module
            for found in self.bindings.values()
            for b, _ in found
            if b.kind == "pybind" and b.module != "TORCH_EXTENSION_NAME"
        }

    @property
    def named_modules(self) -> set[str]:
        """The names a build gives the `PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)` sources when
        it names each after its file (`fused_rope.cpp` -> `fused_rope`): the module an import of
        that name loads, when no build declaration lists the file."""
        return {
            os.path.basename(path).rsplit(".", 1)[0]
            for found in self.bindings.values()
            for b, path in found
            if b.kind == "pybind" and b.module == "TORCH_EXTENSION_NAME"
        }

    @property
    def namespaces(self) -> set[str]:
        """`TORCH_LIBRARY` namespaces (the `ns` of `torch.ops.ns.op`)."""
        return {b.module for found in self.bindings.values() for b, _ in found if b.kind == "op"}

    def add_python(self, path: str) -> bool:
        """Add the C++ a Python file hands `load_inline`; whether it had any."""
        if path in self._python:
            return self._python[path]
        source = Source(path)
        self._python[path] = bool(source.raw.strip())
        if self._python[path]:
            self.sources.append(source)
            self._bindings = None
            self._functions.clear()
            self._macros = None
        return self._python[path]

    def functions(self, name: str, flat: bool = False) -> list[tuple[Function, str]]:
        """Every definition of `name`; `flat`: as an op's dispatcher calls it (Source.functions)."""
        if (name, flat) not in self._functions:
            self._functions[name, flat] = [
                (function, source.path)
                for source in self.sources
                for function in source.functions(name, flat)
            ]
        return self._functions[name, flat]

    def evidence(
        self, module: str | None, name: str, position: int | None, keyword: str | None = None
    ) -> Evidence | None:
        """How `module.name(...)` reads its argument at `position` (or named `keyword`); None
        when no binding of that name is in the sources (the kernel source was not found)."""
        last = module.rsplit(".", 1)[-1] if module else None
        candidates = [
            (binding, path)
            for binding, path in self.bindings.get(name, ())
            if binding.kind == "pybind"
            and (last is None or binding.module in ("TORCH_EXTENSION_NAME", last))
        ]
        within = self.extension_sources(module) if module else frozenset()
        if last is not None and len({path for _, path in candidates}) > 1:
            # Several extensions bind this name: the build names the sources of each
            # (`CUDAExtension(name=..., sources=[...])`), else a TORCH_EXTENSION_NAME module is
            # named after its sources, so a file named like the module is the one meant.
            built = [(b, p) for b, p in candidates if os.path.basename(p) in within]
            named = [(b, p) for b, p in candidates if last in _stems(p)]
            candidates = built or named or candidates
        return self._worst(candidates, position, keyword, within)

    def extension_sources(self, module: str) -> frozenset[str]:
        """The file names of the sources the build declares for extension `module` (empty
        when it declares none)."""
        declared = declared_sources(self.root) if self.root else {}
        return declared.get(
            module.lstrip("."), declared.get(module.rsplit(".", 1)[-1], frozenset())
        )

    def arities(self, module: str | None, name: str) -> set[int]:
        """How many parameters the C++ functions bound as `module.name` take (every overload;
        empty when none is found). A file named like the module is the one meant, as in
        `evidence`."""
        last = module.rsplit(".", 1)[-1] if module else None
        found = [
            (function, path)
            for binding, bound_in in self.bindings.get(name, ())
            if binding.kind == "pybind" and binding.target
            for function, path in self.functions(binding.target)
            if path == bound_in
        ]
        named = [(f, p) for f, p in found if last is not None and last in _stems(p)]
        return {len(f.params) for f, _ in named or found}

    def op_evidence(self, namespace: str, op: str, position: int | None) -> Evidence | None:
        """How every implementation of the `torch.ops.<namespace>.<op>` reads an argument."""
        candidates = [
            (binding, path)
            for binding, path in self.bindings.get(op, ())
            if binding.kind == "op" and binding.module == namespace and binding.target
        ]
        return self._worst(candidates, position, None, flat=True)

    def _worst(
        self,
        candidates: list[tuple[Binding, str]],
        position: int | None,
        keyword: str | None,
        within: frozenset[str] = frozenset(),
        flat: bool = False,
    ) -> Evidence | None:
        if not candidates:
            return None
        found: list[Evidence] = []
        for binding, path in candidates:
            where = self._where(path, binding.line)
            if not binding.target:  # a lambda or a schema only: the text does not say
                found.append(Evidence(UNKNOWN, where, (binding.name,), may_write=where))
                continue
            found.append(
                self._read(
                    binding.target, position, keyword, 0, frozenset(), where, path, within, flat
                )
            )
        return merge(found)

    def _read(
        self,
        function: str,
        position: int | None,
        keyword: str | None,
        depth: int,
        seen: frozenset[str],
        passed: str,
        bound_in: str = "",
        within: frozenset[str] = frozenset(),
        flat: bool = False,
    ) -> Evidence:
        """The worst evidence over every definition of `function` (overloads, CPU and CUDA);
        `passed`: where the tensor is handed to it. A function the binding's own file
        (`bound_in`) defines is the one bound: another extension's function of the same name
        (`foo_cpu.cpp` and `foo_cuda.cu` each binding their own `foo`) is not it. Nor is one
        outside the sources the build declares for the extension (`within`, file names).
        `flat`: an op's implementation, its marshalled struct parameters one per field."""
        definitions = self.functions(function, flat)
        own = [(d, p) for d, p in definitions if p == bound_in]
        built = [(d, p) for d, p in definitions if os.path.basename(p) in within]
        definitions = own or built or definitions
        if not definitions or depth > _FOLLOW or function in seen:
            return Evidence(UNKNOWN, "", (function,), may_write=passed)
        results = [
            self._read_one(definition, path, position, keyword, depth, seen | {function}, within)
            for definition, path in definitions
        ]
        usable = [r for r in results if r is not None]
        if not usable:
            return Evidence(UNKNOWN, "", (function,), may_write=passed)
        return merge(usable)

    def _read_one(
        self,
        definition: Function,
        path: str,
        position: int | None,
        keyword: str | None,
        depth: int,
        seen: frozenset[str],
        within: frozenset[str] = frozenset(),
    ) -> Evidence | None:
        if keyword is not None:
            if keyword not in definition.params:
                return None
            position = definition.params.index(keyword)
        if position is None or position >= len(definition.params):
            return None  # another overload
        if position not in definition.tensors:
            return None
        slot = definition.tensors.index(position)
        how, line = definition.reads[slot]
        chain = (definition.name,)
        written = definition.writes[slot] if slot < len(definition.writes) else 0
        writes = self._where(path, written) if written else ""
        here = self._where(path, definition.line)
        onward = [
            self._read(callee, at, None, depth + 1, seen, here, within=within)
            for index, callee, at in definition.calls
            if index == position
        ]
        # A contiguous copy handed on: its reads say nothing, but a write into it reaches the
        # tensor whenever the tensor was contiguous already.
        copies = [
            self._read(callee, at, None, depth + 1, seen, self._where(path, at_line), within=within)
            for index, callee, at, at_line, kind in definition.handed
            if index == position and kind == "guarded"
        ]
        pointers = [
            self._pointer(callee, at, self._where(path, at_line), depth + 1, seen)
            for index, callee, at, at_line, kind in definition.handed
            if index == position and kind == "pointer"
        ]
        writes = writes or next((e.writes for e in onward + copies if e.writes), "")
        writes = writes or next((w for w, _ in pointers if w), "")
        may_write = (
            "" if writes else next((e.may_write for e in onward + copies if e.may_write), "")
        )
        may_write = may_write or next((m for w, m in pointers if m and not writes), "")
        checks = [
            macro_line
            for index, macro, macro_line in definition.macros
            if index == position and native.macro_checks(macro, self.macros)
        ]
        if checks and how in (UNKNOWN, native.RAW):
            # `CHECK_INPUT(grad)`, a macro (often in a header) that checks contiguity
            return Evidence(native.CHECKED, self._where(path, checks[0]), chain, writes, may_write)
        known = [e for e in onward if e.how != UNKNOWN]
        if known and (how == UNKNOWN or (how in native.SAFE and RANK[merge(known).how] > 0)):
            # the tensor itself is handed on, and the callee reads it worse than this does
            worst = merge(known)
            return Evidence(worst.how, worst.where, chain + worst.chain, writes, may_write)
        where = self._where(path, line) if how != UNKNOWN else ""
        return Evidence(how, where, chain, writes, may_write)

    def _pointer(
        self, function: str, position: int, passed: str, depth: int, seen: frozenset[str]
    ) -> tuple[str, str]:
        """(where it writes, where it may) for a writable pointer handed to `function` at
        `position`: its definitions say whether they write through that parameter, declare
        it `const`, or hand it on; code not found may write."""
        definitions = self.functions(function) if function else []
        if not definitions or depth > _FOLLOW or function in seen:
            return "", passed  # kept for code not read (a struct), or no source
        writes = may_write = ""
        applicable = False
        for definition, path in definitions:
            if position >= len(definition.params):
                continue  # another overload
            applicable = True
            if position in definition.readonly:
                continue
            line = dict(definition.pointers).get(position)
            if line is None:
                may_write = may_write or passed  # not a pointer there: a template, a reference
            elif line:
                writes = writes or self._where(path, line)
            for index, callee, at, at_line, kind in definition.handed:
                if index == position and kind == "pointer":
                    onward = self._pointer(
                        callee, at, self._where(path, at_line), depth + 1, seen | {function}
                    )
                    writes = writes or onward[0]
                    may_write = may_write or onward[1]
        if not applicable:
            return "", passed
        return writes, "" if writes else may_write

    def _where(self, path: str, line: int) -> str:
        """The source file as it was found (absolute for a project's): each report names it
        as it names the files it checks (report/paths.py)."""
        return f"{path}:{line}" if line else path


def _stems(path: str) -> set[str]:
    """The file's stem and its directories' names (`softmax/scaled.cpp` -> scaled, softmax)."""
    parts = path.replace("\\", "/").split("/")
    return {parts[-1].rsplit(".", 1)[0], *parts[-3:-1]}


def merge(found: list[Evidence]) -> Evidence:
    """The worst read over several implementations, and a write if any of them writes."""
    worst = max(found, key=lambda e: RANK[e.how])
    writes = next((e.writes for e in found if e.writes), "")
    may_write = "" if writes else next((e.may_write for e in found if e.may_write), "")
    return Evidence(worst.how, worst.where, worst.chain, writes, may_write)


def native_files(root: str, extra: Iterable[str] = ()) -> list[str]:
    """The C/C++/CUDA sources under `root` (hidden and vendored directories skipped), and the
    files or directories of `native-sources`."""
    found: list[str] = []
    visited = 0
    for top in (root, *extra):
        if os.path.isfile(top):
            found.append(top)
            continue
        # What os.walk(top) gives with its directories pruned and sorted, in its order (each
        # directory, then those below it), from the listing alone: os.walk's per-directory
        # lists and islink calls were most of the walk (~10,000 headers under torch).
        stack = [top]
        while stack:
            try:
                with os.scandir(stack.pop()) as listing:
                    entries = list(listing)
            except OSError:
                continue
            below: list[tuple[str, str, bool]] = []
            for entry in entries:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                name = entry.name
                if not is_dir:
                    visited += 1
                    if name.endswith(SUFFIXES):
                        found.append(entry.path)
                elif not name.startswith(".") and name not in _SKIP_DIRS:
                    visited += 1
                    below.append((name, entry.path, entry.is_symlink()))
            below.sort()
            stack.extend(path for _name, path, link in reversed(below) if not link)
            if len(found) > _MAX_FILES or visited > _MAX_ENTRIES:
                return found[:_MAX_FILES]  # not one project's own tree: what was seen is enough
    return found


def stamp(paths: Iterable[str]) -> str:
    """What the sources were when they were read: a cached result that used them stays
    valid while this does."""
    import hashlib

    digest = hashlib.blake2b(digest_size=8)
    for path in sorted(paths):
        try:
            info = os.stat(path)
        except OSError:
            continue
        digest.update(f"{path}\0{info.st_mtime_ns}\0{info.st_size}\n".encode())
    return digest.hexdigest()


def native_root(path: str) -> str:
    """Whose native sources a Python file sees: its project's (the nearest directory with a
    config file, VCS or packaging marker), else its top package (an installed wheel keeps its
    sources inside the package), else its own directory. Never a shared parent such as /tmp or
    site-packages."""
    from ..view import project_root

    found = project_root(Path(path))
    if found is not None:
        return str(found)
    directory = os.path.dirname(os.path.abspath(path))
    while os.path.exists(os.path.join(os.path.dirname(directory), "__init__.py")):
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return _imported_as(path, directory) or directory


_ABSOLUTE_IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_][\w.]*)", re.MULTILINE)


def _imported_as(path: str, directory: str) -> str | None:
    """The directory above the file's own package, when the file imports that package by its
    absolute name (`from megatron.model.enums import ...` in megatron/model/): Python finds
    it there, so that is where the project starts, `__init__.py` files or not (namespace
    packages). None when no import names the directories the file is in."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(200_000)
    except OSError:
        return None
    parts = os.path.abspath(directory).split(os.sep)
    best = 0
    for module in set(_ABSOLUTE_IMPORT.findall(text)):
        pieces = module.split(".")
        for size in range(min(len(pieces), len(parts) - 1), best, -1):
            if pieces[:size] == parts[len(parts) - size :]:
                best = size
                break
    return os.sep.join(parts[: len(parts) - best]) or None if best else None


@functools.lru_cache(maxsize=8)
def index_for(root: str, extra: tuple[str, ...] = ()) -> NativeIndex:
    """The index of a project's native sources, built once per process."""
    return NativeIndex([Source(path) for path in _native_files(root, extra)], root)


@functools.lru_cache(maxsize=8)
def stamp_for(root: str, extra: tuple[str, ...] = ()) -> str:
    """The stamp of a project's native sources, once per process, and only for a run whose
    results are cached (a stat per file: ~10,000 of them under torch's headers)."""
    return stamp(_native_files(root, extra))


@functools.lru_cache(maxsize=8)
def _native_files(root: str, extra: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(native_files(root, extra))


def forget() -> None:
    """Drop what this process has read of native sources (a long-lived process that wants
    to see edits; each CLI run is a fresh one)."""
    index_for.cache_clear()
    stamp_for.cache_clear()
    _native_files.cache_clear()
    declared_sources.cache_clear()
    declared_extensions.cache_clear()
    run_time_loads.cache_clear()


_DECLARED = re.compile(
    r"""\b(?:CUDAExtension|CppExtension|Extension|Pybind11Extension|SYCLExtension|load|load_inline)"""
    r"""\s*\(\s*(?:name\s*=\s*)?["']([\w.]+)["']"""
)


_EXTENSION_CALL = re.compile(
    r"""\b(?:CUDAExtension|CppExtension|Extension|Pybind11Extension|SYCLExtension|load)\s*\("""
)
_NAME_ARGUMENT = re.compile(r"""^\s*(?:name\s*=\s*)?["']([\w.]+)["']""")
_LITERAL = re.compile(r"""["']([^"'\n]+)["']""")


@functools.lru_cache(maxsize=8)
def declared_sources(root: str) -> dict[str, frozenset[str]]:
    """For each extension the build at `root` declares with its sources listed as literals
    (`CUDAExtension(name="pkg._C", sources=["csrc/a.cpp", ...])`): the file names of those
    sources, under the module's full and last name."""
    found: dict[str, frozenset[str]] = {}
    for name in ("setup.py",):
        try:
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as handle:
                text = handle.read(2_000_000)
        except OSError:
            continue
        for match in _EXTENSION_CALL.finditer(text):
            inside = _call_text(text, match.end())
            named = _NAME_ARGUMENT.match(inside)
            if named is None:
                continue
            files = frozenset(
                os.path.basename(literal)
                for literal in _LITERAL.findall(inside)
                if literal.endswith(SUFFIXES)
            )
            if files:
                module = named.group(1)
                found[module] = found.get(module, frozenset()) | files
                last = module.rsplit(".", 1)[-1]
                found[last] = found.get(last, frozenset()) | files
    for module, files in run_time_loads(root).items():
        found[module] = found.get(module, frozenset()) | files
    return found


@functools.lru_cache(maxsize=8)
def run_time_loads(root: str) -> dict[str, frozenset[str]]:
    """The extensions the project's Python loads at run time (`cpp_extension.load(name=...)`),
    read from the Python files beside its native sources: a loader names its sources relative
    to itself (`srcpath / "softmax.cpp"`), so it lives where they do."""
    directories = {os.path.dirname(path) for path in _native_files(root, ())}
    paths = []
    for directory in sorted(directories):
        try:
            with os.scandir(directory) as listing:
                paths += [entry.path for entry in listing if entry.name.endswith(".py")]
        except OSError:
            continue
    return loaded_extensions(paths, SUFFIXES)


def _call_text(text: str, start: int) -> str:
    """The text of a call's arguments, from just after its `(` to its matching `)`
    (brackets inside string literals are rare in a build file, and only end it early)."""
    depth = 1
    for at in range(start, min(len(text), start + 20_000)):
        char = text[at]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return text[start:at]
    return text[start : start + 20_000]


_ALIASED = re.compile(
    r"""^\s*(\w+)\s*=\s*(?:\w+\.)*(?:CUDAExtension|CppExtension|Pybind11Extension|SYCLExtension)\b""",
    re.MULTILINE,
)


@functools.lru_cache(maxsize=8)
def declared_extensions(root: str) -> frozenset[str]:
    """Extension module names the build declares: `CUDAExtension("pkg._C", ...)` and friends
    in setup.py / pyproject.toml / setup.cfg at the project root."""
    names: set[str] = set()
    for name in ("setup.py", "pyproject.toml", "setup.cfg"):
        try:
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as handle:
                text = handle.read(2_000_000)
        except OSError:
            continue
        names.update(_DECLARED.findall(text))
        # `extension = CUDAExtension if cuda else CppExtension`, then `extension("pkg._C", ...)`
        for alias in set(_ALIASED.findall(text)):
            call = re.compile(rf"""\b{alias}\s*\(\s*(?:name\s*=\s*)?["']([\w.]+)["']""")
            names.update(call.findall(text))
    return frozenset(names)
