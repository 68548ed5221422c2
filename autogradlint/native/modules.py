"""What one Python file's imports are, as the project's files say: a compiled extension (a
binary beside it, a build declaration, a pybind11 module name) or Python source."""

from __future__ import annotations

import functools
import os

from .index import (
    NativeIndex,
    declared_extensions,
    index_for,
    native_root,
    run_time_loads,
    stamp_for,
)

_BINARY_SUFFIXES = (".so", ".pyd", ".dylib")


class ProjectNative:
    """The native side of the project one Python file belongs to, read only when asked."""

    def __init__(self, path: str, extra: tuple[str, ...] = ()) -> None:
        self.path = os.path.abspath(path) if path and not path.startswith("<") else ""
        self.extra = extra
        self._root: str | None = None
        self.consulted = False  # the C++ index was read: cached results depend on its stamp
        self.python_files: set[str] = set()  # other Python files whose load_inline C++ was read
        self._modules: dict[str, bool] = {}

    @property
    def root(self) -> str:
        if self._root is None:
            self._root = native_root(self.path or os.path.join(os.getcwd(), "<stdin>"))
        return self._root

    @property
    def stamp(self) -> str:
        """The stamp of the C++ sources read (empty when none were)."""
        return stamp_for(self.root, self.extra) if self.consulted else ""

    def index(self) -> NativeIndex:
        index = index_for(self.root, self.extra)
        self.consulted = True
        if self.path.endswith(".py"):
            index.add_python(self.path)  # `ext = load_inline(...)` in the file itself
        return index

    def index_for_callee(self, name: str) -> NativeIndex:
        """The index, with the `load_inline` C++ of the Python modules `name` runs through
        (`scale_ext.scale_ext.raw_scale`: scale_ext.py binds `scale_ext = load_inline(...)`)."""
        index = self.index()
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            found = module_file(self.path, ".".join(parts[:cut]), self.root)
            if found is not None and found != self.path and index.add_python(found):
                self.python_files.add(found)
        return index

    def is_compiled(self, module: str) -> bool:
        """Whether `module` (as the import resolved it: `._kernels`, `pkg.ops._C`) is compiled
        code of this project. Python source beside it always wins."""
        if module not in self._modules:
            self._modules[module] = self._decide(module)
        return self._modules[module]

    def is_python(self, module: str) -> bool:
        """Whether the project has Python source for `module` (a name pattern is then wrong)."""
        located = self._locate(module)
        return located is not None and _python_in(_listing(located[0]), located[1])

    def _decide(self, module: str) -> bool:
        last = module.rsplit(".", 1)[-1]
        if not last.isidentifier():
            return False
        located = self._locate(module)
        if located is not None:
            directory, name = located
            entries = _listing(directory)
            if _python_in(entries, name):
                return False  # Python source (a module or a package) of that name
            if any(e.startswith(f"{name}.") and e.endswith(_BINARY_SUFFIXES) for e in entries):
                return True
        declared = declared_extensions(self.root)
        if module.lstrip(".") in declared or last in {d.rsplit(".", 1)[-1] for d in declared}:
            return True
        if located is None and not module.startswith(".") and _python_elsewhere(module):
            return False  # the standard library, or a package installed as Python source
        if module.lstrip(".") in run_time_loads(self.root):
            return True  # `cpp_extension.load(name=...)` in the project's Python builds it
        index = self.index()
        # A top-level import (`import fused_rope`, not `pkg._C`) names a module built from a
        # source file of that name, when the build does not say (apex's per-op extensions).
        named = "." not in module and last in index.named_modules
        return last in index.modules or named

    def _locate(self, module: str) -> tuple[str, str] | None:
        """(directory, name) where the module's file would be in this project, if its package
        is one of the project's directories."""
        if module.startswith("."):
            directory = _relative_base(self.path, module)
            if directory is None:
                return None
            parts = module.lstrip(".").split(".")
            return os.path.join(directory, *parts[:-1]), parts[-1]
        parts = module.split(".")
        for base in (self.root, os.path.join(self.root, "src")):
            directory = os.path.join(base, *parts[:-1])
            if len(parts) > 1 and os.path.isfile(os.path.join(directory, "__init__.py")):
                return directory, parts[-1]
        return None


