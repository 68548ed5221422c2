"""What one Python file's imports are, as the project's files say: a compiled extension (a
binary beside it, a build declaration, a pybind11 module name) or Python source."""

from __future__ import annotations

import os

from .index import NativeIndex, declared_extensions, index_for, native_root

_BINARY_SUFFIXES = (".so", ".pyd", ".dylib")


class ProjectNative:
    """The native side of the project one Python file belongs to, read only when asked."""

    def __init__(self, path: str, extra: tuple[str, ...] = ()) -> None:
        self.path = os.path.abspath(path) if path and not path.startswith("<") else ""
        self.extra = extra
        self._root: str | None = None
        self.stamp = ""  # set once the C++ index was consulted: cached results depend on it
        self._modules: dict[str, bool] = {}

    @property
    def root(self) -> str:
        if self._root is None:
            self._root = native_root(self.path or os.path.join(os.getcwd(), "<stdin>"))
        return self._root

    def index(self) -> NativeIndex:
        index, stamp = index_for(self.root, self.extra)
        self.stamp = stamp
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
        if located is None:
            return False
        directory, name = located
        entries = _listing(directory)
        return any(entry in (f"{name}.py", f"{name}.pyi", name) for entry in entries)

    def _decide(self, module: str) -> bool:
        last = module.rsplit(".", 1)[-1]
        if not last.isidentifier():
            return False
        if self.is_python(module):
            return False  # Python source (a module or a package) of that name
        located = self._locate(module)
        if located is not None:
            directory, name = located
            entries = _listing(directory)
            if any(e.startswith(f"{name}.") and e.endswith(_BINARY_SUFFIXES) for e in entries):
                return True
        declared = declared_extensions(self.root)
        if module.lstrip(".") in declared or last in {d.rsplit(".", 1)[-1] for d in declared}:
            return True
        index = self.index()
        return last in index.modules

    def _locate(self, module: str) -> tuple[str, str] | None:
        """(directory, name) where the module's file would be in this project, if its package
        is one of the project's directories."""
        if module.startswith("."):
            if not self.path:
                return None
            dots = len(module) - len(module.lstrip("."))
            directory = os.path.dirname(self.path)
            for _ in range(dots - 1):
                directory = os.path.dirname(directory)
            parts = module.lstrip(".").split(".")
            return os.path.join(directory, *parts[:-1]), parts[-1]
        parts = module.split(".")
        for base in (self.root, os.path.join(self.root, "src")):
            directory = os.path.join(base, *parts[:-1])
            if len(parts) > 1 and os.path.isfile(os.path.join(directory, "__init__.py")):
                return directory, parts[-1]
        return None


def _listing(directory: str) -> frozenset[str]:
    try:
        return frozenset(os.listdir(directory))
    except OSError:
        return frozenset()
