"""One view of the project: its root, its modules, and which classes are autograd Functions,
resolved through imports (never by a bare class name).

Every front end (check of a directory, of one file, of stdin, fix, the language server,
pre-commit) lints a file with the same `FileView`, built from the whole project whatever paths
were named, so they report the same findings. The view is built from bytes: class statements
(text/outline.py) for every file, and, only for the few files whose classes or
imports can involve a Function, their module-scope imports and the signatures of their
Functions' `forward` (`ast` of just those statements). Per-file records are cached with the
results; building the index itself is linear in the candidate classes.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from .source_io import decode, read_source
from .text.ast_walk import ast_dotted, parse_quietly
from .text.bindings import Binding
from .text.functions import FUNCTION_BASES, TORCH_FUNCTIONS, forward_parameters, parameters
from .text.hierarchy import descendants
from .text.outline import ClassDecl, Outline, module_imports, outline
from .text.statements import body_start, chunk_starts, class_members, keyword_line

PROJECT_MARKERS = (".git", ".hg", "pyproject.toml", "setup.py", "setup.cfg", ".autogradlint.yaml")
_MAX_HOPS = 16  # re-exports followed per name (a cycle of imports ends there)
# Files parsed at most to look for instances of one class name (AGL402's fix): beyond that the
# name is a common word, and the search would cost more than every other step of a check.
MAX_MENTIONING = 64


class Signature(NamedTuple):
    """What `apply` and a direct `forward` call must be given (after ctx)."""

    required: int
    total: int
    star: bool  # forward takes *args
    setup_context: bool  # the setup_context style: forward has no ctx parameter
    # the positional parameters' names, and whether it takes **kwargs: which keywords `apply`
    # can bind (AGL410 on `Fn.apply(x, scale=3.0)` for a Function of another file)
    names: tuple[str, ...] = ()
    kwargs: bool = False


@dataclass(frozen=True)
class Details:
    """What only the files the index resolves through need, read when it first asks (and
    cached): module-scope imports (from bytes), and the signatures of their classes'
    `forward` (`ast` of just those classes: only files whose Functions are called directly)."""

    imports: tuple[Binding, ...] | None = None
    signatures: tuple[tuple[str, Signature], ...] | None = None  # class name -> its forward


@dataclass(frozen=True)
class FileView:
    """What the engine knows of the rest of the project when it analyses one file. Names are
    as this file writes them: no resolution is left to do."""

    module: str = ""
    function_bases: frozenset[str] = frozenset()  # base expressions that are Functions
    function_names: frozenset[str] = frozenset()  # names bound here to Functions elsewhere
    signatures: tuple[tuple[str, Signature], ...] = ()  # forward of those, by local name
    # This file's Function classes as the rest of the project uses them (`ProjectIndex.uses`):
    # (class, where another file subclasses it, where another file may instantiate it or a
    # subclass), "" for nowhere, None where instances were not looked for. A class missing
    # here is one nothing is known about (no index, or a class the index cannot resolve).
    uses: tuple[tuple[str, str, str | None], ...] = ()
    # This file's plain classes that a Function of the project derives from (`GradMixin` of
    # `class Fn(GradMixin, Function)`): torch runs the backward such a mixin defines.
    mixins: frozenset[str] = frozenset()
    # Where the Functions this file's classes derive from are defined, when that is another
    # file: base expression as written here -> (path, class name) of that class and of its
    # ancestors in the project, in the order a method is looked up. The contract checks read
    # forward and backward from there.
    inherited: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    @property
    def seeds(self) -> frozenset[str]:
        """Class names a text scan may treat as Functions (an over-approximation)."""
        return (
            self.function_names | self.mixins | {b.rsplit(".", 1)[-1] for b in self.function_bases}
        )

    def __bool__(self) -> bool:
        return bool(self.function_bases or self.function_names or self.mixins)


EMPTY = FileView()


def project_root(start: Path, config_source: Path | None = None) -> Path | None:
    """The project a path belongs to, found as ruff and mypy find theirs: the directory of the
    configuration file, else the nearest version-control or packaging root; None for a loose
    file (then only the named paths are the project)."""
    if config_source is not None:
        return config_source.parent
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        if any((candidate / marker).exists() for marker in PROJECT_MARKERS):
            return candidate
    return None


def module_names(path: Path | str, root: Path | None) -> tuple[str, ...]:
    """The dotted names a file can be imported by: through its packages (`__init__.py`), and,
    for namespace packages and src layouts, relative to the root and to `src/`."""
    path = os.fspath(path)
    absolute = path if path.startswith(os.sep) else os.path.abspath(path)
    directory, _, filename = absolute.rpartition(os.sep)
    stem = filename.rsplit(".", 1)[0]
    package = _package_of(directory)
    dotted = ".".join(p for p in (package, "" if stem == "__init__" else stem) if p)
    names = [dotted] if dotted else []
    prefix = _root_prefix(root)
    if prefix and absolute.startswith(prefix):
        pieces = [p for p in absolute[len(prefix) :].rsplit(".", 1)[0].split(os.sep)]
        pieces = [p for p in pieces if p != "__init__"]
        for skip in (0, 1):
            if skip and not (pieces and pieces[0] in ("src", "lib", "python")):
                continue
            name = ".".join(pieces[skip:])
            if name and all(p.isidentifier() for p in pieces[skip:]) and name not in names:
                names.append(name)
    return tuple(names)


@functools.lru_cache(maxsize=16)
def _root_prefix(root: Path | None) -> str:
    return "" if root is None else os.path.abspath(root).rstrip(os.sep) + os.sep


@functools.lru_cache(maxsize=4096)
def _package_of(directory: str) -> str:
    """The dotted package a directory is (climbing while `__init__.py` exists), memoised per
    directory: the files of one directory share it."""
    if not os.path.exists(os.path.join(directory, "__init__.py")):
        return ""
    parent, name = os.path.split(directory)
    above = _package_of(parent) if parent != directory else ""
    return f"{above}.{name}" if above else name


# --- details of one file, from bytes -----------------------------------------------------------
def signatures_of(text: str) -> tuple[tuple[str, Signature], ...]:
    """The forward signature of each top-level class that defines one, in class order: from
    `ast` of each forward's header alone where the text says exactly which statements are
    the class's methods (text/statements.py), else of the whole class statement."""
    signatures: list[tuple[str, Signature]] = []
    for start, end in _forward_classes(text):
        read = None if "\r" in text else _from_forward_header(text, start, end)
        if read is None:  # the whole class, as `ast` reads it
            read = _from_class_statements(_ended(text[start:end]))
        signatures.extend(read)
    return tuple(signatures)


