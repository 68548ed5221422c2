"""The ops a backward calls through a project factory handed the op's name at run time
(gsplat's `_make_lazy_cuda_func(f"{cls.base}_bwd")(...)`): the names, where the text builds them."""

from __future__ import annotations

import libcst as cst

from ..text.hierarchy import descendants
from .contract import is_classmethod
from .facts import class_method, filled_string


def built_names(
    arg: cst.BaseExpression,
    method: cst.FunctionDef,
    classes: dict[str, cst.ClassDef],
) -> list[str] | None:
    """Every value the name `arg` takes in `method`: a string literal, or an f-string over
    string attributes of the class a `@classmethod` is bound to (`f"{cls.base}_bwd"`), one
    value per class of the file that runs this method (its own, and subclasses that inherit
    it with their own `base`). None when the text does not build it."""
    if isinstance(arg, cst.SimpleString):
        value = arg.evaluated_value
        return [value] if isinstance(value, str) else None
    bound = _bound_class(method)
    if not isinstance(arg, cst.FormattedString) or bound is None:
        return None
    names: list[str] = []
    for owner in _runners(method, classes):
        # None: an attribute set at run time, or any other expression: not built here
        name = filled_string(arg, bound, {}, owner, classes)
        if name is None:
            return None
        if name not in names:
            names.append(name)
    return names or None


def _bound_class(method: cst.FunctionDef) -> str | None:
    """The first parameter of a `@classmethod` (the class it is bound to), else None."""
    params = method.params.params
    return params[0].name.value if is_classmethod(method) and params else None


def _runners(method: cst.FunctionDef, classes: dict[str, cst.ClassDef]) -> list[cst.ClassDef]:
    """The class defining `method`, and the classes of the file that derive from it and run
    the same method (they do not define their own; `class_method` looks a few levels up)."""
    name = method.name.value
    owner = next((key for key, node in classes.items() if _defines(node, method)), None)
    if owner is None:
        return []
    bases_of = {
        key: [arg.value.value for arg in node.bases if isinstance(arg.value, cst.Name)]
        for key, node in classes.items()
    }
    derived = descendants([owner], bases_of)
    return [classes[owner]] + [
        node
        for key, node in classes.items()
        if key != owner and key in derived and class_method(node, name, classes) is method
    ]


def _defines(node: cst.ClassDef, method: cst.FunctionDef) -> bool:
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    return any(stmt is method for stmt in body)