def module_file(importer: str, module: str, root: str) -> str | None:
    """The Python file a module name stands for, seen from `importer`: relative imports from
    its package, absolute ones from the project root, `src/`, or the importer's directory."""
    if not module.lstrip("."):
        return None
    parts = module.lstrip(".").split(".")
    if module.startswith("."):
        base = _relative_base(importer, module)
        if base is None:
            return None
        bases = [base]
    else:
        bases = [root, os.path.join(root, "src")]
        if parts[0] == os.path.basename(root) and os.path.isfile(os.path.join(root, "__init__.py")):
            # The root of an installed wheel is its top package (native_root): its own `import
            # pkg.ops.utils` starts from the directory that holds `pkg`. Only its own: that
            # directory is shared (site-packages), and other packages there are not the project.
            bases.append(os.path.dirname(root))
        if importer:
            bases.append(os.path.dirname(importer))
            # A package's own absolute imports (`from fla.utils import ...` in
            # `vendored/fla/ops/x.py`) start at the folder that holds the package of that name
            # the importer lives in, which the native root need not be. Only its own: other
            # packages beside it are not the project.
            directory = os.path.dirname(importer)
            for _ in range(8):
                parent = os.path.dirname(directory)
                if parent == directory:
                    break
                if os.path.basename(directory) == parts[0]:
                    bases.append(parent)
                    break
                directory = parent
    for base in bases:
        stem = os.path.join(base, *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def _relative_base(importer: str, module: str) -> str | None:
    """The package directory a relative import (`.x`, `..pkg.x`) of `importer` starts from."""
    if not importer:
        return None
    base = os.path.dirname(importer)
    for _ in range(len(module) - len(module.lstrip(".")) - 1):
        base = os.path.dirname(base)
    return base


def _python_in(entries: frozenset[str], name: str) -> bool:
    """A module or package of that name among a directory's entries."""
    return any(entry in (f"{name}.py", f"{name}.pyi", name) for entry in entries)


def _python_elsewhere(module: str) -> bool:
    """A top-level name the project does not hold that is the standard library's, or a
    package installed as Python source: not the project's compiled code, and no reason to read
    its C++. (Only ever a shortcut to "not compiled": a binary found here proves nothing.)"""
    import importlib.util
    import sys

    top = module.split(".", 1)[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return True
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError, AttributeError):
        return False
    origin = getattr(spec, "origin", None) if spec is not None else None
    return isinstance(origin, str) and origin.endswith(".py")


def _listing(directory: str) -> frozenset[str]:
    try:
        return frozenset(os.listdir(directory))
    except OSError:
        return frozenset()


PYTHON = "python"
COMPILED = "compiled"


def installed(module: str) -> str | None:
    """What the interpreter's `sys.path` holds for an absolute `module`, found without importing
    anything: `python` (a `.py` module or a package of them), `compiled` (an extension module
    file, `.so`/`.pyd`), or None when nothing there has that name. The standard library and the
    interpreter's built-in modules count as Python: they never read a tensor's memory."""
    import sys

    if not module or module.startswith("."):
        return None
    top = module.split(".", 1)[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return PYTHON
    return _installed(module, tuple(p for p in sys.path if p and os.path.isdir(p)))


@functools.lru_cache(maxsize=4096)
def _installed(module: str, path: tuple[str, ...]) -> str | None:
    """`installed` for one `sys.path`; the longest importable prefix of `module` decides (the
    rest are attributes of it: `pkg.mod.fn` is a function of `pkg.mod`)."""
    from importlib.machinery import EXTENSION_SUFFIXES

    parts = module.split(".")
    found: str | None = None
    for base in path:
        directory = base
        for depth, part in enumerate(parts):
            entries = _listing(directory)
            if f"{part}.py" in entries:
                found = PYTHON
                break
            if any(f"{part}{suffix}" in entries for suffix in (*EXTENSION_SUFFIXES, ".pyd")):
                found = COMPILED
                break
            if part not in entries or not os.path.isdir(os.path.join(directory, part)):
                break
            directory = os.path.join(directory, part)
            found = PYTHON  # a package (or a namespace folder) of Python modules
            if depth == len(parts) - 1:
                break
        if found is not None:
            return found
    return None