def signatures_from_classes(text: str) -> tuple[tuple[str, Signature], ...]:
    """What `signatures_of` finds, from `ast` of every class statement that mentions a
    forward (the reference its shortcut is held to, and its fallback)."""
    signatures: list[tuple[str, Signature]] = []
    for start, end in _forward_classes(text):
        signatures.extend(_from_class_statements(_ended(text[start:end])))
    return tuple(signatures)


def _forward_classes(text: str) -> Iterator[tuple[int, int]]:
    """Where the top-level statements that may be classes defining a forward are."""
    starts = chunk_starts(text)
    bounds = [*starts, len(text)]
    for index, start in enumerate(starts):
        chunk = text[start : bounds[index + 1]]
        if chunk.lstrip().startswith(("class ", "@")) and "def forward" in chunk:
            yield start, bounds[index + 1]


def _ended(chunk: str) -> str:
    return chunk if chunk.endswith(("\n", "\r")) else chunk + "\n"


def _from_class_statements(text: str) -> list[tuple[str, Signature]]:
    tree = parse_quietly(text)
    out: list[tuple[str, Signature]] = []
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.ClassDef):
            signature = _forward_signature(node)
            if signature is not None:
                out.append((node.name, signature))
    return out


_CLASS_NAME = re.compile(r"[ \t]*class[ \t]+(\w+)")
_CODE_AT_COLUMN_0 = re.compile(r"\n[^\s#]")


