"""Propose the files a real-bug manifest misses: project modules its Python imports, native sources.

    python -m benchmarks.realbugs.complete [--batch a01 ...] [--write]

For every case and both sides, each `.py` file the case was first committed with is parsed
(never imported) at that commit of the git mirror, and its project-local imports are resolved
one level deep (relative imports, and absolute imports of a package that lives in the
repository). A name taken from a package's `__init__.py` is followed to the module the
`__init__` re-exports it from, because that is where a call through it resolves. The native
sources of the extensions those files import are read from `*Extension(name, sources)` in
`setup.py` and from `*load*(name, sources)` wrappers in the kept files (a `sources` variable is
followed to its assignment); a C/C++/CUDA file name a kept module spells outside any build call
is resolved next to it. Without `--write` the proposals are only printed; with it they are
appended to the manifests' `paths` column (paths are never removed, nothing else changes).
"""

from __future__ import annotations

import argparse
import ast
import csv
import posixpath
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.realbugs.materialize import BATCHES, HERE, Case, cases, file_at, git_dir
from benchmarks.realbugs.score import read_rows, write_rows

NATIVE = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hpp")


@dataclass(frozen=True)
class Proposal:
    """One file to add to a case, and why."""

    path: str
    why: str


def tree_of(git: Path, commit: str) -> frozenset[str]:
    """Every file path at `commit`."""
    proc = subprocess.run(
        ["git", "--git-dir", str(git), "ls-tree", "-r", "--name-only", commit],
        capture_output=True,
        text=True,
        check=True,
    )
    return frozenset(proc.stdout.splitlines())


def parse(data: bytes | None) -> ast.Module | None:
    """The module's tree, or None for a file that is absent or not Python 3."""
    if data is None:
        return None
    try:
        return ast.parse(data)
    except (SyntaxError, ValueError):
        return None


def module_file(dotted: str, roots: Iterable[str], tree: frozenset[str]) -> str | None:
    """The file of module `dotted` under one of `roots` (a module file before a package)."""
    stem = dotted.replace(".", "/")
    for root in roots:
        for candidate in (f"{stem}.py", f"{stem}/__init__.py"):
            path = posixpath.join(root, candidate) if root else candidate
            if path in tree:
                return path
    return None


def package_base(path: str, level: int) -> str:
    """The dotted-path folder a relative import of `level` dots in `path` starts from."""
    folder = posixpath.dirname(path)
    for _ in range(level - 1):
        folder = posixpath.dirname(folder)
    return folder


def roots_of(path: str) -> list[str]:
    """The folders an absolute import in `path` may start from: its ancestors, nearest first."""
    roots, folder = [], posixpath.dirname(path)
    while folder:
        roots.append(folder)
        folder = posixpath.dirname(folder)
    return [*roots, ""]


def imported(node: ast.AST, path: str, tree: frozenset[str]) -> Iterator[tuple[str, str | None]]:
    """(module file, name taken from it or None) for each project-local import of `node`."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            found = module_file(alias.name, roots_of(path), tree)
            if found:
                yield found, None
        return
    if not isinstance(node, ast.ImportFrom):
        return
    if node.level:
        base = package_base(path, node.level)
        roots: list[str] = [base]
        dotted = node.module or ""
    else:
        roots, dotted = roots_of(path), node.module or ""
    for alias in node.names:
        # `from pkg import sub` names a submodule when pkg/sub.py exists
        sub = module_file(f"{dotted}.{alias.name}" if dotted else alias.name, roots, tree)
        if sub and alias.name != "*":
            # Python looks the name up in the package first: its __init__ may bind a function
            # of the same name (`from ..utils import linear_cg` is the function, not the module)
            package = module_file(dotted, roots, tree) if dotted else None
            if package and package.endswith("__init__.py"):
                yield package, None
            yield sub, None
            continue
        if dotted:
            found = module_file(dotted, roots, tree)
            if found:
                yield found, alias.name


def reexport(init: str, name: str, module: ast.Module, tree: frozenset[str]) -> str | None:
    """The module a package's `__init__.py` takes `name` from, when it re-exports it."""
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and any(
            (alias.asname or alias.name) == name for alias in node.names
        ):
            for found, _ in imported(node, init, tree):
                return found
    return None


