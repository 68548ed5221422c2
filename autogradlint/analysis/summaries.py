"""What a project function does with its parameters, read with `ast`: which of them reach
compiled code (made contiguous first or not), and whether it returns a compiled module or one
of its functions. The same file and the project's other files alike: the checks follow a
backward one call deeper through these summaries.
"""

from __future__ import annotations

import ast
import os
import re
import textwrap
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

from ..native.modules import ProjectNative, module_file
from ..settings import HELPER_DEPTH, Settings
from ..text.ast_walk import ast_dotted, parse_quietly
from ..text.ast_walk import walk as walk_ast
from ..text.bindings import Binding, Bindings
from ..text.marks import holds_graph_call
from ..text.outline import module_imports
from ..text.statements import chunk_starts
from .compiled import DISPATCHER_NAMESPACES, named_extension
from .reading import imported_code
from .triton_writes import base_only_params, written_params

_MAX_BYTES = 2_000_000  # a helper file larger than this is not read (its calls stay unknown)
_ALIASING = frozenset(
    {"view", "reshape", "flatten", "to", "float", "half", "bfloat16", "squeeze", "unsqueeze"}
)
_PERMUTING = frozenset({"t", "transpose", "permute", "expand", "narrow", "movedim", "swapaxes"})
_MODULE_LOADERS = (
    "torch.utils.cpp_extension.load",
    "torch.utils.cpp_extension.load_inline",
    "importlib.import_module",
)


@dataclass(frozen=True)
class Reach:
    """A parameter of a function that reaches compiled code."""

    param: int
    callee: str  # the compiled callee, resolved as its caller's file names it
    slot: int | None  # its position there (None: a keyword, or after `*args`)
    keyword: str | None
    guarded: bool  # made contiguous on the way
    direct: bool  # handed over as is (no view, transposition or slice on the way)
    path: str  # the file of the call into compiled code
    via: tuple[str, ...]  # the project functions on the way, outermost first
    loaded: bool = False  # the module is an object a loader returned (its name says nothing)
    kind: str = "extension"  # or "triton": a kernel launch
    copied: bool = False  # a private copy reached it: a write there harms no one
    strides: tuple[str, ...] = ()  # a launch: the tensors whose `.stride(...)` it is given
    # The call runs only under `if <when>:`, `when` a parameter of the summarised function
    # that defaults to False or None: a caller that does not pass it never gets there.
    when: str = ""
    # The function asserts the parameter contiguous before the call (`assert dY.is_contiguous()`):
    # a gradient laid out otherwise raises there instead of being misread.
    asserted: bool = False


@dataclass(frozen=True)
class Summary:
    name: str
    params: tuple[str, ...]
    reaches: tuple[Reach, ...] = ()
    returns_module: bool = False  # an extension module (`return load(...)`, a builder's load)
    # `getattr(<compiled module>, name + ...)` where `name` is parameter `index`
    returns_member: tuple[str, int] | None = None
    # (namespace, index): it returns what calls `torch.ops.<namespace>.<name>` with the
    # arguments it is given, `name` being parameter `index` (gsplat's `_make_lazy_cuda_func`)
    returns_op: tuple[str, int] | None = None


@dataclass
class _State:
    param: int
    guarded: bool
    direct: bool
    copied: bool = False  # a private copy (`.clone()`): a kernel may write into it
    pointer: bool = False  # a raw pointer into it (`.data_ptr()`)


# What a top-level statement defines, from its first line(s): `def f`, `class C`, `x = ...`.
_DEFINES = re.compile(
    r"(?:@[^\n]*\n\s*)*(?:(?:async\s+)?def|class)\s+(\w+)|(\w+)\s*(?::[^=\n]*)?=(?!=)"
)