def _from_forward_header(text: str, start: int, end: int) -> list[tuple[str, Signature]] | None:
    """The class statement text[start:end]'s forward signature from its forward's header
    alone (a class body holds ~50 times the text of the header); None where the text leaves
    any doubt about which statements are the class's methods: a decorator over several
    lines, a body line at column 0 (a string), more than one class."""
    body = body_start(text, start, end)
    if body is None or _CODE_AT_COLUMN_0.search(text, body[0] - 1, end):
        return None
    keyword = keyword_line(text, start, end)
    if keyword is None:
        return None
    named = _CLASS_NAME.match(text, keyword)
    if named is None:
        return []  # a def: no class
    if not named.group(1).isascii():
        return None  # `ast` normalises non-ASCII names (NFKC)
    offset, indent = body
    methods: dict[str, tuple[int, int]] = {}
    for first, last, found in class_members(text, offset, end, indent):
        if found is None:
            return None
        if found:
            methods[found] = (first, last)
    if "forward" not in methods:
        return []
    first, last = methods["forward"]
    header = body_start(text, first, last)
    source = text[first:last] if header is None else text[first : header[0]] + header[1] + "pass"
    tree = parse_quietly("class _C:\n" + source + "\n")
    if tree is None:
        return None
    holder = tree.body[0]
    assert isinstance(holder, ast.ClassDef)  # the text parsed starts with `class _C:`
    defs = [n for n in holder.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(defs) != 1 or defs[0].name != "forward":
        return None
    found_parameters = parameters(defs[0], "setup_context" in methods)
    signature = Signature(
        found_parameters.required,
        len(found_parameters.names),
        found_parameters.star,
        found_parameters.setup_context,
        found_parameters.names,
        found_parameters.kwargs,
    )
    return [(named.group(1), signature)]


def _forward_signature(node: ast.ClassDef) -> Signature | None:
    found = forward_parameters(node)
    if found is None:
        return None
    return Signature(
        found.required, len(found.names), found.star, found.setup_context, found.names, found.kwargs
    )


# --- the index -------------------------------------------------------------------------------
@dataclass
class Record:
    """One file of the project, as the index sees it."""

    path: str
    outline: Outline
    source: Callable[[], bytes | None]  # its bytes, read again only if its details are needed
    details: Details = Details()
    names: tuple[str, ...] = ()

    @property
    def decls(self) -> Sequence[ClassDecl]:
        return self.outline.decls

    @property
    def imports(self) -> tuple[Binding, ...]:
        if self.details.imports is None:
            data = self.source()
            imports = module_imports(data) if data is not None else ()
            self.details = replace(self.details, imports=imports)
        return self.details.imports or ()

    @property
    def signatures(self) -> dict[str, Signature]:
        if self.details.signatures is None:
            data = self.source()
            text = decode(data) if data is not None else None
            found = signatures_of(text) if isinstance(text, str) else ()
            self.details = replace(self.details, signatures=found)
        return dict(self.details.signatures or ())

    @functools.cached_property
    def bindings(self) -> dict[str, str]:
        """Local name -> absolute dotted target of each module-scope import (the last one of
        a name wins, as at run time)."""
        return dict(_binding_name(binding, self) for binding in self.imports)


@dataclass
class ProjectIndex:
    """The project's autograd Function classes by qualified name, and per file its view."""

    root: Path | None
    records: list[Record]
    by_module: dict[str, list[Record]] = field(default_factory=dict)
    by_path: dict[str, Record] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)  # canonical `module.Class` names
    bare: frozenset[str] = frozenset()
    bases_of: dict[str, set[str]] = field(default_factory=dict)  # canonical, of candidates
    mixed_in: set[str] = field(default_factory=set)  # canonical: non-Function bases of Functions

    def __post_init__(self) -> None:
        for record in self.records:
            absolute = os.path.abspath(record.path)
            record.names = module_names(absolute, self.root)
            self.by_path[absolute] = record
            for name in record.names:
                self.by_module.setdefault(name, []).append(record)
        # Names that may stand for a Function, by last component: torch's, the classes that
        # derive from one, and the names they are imported under (`import Base as Public`).
        # A filter only: what is a Function is decided by resolving imports below.
        derived: dict[str, set[str]] = {}
        for record in self.records:
            for name, bases, _flag in record.decls:
                for base in bases:
                    derived.setdefault(name, set()).add(_last(base))
            for name, alias in record.outline.aliases:
                derived.setdefault(alias, set()).add(name)
        self.bare = frozenset(descendants(TORCH_FUNCTIONS, derived))
        # Only classes whose bases can name a Function (by their last component) need their
        # imports resolved; everything else is not a Function whatever its imports say.
        candidates = [
            (record, decl)
            for record in self.records
            for decl in record.decls
            if any(_last(base) in self.bare for base in decl[1])
        ]
        seeds: set[str] = set()
        bases_of: dict[str, set[str]] = {}
        for record, (name, bases, _flag) in candidates:
            if not record.names:
                continue
            own = f"{record.names[0]}.{name}"
            resolved = {self.resolve(record, base) for base in bases}
            resolved.discard(None)
            if resolved & FUNCTION_BASES:
                seeds.add(own)
            bases_of.setdefault(own, set()).update(r for r in resolved if r is not None)
        self.functions = descendants(seeds, bases_of)
        self.bases_of = bases_of
        # The project's plain classes a Function derives from: their methods are the Function's.
        self.mixed_in = {
            base
            for function in self.functions
            for base in bases_of.get(function, ())
            if base not in self.functions
        }

    # --- resolution ----------------------------------------------------------------------------
    def module(self, name: str) -> Record | None:
        found = self.by_module.get(name)
        return found[0] if found and len(found) == 1 else None  # ambiguous: unknown

    def resolve(self, record: Record, text: str, hops: int = 0) -> str | None:
        """The canonical name `text` stands for in `record`'s module: `module.Class` for a
        project class, the dotted import target for anything outside the project."""
        if hops > _MAX_HOPS or not record.names:
            return None
        head, _, rest = text.partition(".")
        target = record.bindings.get(head)
        if target is not None:
            return self.canonical(f"{target}.{rest}" if rest else target, hops + 1)
        if not rest and any(decl[0] == head for decl in record.decls):
            return f"{record.names[0]}.{head}"
        return None

    def canonical(self, full: str, hops: int = 0) -> str:
        """Follow a dotted name through the project's modules and their re-exports to the
        module that defines it; names outside the project stay as they are."""
        parts = full.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            record = self.module(".".join(parts[:cut]))
            if record is None:
                continue
            name, rest = parts[cut], parts[cut + 1 :]
            if not rest and any(decl[0] == name for decl in record.decls):
                return f"{record.names[0]}.{name}"
            found = self.resolve(record, ".".join(parts[cut:]), hops + 1)
            return found if found is not None else full
        return full

    # --- what one file needs ------------------------------------------------------------------
    def needs_view(self, outline: Outline) -> bool:
        """Whether a file can involve a Function of another file: a class statement whose base
        may name one, a direct call (`X.forward(`, `X()(`) on a name that may be one, or a
        class a Function derives from (a mixin)."""
        if not self.functions:
            return False
        return (
            any(name in self.bare for name in outline.callees)
            or any(
                _last(base) in self.bare for _name, bases, _flag in outline.decls for base in bases
            )
            or any(_name in self._mixin_names for _name, _bases, _flag in outline.decls)
        )

    @functools.cached_property
    def _mixin_names(self) -> frozenset[str]:
        """The class names of `mixed_in` (a filter: `_mixins_in` resolves them)."""
        return frozenset(_last(name) for name in self.mixed_in)

    def view(self, path: str, text: str | None = None, outline: Outline | None = None) -> FileView:
        """The view of one file. `text` and `outline` stand in for what is on disk (stdin, an
        editor's buffer)."""
        record = self._record(path, text, outline)
        if record is None:
            return EMPTY
        mixins = self._mixins_in(record)
        if not self.needs_view(record.outline):
            return FileView(record.names[0], mixins=mixins) if mixins else EMPTY
        uses = self.uses(record)
        direct_calls = any(name in self.bare for name in record.outline.callees)
        module = record.names[0] if record.names else ""
        bases = {
            base
            for _name, decl_bases, _flag in record.decls
            for base in decl_bases
            if _last(base) in self.bare and self.resolve(record, base) in self.functions
        }
        own = os.path.abspath(record.path)
        inherited = []
        for base in sorted(bases | self.mixin_bases(record)):
            canonical = self.resolve(record, base)
            lineage = self.lineage(canonical, own) if canonical is not None else ()
            if lineage:
                inherited.append((base, lineage))
        names: set[str] = set()
        signatures: list[tuple[str, Signature]] = []
        if direct_calls:
            for local, target in record.bindings.items():
                if _last(target) not in self.bare:
                    continue
                canonical = self.canonical(target)
                if canonical in self.functions:
                    names.add(local)
                    signature = self.signature(canonical)
                    if signature is not None:
                        signatures.append((local, signature))
        return FileView(
            module,
            frozenset(bases),
            frozenset(names),
            tuple(sorted(signatures)),
            uses,
            mixins,
            tuple(inherited),
        )

    def _mixins_in(self, record: Record) -> frozenset[str]:
        """The classes `record` declares that a Function of the project derives from without
        being one."""
        if not self.mixed_in or not record.names:
            return frozenset()
        module = record.names[0]
        return frozenset(
            name for name, _bases, _flag in record.decls if f"{module}.{name}" in self.mixed_in
        )

    def mixin_bases(self, record: Record) -> set[str]:
        """The other bases of `record`'s Function classes (`GradMixin` in
        `class Fn(GradMixin, Function)`), as written there: the child's side of what
        `_mixins_in` (and `FileView.mixins`) see from the mixin's own file."""
        if not record.names:
            return set()
        return {
            base
            for name, decl_bases, _flag in record.decls
            if f"{record.names[0]}.{name}" in self.functions
            for base in decl_bases
            if _last(base) not in self.bare
        }

    def lineage(self, canonical: str, own: str) -> tuple[tuple[str, str], ...]:
        """(path, class name) of a project class and of its project ancestors, depth first in
        base order (as `signature` looks a forward up), when the class is defined in a file
        other than `own`; () when it is this file's (its text is read there) or unknown."""
        found: list[tuple[str, str]] = []
        seen: set[str] = set()

        def visit(current: str, hops: int) -> None:
            if current in seen or hops > _MAX_HOPS or current in FUNCTION_BASES:
                return  # torch's own Function classes: their methods are stubs, not a contract
            seen.add(current)
            module, _, name = current.rpartition(".")
            record = self.module(module)
            if record is None:
                return  # torch's, or outside the project
            found.append((os.path.abspath(record.path), name))
            for base in sorted(self.bases_of.get(current, ())):
                visit(base, hops + 1)

        visit(canonical, 0)
        if not found or found[0][0] == own:
            return ()
        return tuple(found)

    def signature(self, canonical: str, hops: int = 0) -> Signature | None:
        """The forward a Function class has: its own, else the first of its bases'."""
        module, _, name = canonical.rpartition(".")
        record = self.module(module)
        if record is None or hops > _MAX_HOPS:
            return None
        own = record.signatures.get(name)
        if own is not None:
            return own
        for base in sorted(self.bases_of.get(canonical, ())):
            found = self.signature(base, hops + 1)
            if found is not None:
                return found
        return None

    # --- how the rest of the project uses a Function class ---------------------------------------
    def uses(self, record: Record) -> tuple[tuple[str, str, str | None], ...]:
        """For each Function class `record` declares: where another file declares a subclass of
        it, and where another file makes, or may make, an instance of it or of a subclass ("":
        nowhere). Instances are looked for only for a class whose text shows a contract method
        that may not be static (AGL402's fix is the one that asks; None: not looked for), in
        every other file that names it or a subclass."""
        if not record.names:
            return ()
        own = os.path.abspath(record.path)
        out: list[tuple[str, str, str | None]] = []
        for name, _bases, _flag in record.decls:
            canonical = f"{record.names[0]}.{name}"
            if canonical not in self.functions:
                continue
            family = self._subclasses_of(canonical)
            declared_in = {c: self.module(c.rpartition(".")[0]) for c in family}
            elsewhere = sorted(
                {
                    f"`{c.rpartition('.')[2]}` in {r.path}"
                    for c, r in declared_in.items()
                    if r is not None and os.path.abspath(r.path) != own
                }
            )
            subclassed = ", ".join(elsewhere)
            instances: str | None = None
            if canonical in self._plain_classes:
                instances = self._instances(family, own)
            out.append((name, subclassed, instances))
        return tuple(out)

    @functools.cached_property
    def _plain_classes(self) -> set[str]:
        """The project's Function classes whose text may show a contract method that is not
        static: the ones AGL402's fix needs the instances of (each Function file read once)."""
        out: set[str] = set()
        for record in self.records:
            if not record.names:
                continue
            declared = [
                name
                for name, _bases, _flag in record.decls
                if f"{record.names[0]}.{name}" in self.functions
            ]
            if not declared:
                continue
            data = record.source()
            text = decode(data) if data is not None else ""
            text = text if isinstance(text, str) else ""
            out.update(
                f"{record.names[0]}.{name}"
                for name in declared
                if may_have_plain_methods(text, name)
            )
        return out

    @functools.cached_property
    def _children(self) -> dict[str, list[str]]:
        """base -> the classes that name it among their bases (built once, not per class)."""
        out: dict[str, list[str]] = {}
        for name, bases in self.bases_of.items():
            for base in bases:
                out.setdefault(base, []).append(name)
        return out

    def _subclasses_of(self, canonical: str) -> set[str]:
        """The class and every class of the project derived from it."""
        found = {canonical}
        stack = [canonical]
        while stack:
            for child in self._children.get(stack.pop(), ()):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    def _instances(self, family: set[str], own: str) -> str:
        """Where a file other than `own` may make an instance of a class of `family` ("":
        nowhere), by last component (an import inside a function, or an alias, is seen too).
        The project's files are read once, for the families of every class that asks."""
        if not self._swept:
            wanted = {c for plain in self._plain_classes for c in self._subclasses_of(plain)}
            self._sweep({canonical.rpartition(".")[2] for canonical in wanted | family})
        names = {canonical.rpartition(".")[2] for canonical in family}
        if not names <= self._swept:
            self._sweep(names - self._swept)
        hits = sorted(
            hit for name in names for hit in self._instance_hits.get(name, ()) if hit[0] != own
        )
        return hits[0][1] if hits else ""

    @functools.cached_property
    def _swept(self) -> set[str]:
        return set()

    @functools.cached_property
    def _instance_hits(self) -> dict[str, list[tuple[str, str]]]:
        """Class name -> (absolute path, where) of each file that may make an instance of it."""
        return {}

    def _sweep(self, names: set[str]) -> None:
        """Read every file of the project once and note, for each of `names`, the files that
        make (or may make) an instance of a class of that name. Substring tests first (memory
        speed), then `ast` of just the files that mention one. A name mentioned in more than
        MAX_MENTIONING files (`Type`, a word of every typed module) is not searched: its
        instances are unproven, which is what the answer says."""
        self._swept.update(names)
        needles = [(name, name.encode()) for name in sorted(names)]
        mentioning: dict[str, list[tuple[Record, bytes]]] = {}
        for record in self.records:
            data = record.source()
            if data is None:
                for name, _ in needles:
                    self._instance_hits.setdefault(name, []).append(
                        (os.path.abspath(record.path), f"{record.path} cannot be read")
                    )
                continue
            for name, needle in needles:
                if needle in data and _may_name(data, needle):
                    mentioning.setdefault(name, []).append((record, data))
        trees: dict[str, ast.Module | None] = {}
        for name, found_in in mentioning.items():
            if len(found_in) > MAX_MENTIONING:
                self._instance_hits.setdefault(name, []).append(
                    ("", f"`{name}` is named in {len(found_in)} files, too many to search")
                )
                continue
            for record, data in found_in:
                path = os.path.abspath(record.path)
                if path not in trees:
                    text = decode(data)
                    trees[path] = parse_quietly(text) if isinstance(text, str) else None
                tree = trees[path]
                found = (
                    instance_uses(tree, {name}, record.path)
                    if tree is not None
                    else f"{record.path} does not parse or cannot be decoded"
                )
                if found:
                    self._instance_hits.setdefault(name, []).append((path, found))

    def _record(self, path: str, text: str | None, outline: Outline | None) -> Record | None:
        record = self.by_path.get(os.path.abspath(path))
        if text is None:
            return record
        names = record.names if record is not None else module_names(path, self.root)
        data = text.encode("utf-8", "surrogatepass")
        return Record(path, outline or Outline(), lambda: data, names=names)