def extensions(module: ast.Module) -> dict[str, list[str]]:
    """`{extension name: source strings}` of each `*Extension(...)` or `*load*(...)` call."""
    assigns = sorted(
        (node.lineno, target.id, node.value)
        for node in ast.walk(module)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    )
    out: dict[str, list[str]] = {}
    for node in ast.walk(module):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if not (called.endswith("Extension") or "load" in called.lower()):
            continue
        name_node = node.args[0] if node.args else None
        sources_node = node.args[1] if len(node.args) > 1 else None
        for keyword in node.keywords:
            if keyword.arg == "name":
                name_node = keyword.value
            elif keyword.arg == "sources":
                sources_node = keyword.value
        if not (isinstance(name_node, ast.Constant) and isinstance(name_node.value, str)):
            continue
        if sources_node is not None:
            found = list(strings(sources_node, assigns, node.lineno, set()))
            if any(source.endswith(NATIVE) for source in found):
                out.setdefault(name_node.value, []).extend(found)
    return out


def strings(
    node: ast.AST,
    assigns: list[tuple[int, str, ast.expr]] | None = None,
    before: int = 0,
    seen: set[str] | None = None,
) -> Iterator[str]:
    """Every string constant inside `node`, following a variable to its last assignment above
    line `before` (`sources = [...]` then `load(name, sources)`); `os.path.join` of constants
    joined."""
    seen = set() if seen is None else seen
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and sub.args and getattr(sub.func, "attr", "") == "join":
            parts = [arg.value for arg in sub.args if isinstance(arg, ast.Constant)]
            if len(parts) == len(sub.args) and all(isinstance(p, str) for p in parts):
                yield posixpath.join(*(str(p) for p in parts))
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value
        elif isinstance(sub, ast.Name) and assigns is not None and sub.id not in seen:
            above = [value for line, name, value in assigns if name == sub.id and line < before]
            if above:
                seen.add(sub.id)
                yield from strings(above[-1], assigns, before, seen)


def native_file(name: str, near: str, tree: frozenset[str]) -> str | None:
    """The tree path of a native source spelled `name` in a file of folder `near`."""
    name = name.lstrip("./")
    if not name.endswith(NATIVE):
        return None
    for folder in (near, ""):
        path = posixpath.normpath(posixpath.join(folder, name)) if folder else name
        if path in tree:
            return path
    # a wrapper joining a folder variable with a bare file name: the one file of that name below
    below = [p for p in tree if p.startswith(near + "/" if near else "") and p.endswith("/" + name)]
    return below[0] if len(below) == 1 else None


def imports_of(module: ast.Module) -> set[str]:
    """Every dotted name `module` imports (`a.b` for `import a.b`, `a.b.c` for `from a.b import c`)."""
    names: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def called_extension(ext: str, names: set[str]) -> bool:
    """Whether a file importing `names` imports extension `ext` (`pkg._C` or a top-level name)."""
    return ext in names or ("." not in ext and any(name.split(".")[0] == ext for name in names))


