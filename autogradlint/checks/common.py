"""Small CST helpers shared by the checks."""

from __future__ import annotations

import libcst as cst

from ..analysis.facts import ClassInfo, FileFacts


def positional(call: cst.Call, index: int, keyword: str | None = None) -> cst.BaseExpression | None:
    """The argument at a position, or passed by keyword."""
    if keyword is not None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg.value
    plain = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return plain[index].value if index < len(plain) else None


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def is_literal(expr: cst.BaseExpression | None, value: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == value


def string_value(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.SimpleString):
        evaluated = expr.evaluated_value
        return evaluated if isinstance(evaluated, str) else None
    return None


def source_of(module: cst.Module, node: cst.CSTNode, limit: int = 60) -> str:
    """Short source text of a node for messages (one line, truncated)."""
    text = " ".join(module.code_for_node(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def backward_methods(facts: FileFacts) -> list[tuple[ClassInfo, cst.FunctionDef]]:
    return [
        (info, info.methods["backward"])
        for info in facts.function_classes
        if "backward" in info.methods
    ]