def _last(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def _binding_name(binding: Binding, record: Record) -> tuple[str, str]:
    """(local name, absolute dotted target) of one import binding of `record`'s module."""
    if len(binding) == 3:  # ("import", module, asname)
        _, module, alias = binding
        if alias is not None:
            return alias, module
        head = module.split(".", 1)[0]
        return head, head
    _, base, name, asname = binding
    return asname or name, _absolute(base, name, record)


def _absolute(base: str, name: str, record: Record) -> str:
    """`from ..pkg import name` in `record`'s module, as an absolute dotted name."""
    level = len(base) - len(base.lstrip("."))
    module = base[level:]
    if level == 0:
        return f"{module}.{name}" if module else name
    # A relative import runs only inside a package `level` deep: the first name the file has
    # that deep (a namespace package, without `__init__.py`, is named from the root only).
    own = 0 if record.path.endswith("__init__.py") else 1
    package = next(
        (n for n in record.names if n.count(".") + 1 - own >= level),
        record.names[0] if record.names else "",
    )
    if own:
        package = package.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    prefix = ".".join(p for p in (package, module) if p)
    return f"{prefix}.{name}" if prefix else name


def record_of(path: str | Path, data: bytes | str | None = None) -> Record | None:
    """The index's record of one file: from its bytes when already read (or an editor's
    buffer, as text), else from disk, read again only if the index needs its details (so a
    project's bytes are not all held at once); None when it cannot be read."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if data is not None:
        kept = data
        return Record(str(path), outline(kept), lambda: kept)
    read = read_source(path)
    if not isinstance(read, bytes):
        return None

    def source() -> bytes | None:
        again = read_source(path)
        return again if isinstance(again, bytes) else None

    return Record(str(path), outline(read), source)


def build_index(
    root: Path | None, paths: Iterable[str | Path] = (), records: Iterable[Record] = ()
) -> ProjectIndex:
    """The project view every front end lints with: `records` (files already read, cached, or
    open in an editor) and every other file of `paths`, read here."""
    given = list(records)
    seen = {os.path.abspath(record.path) for record in given}
    for path in paths:
        if os.path.abspath(path) in seen:
            continue
        record = record_of(path)
        if record is not None:
            given.append(record)
    return ProjectIndex(root, given)


def view_key(view: FileView) -> str:
    """A file's cached result stays valid while its view does (a change elsewhere in the
    project re-analyses only the files it concerns)."""
    if not view and not view.uses:
        return ""  # most files: asked once each, before anything to hash
    import hashlib

    # Sorted: a frozenset's repr follows string hashes, which differ from run to run.
    stable = (
        view.module,
        sorted(view.function_bases),
        sorted(view.function_names),
        view.signatures,
        view.uses,
        sorted(view.mixins),
        view.inherited,
    )
    return hashlib.blake2b(repr(stable).encode(), digest_size=8).hexdigest()


# --- instances of a class, read from a file's text -------------------------------------------
_CONTRACT_DEF = re.compile(r"^([ \t]+)def[ \t]+(?:forward|backward|setup_context|jvp|vmap)\b", re.M)


def may_have_plain_methods(text: str, name: str) -> bool:
    """Whether the class `name` of `text` (at any depth) may define a contract method that is
    not a `@staticmethod` or `@classmethod` (an over-approximation: only says no when each def
    of one has such a decorator above it, comments and blank lines between them allowed)."""
    # `class Name` led by its literal, then checked to open its line (a pattern led by `^` is
    # tried at every line of the file, for each of the project's Function classes)
    starts = [
        (len(before), found.end())
        for found in re.finditer(rf"class[ \t]+{re.escape(name)}\b", text)
        for before in [text[text.rfind("\n", 0, found.start()) + 1 : found.start()]]
        if not before.strip(" \t")
    ]
    if not starts:
        return True
    return any(_plain_contract_method(text, indent, end) for indent, end in starts)


_CODE_LINE = re.compile(r"^([ \t]*)(\S)", re.M)


def _plain_contract_method(text: str, indent: int, opened: int) -> bool:
    """Whether the class whose name ends at `opened` (its `class` keyword indented `indent`)
    may have a contract method without a decorator that makes it static or a classmethod. Its
    body ends at the first code line indented no deeper than the `class` keyword."""
    end = len(text)
    for code in _CODE_LINE.finditer(text, opened):  # from the next line: `opened` ends a word
        if code.group(2) != "#" and len(code.group(1)) <= indent:
            end = code.start()
            break
    body = text[opened:end]
    for match in _CONTRACT_DEF.finditer(body):
        own = match.group(1)
        above = body[: match.start()].rstrip("\n").split("\n")
        decorators: list[str] = []
        for line in reversed(above):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue  # comments and blank lines may stand between a decorator and its def
            if not line.startswith(own + "@"):
                break
            decorators.append(stripped)
        if not any(d in ("@staticmethod", "@classmethod") for d in decorators):
            return True
    return False


def _may_name(data: bytes, needle: bytes) -> bool:
    """Whether a mention of the class name in a file's bytes may be something other than an
    attribute of the class (`Fn.apply`) or an import of it under its own name: only then is
    the file parsed (instance_uses decides exactly). Comments and strings count: safe side."""
    ascii_name = needle.isascii()
    for match in _mentions(needle).finditer(data):
        if ascii_name and match.start() and data[match.start() - 1] in _WORD_BYTES:
            continue  # the tail of a longer name
        after = data[match.end() : match.end() + 64].lstrip(b" \t")
        if after[:1] == b"." and not after[1:].lstrip().startswith(_INSTANCE_MARKS):
            continue
        line = data[data.rfind(b"\n", 0, match.start()) + 1 : match.start()].lstrip()
        rest = data[match.end() : data.find(b"\n", match.end()) % (len(data) + 1)]
        if line.startswith((b"from ", b"import ")) and not rest.lstrip().startswith(b"as"):
            continue
        return True
    return False


@functools.lru_cache(maxsize=256)
def _mentions(needle: bytes) -> re.Pattern[bytes]:
    """The name as a whole word. A pattern led by `\\b` is tried at every byte of the file
    (a third of a second of torch's serial start-up, over every file that holds the name), so
    an ASCII name leads with itself and its start is checked by hand: its bytes are all word
    bytes, so no two whole-word matches overlap and none is skipped."""
    if needle.isascii():
        return re.compile(re.escape(needle) + rb"\b")
    return re.compile(rb"\b" + re.escape(needle) + rb"\b")


_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_INSTANCE_MARKS = (b"__new__", b"__call__", b"__init__")
_HARMLESS_CALLS = frozenset({"isinstance", "issubclass"})
_INSTANCE_ATTRIBUTES = frozenset({"__new__", "__call__", "__init__"})


def instance_uses(tree: ast.Module, names: set[str], path: str) -> str:
    """Where `text` makes, or may make, an instance of a class named one of `names`, however
    it is reached (`Scale`, `ops.Scale`, an `import ... as` alias of it, at any depth): a call
    of it, or the class passed on as a value (an instance may be made from it elsewhere). ""
    when every use is an attribute of the class (`Scale.apply`, `Scale.forward`), a base of a
    class, an annotation or an `isinstance` test. By name only, so a class of the same name
    elsewhere counts too. Read from the file's `ast` (a text that does not parse proves
    nothing: the caller says so)."""
    parents: dict[int, ast.AST] = {}
    aliases = set(names)
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name.rpartition(".")[2] in names and alias.asname:
                    aliases.add(alias.asname)
    for node in ast.walk(tree):
        spelled = ast_dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if spelled is None or spelled.rpartition(".")[2] not in aliases:
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            continue
        parent = parents.get(id(node))
        where = f"{path}:{getattr(node, 'lineno', '?')}"
        if isinstance(parent, ast.Call) and parent.func is node:
            return f"`{spelled}(...)` at {where}"
        if isinstance(parent, ast.Attribute) and parent.value is node:
            if parent.attr in _INSTANCE_ATTRIBUTES:
                return f"`{spelled}.{parent.attr}` at {where}"
            continue
        if isinstance(parent, ast.ClassDef) and node in parent.bases:
            continue
        if _annotation(node, parent):
            continue
        if (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id in _HARMLESS_CALLS
        ):
            continue
        return f"`{spelled}` is passed on as a value at {where}"
    return ""


def _annotation(node: ast.AST, parent: ast.AST | None) -> bool:
    if isinstance(parent, ast.arg):
        return parent.annotation is node
    if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return parent.returns is node
    if isinstance(parent, ast.AnnAssign):
        return parent.annotation is node
    return False