class _File:
    """One Python file, read a statement at a time: its imports from bytes, and only the
    top-level definitions a summary asks for parsed."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._imports: list[Binding] | None = None
        self._bindings: Bindings | None = None
        self._chunks: dict[str, list[tuple[int, int]]] | None = None  # name -> its statements
        self._defines: dict[str, list[ast.stmt]] = {}

    @property
    def imports(self) -> list[Binding]:
        """Module-scope import bindings, read from the bytes when first asked."""
        if self._imports is None:
            self._imports = list(module_imports(self.text.encode("utf-8", "surrogatepass")))
        return self._imports

    @property
    def bindings(self) -> Bindings:
        if self._bindings is None:
            self._bindings = Bindings(self.imports)
        return self._bindings

    def defines(self, name: str) -> bool:
        """Whether a top-level statement defines `name` (a text scan: nothing parsed)."""
        return name in self._index()

    def _index(self) -> dict[str, list[tuple[int, int]]]:
        if self._chunks is None:
            self._chunks = {}
            starts = chunk_starts(self.text)
            bounds = [*starts, len(self.text)]
            for index, start in enumerate(starts):
                match = _DEFINES.match(self.text, start)
                if match is not None:
                    name = match.group(1) or match.group(2)
                    self._chunks.setdefault(name, []).append((start, bounds[index + 1]))
                elif self.text.startswith("@", start):
                    # a decorator written over several lines (`@custom_op(\n "ns::op", ...)`)
                    end = bounds[index + 1]
                    header = _DECORATED.search(self.text, start, end)
                    if header is not None:
                        self._chunks.setdefault(header.group(1), []).append((start, end))
                elif _GUARDED.match(self.text, start):
                    # `try: from ._C import f` / `except ImportError: def f(...)`, `if
                    # HAS_CUDA: def f(...)`: a definition at module level all the same
                    end = bounds[index + 1]
                    for name in dict.fromkeys(_guarded_names(self.text[start:end])):
                        self._chunks.setdefault(name, []).append((start, end))
        return self._chunks

    def top(self, name: str) -> list[ast.stmt]:
        """The top-level statements that define `name` (def, class, assignment)."""
        if name not in self._defines:
            found: list[ast.stmt] = []
            for start, end in self._index().get(name, ()):
                # Line numbers of the file, not of the chunk: summaries are keyed by them.
                # Blank lines before the chunk cost the tokenizer next to nothing; renumbering
                # the tree afterwards (ast.increment_lineno) visits every node.
                lines_before = "\n" * self.text.count("\n", 0, start)
                chunk = parse_quietly(lines_before + self.text[start:end])
                if chunk is not None:
                    found += [s for s in _flattened(chunk.body) if name in _defined(s)]
            self._defines[name] = found
        return self._defines[name]


# Other files, shared by every file a worker lints (keyed by path, size and mtime): a helper
# module imported by many files is read once.
_SHARED: dict[tuple[str, int, int], _File] = {}
_NOTHING = _File("")


class PythonFiles:
    """The project's Python files, read when a summary first needs one; the linted file from
    its own text (an editor's buffer may differ from the disk)."""

    def __init__(self, own: str, text: str) -> None:
        self.own_path = own
        self.own = _File(text)

    def get(self, path: str) -> _File:
        if path == self.own_path:
            return self.own
        try:
            info = os.stat(path)
        except OSError:
            return _NOTHING
        key = (path, info.st_size, info.st_mtime_ns)
        if key not in _SHARED:
            if len(_SHARED) > 512:
                _SHARED.clear()
            _SHARED[key] = _File(_read(path))
        return _SHARED[key]

    def text(self, path: str) -> str:
        return self.get(path).text

    def top(self, path: str, name: str) -> list[ast.stmt]:
        return self.get(path).top(name)

    def bindings(self, path: str) -> Bindings:
        return self.get(path).bindings


# The `def`/`class` line a top-level decorated statement ends its decorators with.
_DECORATED = re.compile(r"^(?:async\s+)?(?:def|class)\s+(\w+)", re.MULTILINE)
# A top-level `if`/`try` statement, whose branches may define module-level names.
_GUARDED = re.compile(r"(?:if\b|try\s*:)")


def _guarded_names(chunk: str) -> list[str]:
    """The names the branches of a top-level `if`/`try` statement define (nested defs and
    classes' bodies left out)."""
    tree = parse_quietly(textwrap.dedent(chunk))
    if tree is None:
        return []
    return [name for stmt in _flattened(tree.body) for name in _defined(stmt)]


def _flattened(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of `body`, with those of its `if`/`try` branches in their place."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            out += _flattened(stmt.body) + _flattened(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            branches = [stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody]
            out += [s for branch in branches for s in _flattened(branch)]
        else:
            out.append(stmt)
    return out


def _defined(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


class Summaries:
    """Summaries of the project's functions, memoised (one per linted file)."""

    def __init__(self, path: str, text: str, settings: Settings, native: ProjectNative) -> None:
        self.path = os.path.abspath(path) if path and not path.startswith("<") else path
        self.settings = settings
        self.native = native
        self.files = PythonFiles(self.path, text)
        self._memo: dict[tuple[str, int], Summary | None] = {}
        self._natives: dict[str, ProjectNative] = {self.path: native}
        self.consulted: set[str] = set()  # other files a summary was read from
        # `function`'s answers, and the files each added to `consulted` (which only grows)
        self._functions: dict[
            tuple[str, str, int], tuple[tuple[str, ast.FunctionDef] | None, frozenset[str]]
        ] = {}

    # --- finding the function a call runs -----------------------------------------------------
    def function(
        self, written: str, path: str | None = None, hops: int = 0
    ) -> tuple[str, ast.FunctionDef] | None:
        """The project function `written` (a call's callee text in file `path`) names: a
        module-level function of that file or one it imports (through a package's re-export,
        `from .decorators import input_guard` in `pkg/utils/__init__.py`), or a static method.

        Memoised: the rules that follow helpers ask it of every call of every method they read,
        the same callee many times over."""
        key = (written, path or self.path, hops)
        known = self._functions.get(key)
        if known is not None:
            self.consulted |= known[1]
            return known[0]
        before = frozenset(self.consulted)
        found = self._function(written, key[1], hops)
        self._functions[key] = (found, frozenset(self.consulted - before))
        return found

    def _function(self, written: str, path: str, hops: int) -> tuple[str, ast.FunctionDef] | None:
        head, _, rest = written.partition(".")
        defined = self.files.top(path, head)
        if not rest:
            own = _last_function(defined, head)
            if own is not None:
                return path, own
        elif "." not in rest:
            owner = next((s for s in defined if isinstance(s, ast.ClassDef)), None)
            if owner is not None:
                method = _module_function(owner, rest)
                if method is not None and any(
                    isinstance(d, ast.Name) and d.id == "staticmethod"
                    for d in method.decorator_list
                ):
                    return path, method
                return None
        target = self.files.bindings(path).resolve_dotted(written)
        if target == written and not self.files.bindings(path).is_imported(head):
            return None
        module, _, name = target.rpartition(".")
        if not module:
            return None
        found = module_file(path, module, self.native_for(path).root)
        if found is None or not os.path.isfile(found):
            return None
        function = _last_function(self.files.top(found, name), name)
        if function is None:
            if hops < 3 and self.files.bindings(found).is_imported(name):
                return self.function(name, found, hops + 1)  # re-exported from elsewhere
            return None
        if found != self.path:
            self.consulted.add(found)
        return found, function

    def kernel_writes(self, reach: Reach) -> bool:
        """Whether the Triton kernel a launch reaches stores through the argument at that
        launch's slot (or keyword)."""
        if reach.kind != "triton":
            return False
        name, kernel = self._kernel_param(reach.callee, reach.path, reach.slot, reach.keyword)
        return kernel is not None and name in written_params(kernel)

    def kernel_reads_one_element(
        self, callee: str, path: str | None, slot: int | None, keyword: str | None = None
    ) -> bool:
        """Whether the Triton kernel `callee` only ever loads the argument at `slot` at its
        base (`tl.load(grad_ptr)`): one element, whatever the tensor's strides."""
        name, kernel = self._kernel_param(callee, path or self.path, slot, keyword)
        return kernel is not None and name in base_only_params(kernel)

    def _kernel_param(
        self, callee: str, path: str, slot: int | None, keyword: str | None
    ) -> tuple[str | None, ast.FunctionDef | None]:
        found = self.function(callee.lstrip("."), path)
        if found is None:
            return None, None
        kernel = found[1]
        params = [a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args)]
        name = keyword
        if name is None and slot is not None and slot < len(params):
            name = params[slot]
        return name, kernel

    def foreign_graph_helper(self, written: str) -> tuple[str, list[Binding]] | None:
        """The source of a function of another project file that the linted file calls, and
        that file's import bindings, when its text can hold a graph call (family A follows it
        one call deep)."""
        found = self.function(written)
        if found is None or found[0] == self.path:
            return None
        path, function = found
        lines = self.files.text(path).splitlines(keepends=True)
        first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
        text = "".join(lines[first - 1 : function.end_lineno or function.lineno])
        if not holds_graph_call(text):
            return None
        return text, list(self.files.get(path).imports)

    # --- summaries -----------------------------------------------------------------------------
    def summary(self, path: str, function: ast.FunctionDef, depth: int = 0) -> Summary | None:
        key = (path, function.lineno)
        if key not in self._memo:
            self._memo[key] = None  # recursion ends here
            self._memo[key] = self._summarise(path, function, depth)
        return self._memo[key]

    def _summarise(self, path: str, function: ast.FunctionDef, depth: int) -> Summary:
        args = function.args
        params = tuple(a.arg for a in (*args.posonlyargs, *args.args))
        if args.vararg is None:
            # keyword-only parameters (`def run(*, grad_output)`) are reached by name; with
            # `*args` beside them a slot past the positional ones would be ambiguous
            params += tuple(a.arg for a in args.kwonlyargs)
        states: dict[str, _State] = {p: _State(i, False, True) for i, p in enumerate(params)}
        values: dict[str, ast.expr] = {}
        reaches: list[Reach] = []
        returns_module = False
        returns_member: tuple[str, int] | None = None
        returns_op: tuple[str, int] | None = None
        maybe = _conditional(function)
        gated = _gated_calls(function)
        asserted: set[int] = set()  # parameters asserted contiguous so far
        for node in _in_order(function):
            if isinstance(node, ast.Assert):
                for inner in walk_ast(node.test):
                    if (
                        isinstance(inner, ast.Call)
                        and isinstance(inner.func, ast.Attribute)
                        and inner.func.attr == "is_contiguous"
                        and (held := _state_of(inner.func.value, states)) is not None
                    ):
                        asserted.add(held.param)
                continue
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    values[target.id] = node.value
                    state = _state_of(node.value, states)
                    if state is None and id(node) in maybe:
                        pass  # `if pad: x = fresh` leaves the gradient in `x` on the other path
                    elif state is None:
                        states.pop(target.id, None)
                    else:
                        states[target.id] = state
            elif isinstance(node, ast.Call):
                found = self._call(path, node, states, values, depth, function.name)
                if id(node) in gated:
                    found = [replace(r, when=gated[id(node)]) for r in found]
                found = [replace(r, asserted=True) if r.param in asserted else r for r in found]
                reaches.extend(found)
            elif isinstance(node, ast.Return) and node.value is not None:
                value = node.value
                if isinstance(value, ast.Name) and value.id in values:
                    value = values[value.id]
                if self._loads_module(path, value):
                    returns_module = True
                member = self._member(path, value, params, values)
                if member is not None:
                    returns_member = member
                returns_op = returns_op or self._op_closure(path, node.value, params, function)
        return Summary(
            function.name, params, tuple(reaches), returns_module, returns_member, returns_op
        )

    def _op_closure(
        self, path: str, value: ast.expr, params: tuple[str, ...], function: ast.FunctionDef
    ) -> tuple[str, int] | None:
        """`return call` where the nested `def call(*args, **kwargs)` returns
        `getattr(torch.ops.<ns>, name)(*args, **kwargs)`, `name` a parameter of `function`
        that `call` does not rebind: (ns, the parameter's index)."""
        if not isinstance(value, ast.Name):
            return None
        nested = next(
            (
                stmt
                for stmt in function.body
                if isinstance(stmt, ast.FunctionDef) and stmt.name == value.id
            ),
            None,
        )
        if nested is None or nested.args.vararg is None:
            return None
        own = {a.arg for a in (*nested.args.posonlyargs, *nested.args.args)}
        for node in ast.walk(nested):
            if isinstance(node, ast.Assign):
                own.update(t.id for t in node.targets if isinstance(t, ast.Name))
        for node in ast.walk(nested):
            if not (isinstance(node, ast.Return) and isinstance(node.value, ast.Call)):
                continue
            call = node.value
            picked = call.func
            forwarded = (
                len(call.args) == 1
                and isinstance(call.args[0], ast.Starred)
                and isinstance(call.args[0].value, ast.Name)
                and call.args[0].value.id == nested.args.vararg.arg
            )
            if not (
                forwarded
                and isinstance(picked, ast.Call)
                and isinstance(picked.func, ast.Name)
                and picked.func.id == "getattr"
                and len(picked.args) == 2
                and isinstance(picked.args[1], ast.Name)
                and picked.args[1].id in params
                and picked.args[1].id not in own
            ):
                continue
            owner = ast_dotted(picked.args[0])
            resolved = self.files.bindings(path).resolve_dotted(owner) if owner else ""
            parts = resolved.split(".")
            if len(parts) == 3 and parts[:2] == ["torch", "ops"]:
                return parts[2], params.index(picked.args[1].id)
        return None

    def _call(
        self,
        path: str,
        call: ast.Call,
        states: dict[str, _State],
        values: dict[str, ast.expr],
        depth: int,
        name: str,
    ) -> list[Reach]:
        passed: list[tuple[_State, int | None, str | None]] = []
        starred = False
        for index, arg in enumerate(call.args):
            starred = starred or isinstance(arg, ast.Starred)
            state = _state_of(arg, states)
            if state is not None:
                passed.append((state, None if starred else index, None))
        from_dict: list[tuple[_State, None, str]] = []
        for keyword in call.keywords:
            state = _state_of(keyword.value, states) if keyword.arg else None
            if state is not None:
                passed.append((state, None, keyword.arg))
            unpacked = values.get(keyword.value.id) if isinstance(keyword.value, ast.Name) else None
            if keyword.arg is None and isinstance(unpacked, ast.Dict):
                # `kernel[grid](**kernel_args)`, `kernel_args = {"dY_ptr": dY, ...}`
                for key, item in zip(unpacked.keys, unpacked.values, strict=True):
                    state = _state_of(item, states)
                    if isinstance(key, ast.Constant) and isinstance(key.value, str) and state:
                        from_dict.append((state, None, key.value))
        passed += from_dict
        if not passed:
            return []
        kernel = self._triton_launch(path, call, values)
        if kernel is not None:
            own_strides = _stride_owners(call, values)
            out = []
            launched: list[tuple[_State, int | None, str | None, str | None]] = [
                (held, at, None, ast_dotted(arg))
                for at, arg in enumerate(call.args)
                if (held := _state_of(arg, states)) is not None
            ]
            # What a dict literal unpacks into the launch is read; a launch's own keyword
            # arguments are not yet: fla prepares them with helpers that return the tensor and
            # its row stride together (`dy, stride = prepare_input(x=dy)`), which the
            # summaries cannot yet tell from a raw hand-over.
            launched += [(held, None, kw, None) for held, _, kw in from_dict]
            for held, slot, named, written in launched:
                strided = written in own_strides  # given its own strides: stride-aware
                out.append(
                    Reach(
                        held.param,
                        kernel,
                        slot,
                        named,
                        held.guarded or strided,
                        held.direct,
                        path,
                        (f"{name}()",),
                        kind="triton",
                        strides=tuple(sorted(own_strides)),
                    )
                )
            return out
        callee = self.compiled(path, call, values)
        if callee is not None:
            head = (ast_dotted(call.func) or "").split(".", 1)[0]
            loaded = head in values or not self.files.bindings(path).is_imported(head)
            return _reaches(passed, callee, path, name, loaded=loaded)
        written = ast_dotted(call.func)
        unread = self._unread(path, written) if written is not None else None
        if unread is not None:
            # Only a raw pointer proves that unread code reads the memory itself: a tensor
            # handed to an uninstalled package may well go through torch (or be made
            # contiguous) there.
            pointers = [p for p in passed if p[0].pointer]
            return _reaches(pointers, unread, path, name, kind="unknown")
        head = (written or "").split(".", 1)[0]
        if written is not None and head not in values and head not in states:
            statements = self.files.top(path, head)
            defined = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            value = last_value(statements)
            if (
                isinstance(value, ast.Constant)
                and value.value is None
                and not any(isinstance(s, defined) for s in statements)
            ):
                # `_ext: Optional[Ext] = None`, set under `global` at run time (Megatron's
                # lazily imported cudnn-frontend DSA module): the code is what a loader put
                # there, never the project's Python, as for a direct call in backward
                return _reaches(passed, written, path, name, kind="runtime")
        if written is None or depth + 1 >= HELPER_DEPTH:
            return []
        found = self.function(written, path)
        if found is None:
            return []
        inner = self.summary(found[0], found[1], depth + 1)
        if inner is None:
            return []
        deeper: list[Reach] = []
        for given, position, named in passed:
            slot = inner.params.index(named) if named in inner.params else position
            for reach in inner.reaches:
                if reach.param == slot:
                    deeper.append(
                        replace(
                            reach,
                            param=given.param,
                            guarded=reach.guarded or given.guarded,
                            direct=reach.direct and given.direct,
                            copied=reach.copied or given.copied,
                            via=(f"{name}()", *reach.via),
                            when="",  # the inner function's parameter: its caller passes it
                        )
                    )
        return deeper

    def _unread(self, path: str, written: str) -> str | None:
        """The resolved name of an imported callee that neither the project nor `sys.path`
        holds (`tv.from_blob` of a package not installed): code nothing can read, which a
        gradient (or a raw pointer into it) must not reach unguarded. None otherwise."""
        bindings = self.files.bindings(path)
        head = written.split(".", 1)[0]
        if not bindings.is_imported(head):
            return None
        resolved = bindings.resolve_dotted(written)
        found = imported_code(resolved, path, self.native_for(path))
        return resolved.lstrip(".") if found is None else None

    # --- what is compiled ---------------------------------------------------------------------
    def compiled(self, path: str, call: ast.Call, values: dict[str, ast.expr]) -> str | None:
        """The resolved name of a call into compiled code made in file `path`, else None."""
        written = ast_dotted(call.func)
        if written is None:
            return None
        bindings = self.files.bindings(path)
        name = bindings.resolve_dotted(written)
        parts = name.split(".")
        head = written.split(".", 1)[0]
        if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
            text = self.files.text(path)
            defined = any(f"{q}{parts[2]}::{parts[3]}{q}" in text for q in "\"'")
            return None if parts[2] in DISPATCHER_NAMESPACES or defined else name
        if len(parts) < 2 or parts[0] == "torch":
            return None
        if head in values and self._loads_module(path, values[head]):
            return name
        module = name.rsplit(".", 1)[0]
        if not bindings.is_imported(head):
            bound = last_value(self.files.top(path, head))
            return name if bound is not None and self._loads_module(path, bound) else None
        native = self.native_for(path)
        if native.is_python(module):
            return None
        if named_extension(name, self.settings):
            return name
        return name if native.is_compiled(module) else None

    def loads(self, expression: str) -> bool:
        """Whether an expression of the linted file (its source text) loads an extension."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # odd code is linted, never warned about
            try:
                value = ast.parse(expression.strip(), mode="eval").body
            except (SyntaxError, ValueError, RecursionError):
                return False
        return self._loads_module(self.path, value)

    def loads_in(self, path: str, value: ast.expr) -> bool:
        """Whether an expression of file `path` loads an extension (see `_loads_module`)."""
        return self._loads_module(path, value)

    def loads_module(self, name: str) -> bool:
        """Whether a module-level name of the linted file is bound to a loaded extension."""
        value = last_value(self.files.top(self.path, name))
        return value is not None and self._loads_module(self.path, value)

    def _triton_launch(
        self, path: str, call: ast.Call, values: dict[str, ast.expr] | None = None
    ) -> str | None:
        """`kernel[grid](...)` on a `@triton.jit` function of that file (or one it imports),
        or `wrap_triton(kernel)[grid](...)`: the kernel's name. `kernel = a if tune else b`
        launches one of two: the first that is a kernel is read."""
        func = call.func
        if not isinstance(func, ast.Subscript):
            return None
        value = func.value
        if isinstance(value, ast.Call) and value.args:
            wrapper = self.files.bindings(path).resolve_dotted(ast_dotted(value.func) or "")
            if wrapper.rsplit(".", 1)[-1] in ("wrap_triton", "capture_triton"):
                return ast_dotted(value.args[0]) or "kernel"
            return None
        written = ast_dotted(value)
        if written is None:
            return None
        chosen = (values or {}).get(written)
        if isinstance(chosen, ast.IfExp):
            for branch in (chosen.body, chosen.orelse):
                picked = ast.Call(ast.Subscript(branch, func.slice), call.args, call.keywords)
                kernel = self._triton_launch(path, picked)
                if kernel is not None:
                    return kernel
            return None
        found = self.function(written, path)
        if found is None:
            return None
        decorators = [
            ast_dotted(d.func if isinstance(d, ast.Call) else d) or ""
            for d in found[1].decorator_list
        ]
        resolved = [self.files.bindings(found[0]).resolve_dotted(d) for d in decorators]
        return written if any(d.startswith("triton.") for d in resolved) else None

    def _loads_module(self, path: str, value: ast.expr) -> bool:
        """`load(...)`, `load_inline(...)`, `importlib.import_module(...)`, a builder's
        `.load()`, or a project function that returns one of these."""
        if not isinstance(value, ast.Call):
            return False
        written = ast_dotted(value.func)
        if written is None:
            func = value.func
            # `SomeOpBuilder().load()`: a method `load` on a freshly built object
            return (
                isinstance(func, ast.Attribute)
                and func.attr == "load"
                and isinstance(func.value, ast.Call)
            )
        resolved = self.files.bindings(path).resolve_dotted(written)
        loaders = (*_MODULE_LOADERS, *self.settings.loaders)
        if any(fnmatchcase(resolved, pattern) for pattern in loaders):
            return True
        found = self.function(written, path)
        if found is None:
            return False
        inner = self.summary(found[0], found[1], HELPER_DEPTH)
        return inner is not None and inner.returns_module

    def _member(
        self, path: str, value: ast.expr, params: tuple[str, ...], values: dict[str, ast.expr]
    ) -> tuple[str, int] | None:
        """`getattr(<compiled module>, <parameter> + ...)`: (module, parameter index)."""
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "getattr"
            and len(value.args) >= 2
        ):
            return None
        owner = ast_dotted(value.args[0])
        if owner is None:
            return None
        module = self.files.bindings(path).resolve_dotted(owner)
        if not (self.native_for(path).is_compiled(module) or self._loaded(path, owner, values)):
            return None
        name = value.args[1]
        if isinstance(name, ast.Name) and name.id in values:
            name = values[name.id]
        while isinstance(name, ast.BinOp) and isinstance(name.op, ast.Add):
            name = name.left
        if isinstance(name, ast.Name) and name.id in params:
            return module, params.index(name.id)
        return None

    def _loaded(self, path: str, owner: str, values: dict[str, ast.expr]) -> bool:
        value = values.get(owner)
        return value is not None and self._loads_module(path, value)

    def natives(self) -> list[ProjectNative]:
        """The native sides consulted for the files summarised."""
        return list(self._natives.values())

    def native_for(self, path: str) -> ProjectNative:
        if path not in self._natives:
            self._natives[path] = ProjectNative(path, self.settings.native_sources)
        return self._natives[path]


# --- small ast helpers -----------------------------------------------------------------------
def _reaches(
    passed: list[tuple[_State, int | None, str | None]],
    callee: str,
    path: str,
    name: str,
    *,
    loaded: bool = False,
    kind: str = "extension",
) -> list[Reach]:
    """The reaches of the parameters `passed` (state, slot, keyword) into `callee`, called in
    function `name` of file `path`."""
    return [
        Reach(
            s.param,
            callee,
            slot,
            kw,
            s.guarded,
            s.direct,
            path,
            (f"{name}()",),
            loaded,
            kind=kind,
            copied=s.copied,
        )
        for s, slot, kw in passed
    ]


def _stride_owners(call: ast.Call, values: dict[str, ast.expr] | None = None) -> set[str]:
    """Names whose `.stride(...)` / `.stride()` a launch is given, also through a name bound
    to them (`s = g.stride()`, then `s[0], s[1]`: mamba's `angle_dt_bwd`)."""
    owners: set[str] = set()
    nodes = list(walk_ast(call))
    bound = {n.id for n in nodes if isinstance(n, ast.Name)} & set(values or ())
    for name in bound:
        assert values is not None
        nodes += walk_ast(values[name])
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "stride":
                owner = ast_dotted(node.func.value)
                if owner is not None:
                    owners.add(owner)
    return owners


def _state_of(expr: ast.expr, states: dict[str, _State]) -> _State | None:
    if isinstance(expr, ast.Name):
        return states.get(expr.id)
    if isinstance(expr, ast.Starred):
        return _state_of(expr.value, states)
    if isinstance(expr, ast.Subscript):
        inner = _state_of(expr.value, states)
        return None if inner is None else _State(inner.param, inner.guarded, False, inner.copied)
    if isinstance(expr, ast.Attribute) and expr.attr in ("T", "mT", "H", "mH", "data"):
        inner = _state_of(expr.value, states)
        return None if inner is None else _State(inner.param, inner.guarded, False, inner.copied)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        inner = _state_of(expr.func.value, states)
        if inner is None:
            return None
        method = expr.func.attr
        if method == "contiguous":
            return _State(inner.param, True, inner.direct, inner.copied)
        if method == "clone":
            dense = any(
                k.arg == "memory_format"
                and (ast_dotted(k.value) or "").endswith("contiguous_format")
                for k in expr.keywords
            )
            return _State(inner.param, inner.guarded or dense, inner.direct, True)
        if method == "data_ptr":
            # a raw pointer into it: whoever reads through it reads the tensor's memory
            return _State(inner.param, inner.guarded, False, inner.copied, pointer=True)
        if method in _ALIASING or method in _PERMUTING:
            guarded = inner.guarded and method in _ALIASING
            return _State(inner.param, guarded, False, inner.copied)
    return None


def _gated_calls(function: ast.FunctionDef, none_tests: bool = False) -> dict[int, str]:
    """The calls that run only under `if <param>:` (in its body, not its `else`), where the
    parameter defaults to False or None (Megatron's `all_rows_nonempty: bool = False`): by id,
    the parameter's name. With `none_tests`, also the body of `if <param> is not None:` and the
    `else` of `if <param> is None:` (Megatron's `output_split_sizes=None`)."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(
        zip(
            [a.arg for a in positional[len(positional) - len(args.defaults) :]],
            args.defaults,
            strict=True,
        )
    )
    defaults.update(
        (a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    )
    off = {
        name
        for name, default in defaults.items()
        if isinstance(default, ast.Constant) and default.value in (False, None)
    }
    found: dict[int, str] = {}
    for node in walk_ast(function):
        if not isinstance(node, ast.If):
            continue
        gated: tuple[str, list[ast.stmt]] | None = None
        if isinstance(node.test, ast.Name) and node.test.id in off:
            gated = node.test.id, node.body
        elif none_tests and (tested := _none_test(node.test)) is not None:
            name, is_none = tested
            if name in off:
                gated = name, node.orelse if is_none else node.body
        if gated is None:
            continue
        for statement in gated[1]:
            for inner in walk_ast(statement):
                if isinstance(inner, ast.Call):
                    found.setdefault(id(inner), gated[0])
    return found


def may_pass(
    name: str, params: Sequence[str], given: int, keywords: Iterable[str | None], unpacks: bool
) -> bool:
    """Whether a call may pass `name`, a parameter of a function taking `params`, and so run
    what is gated on it: it unpacks `*args` or `**kwargs` (`unpacks`, or a keyword None, as
    `ast` spells `**kwargs`), names it, or gives it among its `given` positional arguments."""
    if unpacks or any(keyword is None or keyword == name for keyword in keywords):
        return True
    return name in params and params.index(name) < given


def gated_calls(function: ast.FunctionDef) -> dict[int, str]:
    """`_gated_calls` with the `is None` / `is not None` tests read too."""
    return _gated_calls(function, none_tests=True)


def _none_test(test: ast.expr) -> tuple[str, bool] | None:
    """(name, whether the test is `is None`) for `name is None` / `name is not None`."""
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return test.left.id, isinstance(test.ops[0], ast.Is)
    return None


def _conditional(function: ast.FunctionDef) -> set[int]:
    """The ids of the assignments that may not run: under an `if`, a loop or a `try` (nested
    defs left out)."""
    found: set[int] = set()
    pending: list[tuple[ast.AST, bool]] = [(child, False) for child in function.body]
    while pending:
        node, under = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if under and isinstance(node, ast.Assign):
            found.add(id(node))
        branches = isinstance(node, (ast.If, ast.For, ast.While, ast.Try, ast.AsyncFor))
        pending.extend((child, under or branches) for child in ast.iter_child_nodes(node))
    return found


def _in_order(function: ast.FunctionDef) -> list[ast.AST]:
    """The function's statements and calls in source order (nested defs left out)."""
    out: list[ast.AST] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            visit(child)
            if isinstance(child, (ast.Assign, ast.Call, ast.Return, ast.Assert)):
                out.append(child)

    visit(function)
    return out


def _module_function(scope: ast.Module | ast.ClassDef, name: str) -> ast.FunctionDef | None:
    found = None
    for stmt in scope.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            found = stmt  # the last definition wins, as at run time
    return found


def _last_function(statements: list[ast.stmt], name: str) -> ast.FunctionDef | None:
    found = None
    for stmt in statements:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            found = stmt  # the last definition wins, as at run time
    return found


def last_value(statements: list[ast.stmt]) -> ast.expr | None:
    """The value the last of `statements` that assigns one name gives it."""
    found = None
    for stmt in statements:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            found = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            found = stmt.value  # `_ext: Optional[Ext] = None`
    return found


def _read(path: str) -> str:
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return ""
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
