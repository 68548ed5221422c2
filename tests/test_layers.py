"""The layers of docs/architecture.md, held as code: every import of the package (function-level
and `if TYPE_CHECKING:` ones too) points to its own layer or one below, no two modules import
each other round a cycle, and every module has a layer. The table is read from the document,
so the two cannot drift apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "autogradlint"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


class Import(NamedTuple):
    source: str  # the importing module, dotted
    target: str  # the imported module (a package stands for its __init__)
    line: int


def layer_table(markdown: str) -> list[tuple[str, list[str]]]:
    """The rows of the "Layers" table, top layer first: (layer, the paths it holds, relative to
    the package: `engine/` for a package, `view.py` for a module)."""
    section = ("\n" + markdown).split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[str, list[str]]] = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not line.lstrip().startswith("|"):
            continue
        if cells[0] in ("layer", "") or set(cells[0]) <= set("-: "):
            continue  # the header and its rule
        paths = re.findall(r"`([\w/.]+)`", cells[1])
        rows.append((cells[0], paths))
    return rows


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package under `root`, by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(root: Path) -> list[Import]:
    """Every import of one of the package's modules, wherever it is in the code."""
    known = modules(root)
    found: list[Import] = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1])
                    module = f"{base}.{node.module}" if node.module else base
                else:
                    module = node.module or ""
                # `from . import model` imports a module; `from .model import Finding` its name
                targets = [
                    f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                    for alias in node.names
                ]
            else:
                continue
            for target in dict.fromkeys(targets):  # once per statement
                while target and target not in known:  # `import a.b.c` binds a module
                    target = target.rpartition(".")[0]
                if target.split(".")[0] == PACKAGE and target in known:
                    found.append(Import(name, target, node.lineno))
    return found


def layers_of(root: Path, table: list[tuple[str, list[str]]]) -> dict[str, int]:
    """Each module's layer, counted from the bottom (0); a module in no layer is left out."""
    out: dict[str, int] = {}
    for name, path in modules(root).items():
        relative = path.relative_to(root / PACKAGE).as_posix()
        best: tuple[int, int] | None = None  # (length of the matching path, layer)
        for height, (_layer, paths) in enumerate(reversed(table)):
            for held in paths:
                matches = relative == held or (held.endswith("/") and relative.startswith(held))
                if matches and (best is None or len(held) > best[0]):
                    best = (len(held), height)
        if best is not None:
            out[name] = best[1]
    return out


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected groups of more than one module (or a module importing itself)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph[node]:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def violations(root: Path, table: list[tuple[str, list[str]]]) -> list[str]:
    """What breaks the layering under `root`, one line each."""
    names = [layer for layer, _ in reversed(table)]
    layer = layers_of(root, table)
    problems = [f"{name}: in no layer of the table" for name in modules(root) if name not in layer]
    edges = imports(root)
    for edge in edges:
        if (
            edge.source in layer
            and edge.target in layer
            and layer[edge.target] > layer[edge.source]
        ):
            problems.append(
                f"{edge.source} ({names[layer[edge.source]]}) imports {edge.target} "
                f"({names[layer[edge.target]]}) at line {edge.line}: upward"
            )
    problems += [f"import cycle: {' -> '.join(group)}" for group in cycles(edges)]
    return problems


def test_the_layers_of_the_architecture_hold() -> None:
    table = layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(table) >= 8, "the Layers table of docs/architecture.md was not found"
    held = [path for _layer, paths in table for path in paths]
    missing = [p for p in held if not (ROOT / PACKAGE / p).exists()]
    assert not missing, f"the table names paths that do not exist: {missing}"
    assert violations(ROOT, table) == []


# The checker itself, on a small package of its own: it must see what it is there to see.
TABLE = """\
## Layers

| layer | modules | owns |
|---|---|---|
| top | `front/`, `__init__.py` | |
| middle | `engine.py` | |
| bottom | `base.py` | |

## Next
"""


def _package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in {"__init__.py": "", **files}.items():
        path = root / PACKAGE / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(
    "base",
    [
        "from .engine import run\n",  # at module level
        "def f():\n    from . import engine\n",  # inside a function
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .front.cli import main\n",
        "import autogradlint.engine\n",  # absolute
    ],
)
def test_an_upward_import_is_found_wherever_it_is(tmp_path: Path, base: str) -> None:
    root = _package(
        tmp_path,
        {"base.py": base, "engine.py": "", "front/__init__.py": "", "front/cli.py": ""},
    )
    found = violations(root, layer_table(TABLE))
    assert len(found) == 1 and "autogradlint.base (bottom) imports" in found[0]


def test_a_downward_import_is_fine_and_a_cycle_is_not(tmp_path: Path) -> None:
    files = {
        "base.py": "",
        "engine.py": "from .base import x\n",
        "front/__init__.py": "",
        "front/cli.py": "from ..engine import run\nfrom . import report\n",
        "front/report.py": "",
    }
    assert violations(_package(tmp_path, files), layer_table(TABLE)) == []
    files["front/report.py"] = "def f():\n    from .cli import main\n"
    found = violations(_package(tmp_path, files), layer_table(TABLE))
    assert found == ["import cycle: autogradlint.front.cli -> autogradlint.front.report"]


def test_a_module_in_no_layer_is_reported(tmp_path: Path) -> None:
    root = _package(tmp_path, {"base.py": "", "engine.py": "", "stray.py": ""})
    assert violations(root, layer_table(TABLE)) == ["autogradlint.stray: in no layer of the table"]