def propose_side(case: Case, seeds: Iterable[str], git: Path, commit: str) -> dict[str, str]:
    """`{path: why}` of the files one side of `case` misses, read from the `seeds` it keeps."""
    tree = tree_of(git, commit)
    kept = set(case.paths)
    seeds = tuple(seeds)
    out: dict[str, str] = {}

    def add(path: str | None, why: str) -> None:
        if path and path not in kept and path not in out and path in tree:
            out[path] = why

    modules: dict[str, ast.Module] = {}
    for path in seeds:
        if path.endswith(".py") and path != "setup.py":
            module = parse(file_at(git, commit, path))
            if module is not None:
                modules[path] = module
    for path, module in modules.items():
        for node in ast.walk(module):
            for found, name in imported(node, path, tree):
                add(found, f"imported by {path}")
                if name and found.endswith("__init__.py"):
                    init = parse(file_at(git, commit, found))
                    if init is not None:
                        target = reexport(found, name, init, tree)
                        add(target, f"{found} re-exports {name} used by {path}")
    names = set().union(*(imports_of(m) for m in modules.values())) if modules else set()
    builders = dict(modules)
    for setup_path in (p for p in seeds if posixpath.basename(p) == "setup.py"):
        setup = parse(file_at(git, commit, setup_path))
        if setup is not None:
            builders[setup_path] = setup
    for path, module in builders.items():
        built = extensions(module)
        claimed = {source for sources in built.values() for source in sources}
        near = posixpath.dirname(path)
        for ext, sources in built.items():
            if called_extension(ext, names):
                for source in sources:
                    add(native_file(source, near, tree), f"source of extension {ext} ({path})")
        if path in modules:
            # a native file a kept module spells outside any extension build: read it too
            for literal in strings(module):
                if literal.endswith(NATIVE) and literal not in claimed:
                    add(native_file(literal, near, tree), f"named in {path}")
    return out


def first_paths(batch: str) -> dict[str, tuple[str, ...]]:
    """Each case's `paths` as the batch was first committed (labelled, before any run).

    The completion reads imports one level deep from these, not from the completed list, so
    running it again proposes nothing new instead of going one level deeper each time."""
    manifest = BATCHES / batch / "manifest.tsv"
    log = subprocess.run(
        ["git", "-C", str(HERE), "log", "--diff-filter=A", "--format=%H", "--", str(manifest)],
        capture_output=True,
        text=True,
        check=False,
    )
    first = log.stdout.split()
    text = ""
    if log.returncode == 0 and first:
        relative = manifest.relative_to(HERE.parent.parent).as_posix()
        shown = subprocess.run(
            ["git", "-C", str(HERE), "show", f"{first[-1]}:{relative}"],
            capture_output=True,
            text=True,
            check=False,
        )
        text = shown.stdout if shown.returncode == 0 else ""
    if not text:
        text = manifest.read_text()
    return {
        row["id"]: tuple(p.strip() for p in row["paths"].split(",") if p.strip())
        for row in csv.DictReader(text.splitlines(), delimiter="\t")
    }


def propose(case: Case, seeds: Iterable[str], mirrors: Path) -> list[Proposal]:
    """The files either side of `case` misses, in first-seen order (before, then after)."""
    git = git_dir(mirrors, case.repo)
    seeds = tuple(seeds)
    merged: dict[str, str] = {}
    for side, commit in (("before", case.parent_commit), ("after", case.fix_commit)):
        for path, why in propose_side(case, seeds, git, commit).items():
            merged.setdefault(path, f"{side}: {why}")
    return [Proposal(path, why) for path, why in merged.items()]


def append_paths(manifest: Path, additions: dict[str, list[str]]) -> None:
    """Append `additions[id]` to the `paths` of those rows; every other cell stays as it was."""
    rows = read_rows(manifest)
    for row in rows:
        extra = [p for p in additions.get(row["id"], []) if p not in row["paths"].split(",")]
        if extra:
            row["paths"] = ",".join([row["paths"], *extra])
    write_rows(manifest, rows, tuple(rows[0]) if rows else ())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--batch", action="append", help="only these batches (repeatable)")
    parser.add_argument("--write", action="store_true", help="append to the manifests")
    args = parser.parse_args(argv)
    by_batch: dict[str, dict[str, list[str]]] = {}
    seeds: dict[str, dict[str, tuple[str, ...]]] = {}
    for case in cases(args.batch):
        if case.batch not in seeds:
            seeds[case.batch] = first_paths(case.batch)
        proposals = propose(case, seeds[case.batch].get(case.id, case.paths), args.mirrors)
        for proposal in proposals:
            print(f"{case.id}\t{proposal.path}\t{proposal.why}")
        by_batch.setdefault(case.batch, {})[case.id] = [p.path for p in proposals]
    if args.write:
        for batch, additions in by_batch.items():
            append_paths(BATCHES / batch / "manifest.tsv", additions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
