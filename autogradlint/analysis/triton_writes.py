"""What a Triton kernel does with the pointers it is handed: which it writes through
(`tl.store`, `tl.atomic_*`), and which it only reads at their base, one element (`g =
tl.load(grad_ptr)`: the tensor's strides cannot matter).

Pure: one `ast` function in, parameter names out. A pointer computed from a parameter
(`x_ptr += row * stride`, `p = x_ptr + offsets`, `tl.make_block_ptr(base=x_ptr, ...)`) is
that parameter."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from ..text.ast_walk import walk as walk_ast

# tl.store and the atomics all write through their first argument
_WRITES = frozenset(
    {
        "store",
        "atomic_add",
        "atomic_and",
        "atomic_cas",
        "atomic_max",
        "atomic_min",
        "atomic_or",
        "atomic_xchg",
        "atomic_xor",
    }
)


def written_params(kernel: ast.FunctionDef) -> frozenset[str]:
    """The parameters of `kernel` it stores through, in its own body."""
    return _uses(kernel).written


def base_only_params(kernel: ast.FunctionDef) -> frozenset[str]:
    """The parameters `kernel` uses only as `tl.load(param)`: one element, at the base."""
    uses = _uses(kernel)
    return uses.base_loads - uses.other


@dataclass(frozen=True)
class _Uses:
    written: frozenset[str]
    base_loads: frozenset[str]
    other: frozenset[str]  # any other use: advanced, offset, stored, passed on


# A kernel's tree is the one the summaries keep for its file (the same object each time):
# every launch of it, and both questions above, read one analysis.
@functools.lru_cache(maxsize=256)
def _uses(kernel: ast.FunctionDef) -> _Uses:
    params = [a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args, *kernel.args.kwonlyargs)]
    visitor = _Stores({p: {p} for p in params})
    for stmt in kernel.body:
        visitor.visit(stmt)
    known = set(params)
    other = {
        node.id
        for node in walk_ast(kernel)
        if isinstance(node, ast.Name) and node.id in known and id(node) not in visitor.bases
    }
    return _Uses(
        frozenset(visitor.written & known),
        frozenset(visitor.base_names & known),
        frozenset(other),
    )


class _Stores(ast.NodeVisitor):
    def __init__(self, roots: dict[str, set[str]]) -> None:
        self.roots = roots  # a local name -> the parameters its pointer comes from
        self.written: set[str] = set()
        self.bases: set[int] = set()  # the Name nodes of `tl.load(param)`
        self.base_names: set[str] = set()

    def _from(self, expr: ast.AST) -> set[str]:
        """The parameters a pointer expression is based on: the additive base of pointer
        arithmetic (`x_ptr + row * stride` is `x_ptr`, never `stride`), the first argument
        of a pointer-making call (`tl.make_block_ptr(base=...)`, `tl.advance(p, ...)`)."""
        if isinstance(expr, ast.Name):
            return set(self.roots.get(expr.id, set()))
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
            return self._from(expr.left) | self._from(expr.right)
        if isinstance(expr, ast.Subscript):
            return self._from(expr.value)
        if isinstance(expr, ast.Call):
            for keyword in expr.keywords:
                if keyword.arg == "base":
                    return self._from(keyword.value)
            return self._from(expr.args[0]) if expr.args else set()
        return set()

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        roots = self._from(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.roots[target.id] = set(roots)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)
        if isinstance(node.target, ast.Name):
            self.roots[node.target.id] = self.roots.get(node.target.id, set()) | self._from(
                node.value
            )

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return None  # a nested helper writes when it is called: not followed

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "load" and len(node.args) == 1:
            loaded = node.args[0]
            if isinstance(loaded, ast.Name) and not node.keywords:
                self.bases.add(id(loaded))
                self.base_names.add(loaded.id)
        if not (isinstance(func, ast.Attribute) and func.attr in _WRITES):
            return
        pointer = node.args[0] if node.args else None
        for keyword in node.keywords:
            if keyword.arg == "pointer":
                pointer = keyword.value
        if pointer is not None:
            self.written |= self._from(pointer)
