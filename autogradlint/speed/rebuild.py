"""libcst trees built from the `ast` the slicer already holds, instead of a second parse.

libcst's parser spends ~6 us per node (tokens, whitespace, node objects); most of what a cold
`check` parses proves that nothing is wrong. The checks read a tree's structure (node kinds,
names, literals as written), never its formatting, and CPython has already parsed the same
statements for the slicer. So the check path builds libcst nodes from that `ast`, with default
formatting and without running libcst's constructors, at a tenth of the cost.

What this tree lacks is formatting: whitespace, comments, parentheses, commas. A finding's
message and position, and any check that quotes a node, need libcst's own node: speed/twins.py
parses the top-level statement that holds it and pairs the two. A construct this module does not
rebuild (`match`, `except*`, newer syntax) raises `Unsupported`, and libcst parses the slice.

tests/test_rebuild.py holds the rebuilt tree to libcst's parse of the same slice, field by field
(formatting aside), on the fixtures, and on every slice of the corpus and torch when present.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize
from collections.abc import Callable, Sequence
from typing import Any

import libcst as cst
from libcst import MaybeSentinel

from ..analysis.parsing import parse_expression


class Unsupported(Exception):
    """A construct not rebuilt here: the caller parses the text with libcst instead."""


_SET = object.__setattr__
_NEW = object.__new__
# Per libcst class, a constructor that sets every slot directly: parameters for the fields, their
# defaults shared (nodes are immutable, and the formatting nodes among them are never visited).
_MAKERS: dict[type, Callable[..., Any]] = {}


def _maker(kind: type) -> Callable[..., Any]:
    names: list[str] = []
    scope: dict[str, object] = {"_SET": _SET, "_NEW": _NEW, "_KIND": kind}
    for field in dataclasses.fields(kind):
        if field.default is not dataclasses.MISSING:
            scope[f"_D_{field.name}"] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            scope[f"_D_{field.name}"] = field.default_factory()
        else:
            scope[f"_D_{field.name}"] = None  # required: every caller passes it
        names.append(field.name)
    signature = ", ".join(f"{name}=_D_{name}" for name in names)
    body = "".join(f"    _SET(node, {name!r}, {name})\n" for name in names)
    exec(f"def make({signature}):\n    node = _NEW(_KIND)\n{body}    return node\n", scope)
    maker: Callable[..., Any] = scope["make"]  # type: ignore[assignment]
    _MAKERS[kind] = maker
    return maker


def _node(kind: type, **fields: object) -> Any:
    """A libcst node without its constructor: no validation, no fresh whitespace objects."""
    maker = _MAKERS.get(kind)
    if maker is None:
        maker = _maker(kind)
    return maker(**fields)


_BINARY: dict[type, type] = {
    ast.Add: cst.Add,
    ast.Sub: cst.Subtract,
    ast.Mult: cst.Multiply,
    ast.Div: cst.Divide,
    ast.FloorDiv: cst.FloorDivide,
    ast.Mod: cst.Modulo,
    ast.Pow: cst.Power,
    ast.LShift: cst.LeftShift,
    ast.RShift: cst.RightShift,
    ast.BitOr: cst.BitOr,
    ast.BitAnd: cst.BitAnd,
    ast.BitXor: cst.BitXor,
    ast.MatMult: cst.MatrixMultiply,
}
_AUGMENTED: dict[type, type] = {
    ast.Add: cst.AddAssign,
    ast.Sub: cst.SubtractAssign,
    ast.Mult: cst.MultiplyAssign,
    ast.Div: cst.DivideAssign,
    ast.FloorDiv: cst.FloorDivideAssign,
    ast.Mod: cst.ModuloAssign,
    ast.Pow: cst.PowerAssign,
    ast.LShift: cst.LeftShiftAssign,
    ast.RShift: cst.RightShiftAssign,
    ast.BitOr: cst.BitOrAssign,
    ast.BitAnd: cst.BitAndAssign,
    ast.BitXor: cst.BitXorAssign,
    ast.MatMult: cst.MatrixMultiplyAssign,
}
_UNARY: dict[type, type] = {
    ast.UAdd: cst.Plus,
    ast.USub: cst.Minus,
    ast.Invert: cst.BitInvert,
    ast.Not: cst.Not,
}
_COMPARE: dict[type, type] = {
    ast.Eq: cst.Equal,
    ast.NotEq: cst.NotEqual,
    ast.Lt: cst.LessThan,
    ast.LtE: cst.LessThanEqual,
    ast.Gt: cst.GreaterThan,
    ast.GtE: cst.GreaterThanEqual,
    ast.Is: cst.Is,
    ast.IsNot: cst.IsNot,
    ast.In: cst.In,
    ast.NotIn: cst.NotIn,
}
_COMPOUND = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.Try,
    ast.With,
    ast.AsyncWith,
)
_COMPOUND_KINDS = frozenset(_COMPOUND)  # each has a builder in _Builder.compounds
# One string literal, prefix and quotes included (anything else is implicit concatenation).
_ONE_STRING = re.compile(
    r"""[rRbBuU]{0,2}(?:\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''"""
    r"""|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')""",
    re.DOTALL,
)


def first_line(node: ast.stmt) -> int:
    """The line a statement starts on, its decorators included."""
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        return min(node.lineno, *(d.lineno for d in decorators))
    return node.lineno


def kept_statements(
    nodes: list[ast.stmt], keep: Sequence[bool] | None
) -> list[ast.stmt | list[ast.stmt]]:
    """The kept statements as libcst holds them: a compound statement alone, small statements
    grouped by the line they share (`a = 1; b = 2` is one SimpleStatementLine)."""
    out: list[ast.stmt | list[ast.stmt]] = []
    line: list[ast.stmt] | None = None  # the small statements of the current physical line
    last_line = -1
    for node in nodes:
        if keep is not None:
            first = first_line(node)
            if not (first < len(keep) and keep[first]):
                continue
        if type(node) in _COMPOUND_KINDS:
            out.append(node)
            line = None
            continue
        if line is not None and node.lineno == last_line:
            line.append(node)
        else:
            line = [node]
            out.append(line)
        last_line = node.end_lineno or node.lineno
    return out


class _Builder:
    """One module's statements, rebuilt; `keep` (by line) selects what libcst would be given."""

    def __init__(self, text: str, keep: Sequence[bool] | None) -> None:
        self.lines = text.split("\n")
        self.keep = keep
        self.expressions: dict[type, Callable[[Any], Any]] = {
            ast.Name: self._name,
            ast.Attribute: self._attribute,
            ast.Call: self._call,
            ast.Constant: self._constant,
            ast.Subscript: self._subscript,
            ast.BinOp: self._binary,
            ast.BoolOp: self._boolean,
            ast.UnaryOp: self._unary,
            ast.Compare: self._compare,
            ast.IfExp: self._if_expression,
            ast.Lambda: self._lambda,
            ast.List: self._list,
            ast.Tuple: self._tuple,
            ast.Set: self._set,
            ast.Dict: self._dict,
            ast.ListComp: self._list_comp,
            ast.SetComp: self._set_comp,
            ast.GeneratorExp: self._generator,
            ast.DictComp: self._dict_comp,
            ast.Await: self._await,
            ast.Yield: self._yield,
            ast.YieldFrom: self._yield_from,
            ast.NamedExpr: self._named,
            ast.JoinedStr: self._parsed_literal,
        }
        self.smalls: dict[type, Callable[[Any], Any]] = {
            ast.Expr: lambda n: _node(cst.Expr, value=self.expr(n.value)),
            ast.Assign: self._assign,
            ast.AnnAssign: self._annotated_assign,
            ast.AugAssign: self._augmented_assign,
            ast.Return: lambda n: _node(cst.Return, value=self.optional(n.value)),
            ast.Raise: self._raise,
            ast.Assert: lambda n: _node(
                cst.Assert, test=self.expr(n.test), msg=self.optional(n.msg)
            ),
            ast.Delete: self._delete,
            ast.Pass: lambda n: _node(cst.Pass),
            ast.Break: lambda n: _node(cst.Break),
            ast.Continue: lambda n: _node(cst.Continue),
            ast.Global: lambda n: _node(cst.Global, names=self._name_items(n.names)),
            ast.Nonlocal: lambda n: _node(cst.Nonlocal, names=self._name_items(n.names)),
            ast.Import: self._import,
            ast.ImportFrom: self._import_from,
        }
        self.compounds: dict[type, Callable[[Any], Any]] = {
            ast.FunctionDef: self._function,
            ast.AsyncFunctionDef: self._function,
            ast.ClassDef: self._class,
            ast.If: self._if,
            ast.For: self._for,
            ast.AsyncFor: self._for,
            ast.While: self._while,
            ast.Try: self._try,
            ast.With: self._with,
            ast.AsyncWith: self._with,
        }

    # --- text -----------------------------------------------------------------------------
    def _column(self, line: int, byte_column: int) -> int:
        """`ast` counts columns in UTF-8 bytes; the text is indexed by character."""
        content = self.lines[line - 1]
        if content.isascii():
            return byte_column
        return len(content.encode("utf-8")[:byte_column].decode("utf-8", "replace"))

    def _segment(self, node: ast.expr) -> str:
        first, last = node.lineno, node.end_lineno or node.lineno
        start = self._column(first, node.col_offset)
        end = self._column(last, node.end_col_offset or 0)
        if first == last:
            return self.lines[first - 1][start:end]
        middle = self.lines[first : last - 1]
        return "\n".join([self.lines[first - 1][start:], *middle, self.lines[last - 1][:end]])

    def _starts_line(self, node: ast.stmt) -> bool:
        content = self.lines[node.lineno - 1]
        return not content[: self._column(node.lineno, node.col_offset)].strip()

    # --- statements -----------------------------------------------------------------------
    def module(self, tree: ast.Module) -> cst.Module:
        return _node(cst.Module, body=self.statements(tree.body))

    def statements(self, nodes: list[ast.stmt]) -> list[Any]:
        return [
            self.compounds[type(item)](item)
            if isinstance(item, ast.stmt)
            else _node(cst.SimpleStatementLine, body=[self.small(n) for n in item])
            for item in kept_statements(nodes, self.keep)
        ]

    def small(self, node: ast.stmt) -> Any:
        build = self.smalls.get(type(node))
        if build is None:
            raise Unsupported(type(node).__name__)
        return build(node)

    def block(self, nodes: list[ast.stmt]) -> Any:
        """An indented block, or the statements after a colon on the header's own line."""
        first = nodes[0]
        if not isinstance(first, _COMPOUND) and not self._starts_line(first):
            return _node(cst.SimpleStatementSuite, body=[self.small(n) for n in nodes])
        return _node(cst.IndentedBlock, body=self.statements(nodes))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Any:
        if getattr(node, "type_params", None):
            raise Unsupported("type parameters")
        return _node(
            cst.FunctionDef,
            name=_node(cst.Name, value=node.name),
            params=self._parameters(node.args),
            body=self.block(node.body),
            decorators=self._decorators(node.decorator_list),
            returns=self._annotation(node.returns),
            asynchronous=_node(cst.Asynchronous)
            if isinstance(node, ast.AsyncFunctionDef)
            else None,
        )

    def _class(self, node: ast.ClassDef) -> Any:
        if getattr(node, "type_params", None):
            raise Unsupported("type parameters")
        return _node(
            cst.ClassDef,
            name=_node(cst.Name, value=node.name),
            body=self.block(node.body),
            bases=[self._argument(base) for base in node.bases],
            keywords=[self._keyword(keyword) for keyword in node.keywords],
            decorators=self._decorators(node.decorator_list),
        )

    def _decorators(self, nodes: list[ast.expr]) -> list[Any]:
        return [_node(cst.Decorator, decorator=self.expr(n)) for n in nodes]

    def _if(self, node: ast.If) -> Any:
        orelse = None
        if node.orelse:
            first = node.orelse[0]
            if isinstance(first, ast.If) and self._is_elif(first):
                orelse = self._if(first)
            else:
                orelse = _node(cst.Else, body=self.block(node.orelse))
        return _node(cst.If, test=self.expr(node.test), body=self.block(node.body), orelse=orelse)

    def _is_elif(self, node: ast.If) -> bool:
        content = self.lines[node.lineno - 1]
        column = self._column(node.lineno, node.col_offset)
        return content.startswith("elif", column)

    def _else(self, nodes: list[ast.stmt]) -> Any:
        return _node(cst.Else, body=self.block(nodes)) if nodes else None

    def _for(self, node: ast.For | ast.AsyncFor) -> Any:
        return _node(
            cst.For,
            target=self.expr(node.target),
            iter=self.expr(node.iter),
            body=self.block(node.body),
            orelse=self._else(node.orelse),
            asynchronous=_node(cst.Asynchronous) if isinstance(node, ast.AsyncFor) else None,
        )

    def _while(self, node: ast.While) -> Any:
        return _node(
            cst.While,
            test=self.expr(node.test),
            body=self.block(node.body),
            orelse=self._else(node.orelse),
        )

    def _try(self, node: ast.Try) -> Any:
        handlers = [
            _node(
                cst.ExceptHandler,
                body=self.block(handler.body),
                type=self.optional(handler.type),
                name=_node(cst.AsName, name=_node(cst.Name, value=handler.name))
                if handler.name
                else None,
            )
            for handler in node.handlers
        ]
        return _node(
            cst.Try,
            body=self.block(node.body),
            handlers=handlers,
            orelse=self._else(node.orelse),
            finalbody=_node(cst.Finally, body=self.block(node.finalbody))
            if node.finalbody
            else None,
        )

    def _with(self, node: ast.With | ast.AsyncWith) -> Any:
        items = [
            _node(
                cst.WithItem,
                item=self.expr(item.context_expr),
                asname=_node(cst.AsName, name=self.expr(item.optional_vars))
                if item.optional_vars is not None
                else None,
            )
            for item in node.items
        ]
        return _node(
            cst.With,
            items=items,
            body=self.block(node.body),
            asynchronous=_node(cst.Asynchronous) if isinstance(node, ast.AsyncWith) else None,
        )

    def _assign(self, node: ast.Assign) -> Any:
        targets = [_node(cst.AssignTarget, target=self.expr(t)) for t in node.targets]
        return _node(cst.Assign, targets=targets, value=self.expr(node.value))

    def _annotated_assign(self, node: ast.AnnAssign) -> Any:
        return _node(
            cst.AnnAssign,
            target=self.expr(node.target),
            annotation=self._annotation(node.annotation),
            value=self.optional(node.value),
        )

    def _augmented_assign(self, node: ast.AugAssign) -> Any:
        return _node(
            cst.AugAssign,
            target=self.expr(node.target),
            operator=_node(_AUGMENTED[type(node.op)]),
            value=self.expr(node.value),
        )

    def _raise(self, node: ast.Raise) -> Any:
        cause = _node(cst.From, item=self.expr(node.cause)) if node.cause is not None else None
        return _node(cst.Raise, exc=self.optional(node.exc), cause=cause)

    def _delete(self, node: ast.Delete) -> Any:
        if len(node.targets) == 1:
            return _node(cst.Del, target=self.expr(node.targets[0]))
        elements = [_node(cst.Element, value=self.expr(t)) for t in node.targets]
        return _node(cst.Del, target=_node(cst.Tuple, elements=elements))

    def _name_items(self, names: list[str]) -> list[Any]:
        return [_node(cst.NameItem, name=_node(cst.Name, value=name)) for name in names]

    def _import(self, node: ast.Import) -> Any:
        return _node(cst.Import, names=[self._alias(alias) for alias in node.names])

    def _import_from(self, node: ast.ImportFrom) -> Any:
        names: Any
        if len(node.names) == 1 and node.names[0].name == "*":
            names = _node(cst.ImportStar)
        else:
            names = [self._alias(alias) for alias in node.names]
        return _node(
            cst.ImportFrom,
            module=_dotted(node.module) if node.module else None,
            names=names,
            relative=[_node(cst.Dot) for _ in range(node.level or 0)],
        )

    def _alias(self, alias: ast.alias) -> Any:
        asname = None
        if alias.asname is not None:
            asname = _node(cst.AsName, name=_node(cst.Name, value=alias.asname))
        return _node(cst.ImportAlias, name=_dotted(alias.name), asname=asname)

    # --- parameters and arguments ---------------------------------------------------------
    def _annotation(self, node: ast.expr | None) -> Any:
        if node is None:
            return None
        return _node(cst.Annotation, annotation=self.expr(node))

    def _param(self, arg: ast.arg, default: ast.expr | None, star: str = "") -> Any:
        return _node(
            cst.Param,
            name=_node(cst.Name, value=arg.arg),
            annotation=self._annotation(arg.annotation),
            default=self.optional(default),
            star=star,
        )

    def _parameters(self, args: ast.arguments) -> Any:
        positional = [*args.posonlyargs, *args.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
        defaults.extend(args.defaults)
        params = [self._param(a, d) for a, d in zip(positional, defaults, strict=True)]
        split = len(args.posonlyargs)
        star_arg: Any = MaybeSentinel.DEFAULT
        if args.vararg is not None:
            star_arg = self._param(args.vararg, None, "*")
        elif args.kwonlyargs:
            star_arg = _node(cst.ParamStar)
        return _node(
            cst.Parameters,
            params=params[split:],
            star_arg=star_arg,
            kwonly_params=[
                self._param(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
            ],
            star_kwarg=self._param(args.kwarg, None, "**") if args.kwarg is not None else None,
            posonly_params=params[:split],
            posonly_ind=_node(cst.ParamSlash) if split else MaybeSentinel.DEFAULT,
        )

    def _argument(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Starred):
            return _node(cst.Arg, value=self.expr(node.value), star="*")
        return _node(cst.Arg, value=self.expr(node))

    def _keyword(self, node: ast.keyword) -> Any:
        if node.arg is None:
            return _node(cst.Arg, value=self.expr(node.value), star="**")
        return _node(cst.Arg, value=self.expr(node.value), keyword=_node(cst.Name, value=node.arg))

    # --- expressions ----------------------------------------------------------------------
    def expr(self, node: ast.expr) -> Any:
        build = self.expressions.get(type(node))
        if build is None:
            raise Unsupported(type(node).__name__)
        return build(node)

    def optional(self, node: ast.expr | None) -> Any:
        return None if node is None else self.expr(node)

    def _name(self, node: ast.Name) -> Any:
        return _node(cst.Name, value=node.id)

    def _attribute(self, node: ast.Attribute) -> Any:
        return _node(
            cst.Attribute, value=self.expr(node.value), attr=_node(cst.Name, value=node.attr)
        )

    def _call(self, node: ast.Call) -> Any:
        args = [self._argument(a) for a in node.args]
        if node.keywords:
            keywords = [self._keyword(k) for k in node.keywords]
            if args and (node.keywords[0].lineno, node.keywords[0].col_offset) < (
                node.args[-1].lineno,
                node.args[-1].col_offset,
            ):
                # `f(x=1, *rest)`: libcst keeps the order of the source
                pairs = [(a.lineno, a.col_offset) for a in node.args]
                pairs += [(k.lineno, k.col_offset) for k in node.keywords]
                built = [*args, *keywords]
                args = [b for _, b in sorted(zip(pairs, built, strict=True), key=_first)]
            else:
                args.extend(keywords)
        return _node(cst.Call, func=self.expr(node.func), args=args)

    def _constant(self, node: ast.Constant) -> Any:
        value = node.value
        if value is None or value is True or value is False:
            return _node(cst.Name, value=repr(value))
        if value is Ellipsis:
            return _node(cst.Ellipsis)
        if isinstance(value, (str, bytes)):
            text = self._segment(node)
            if _ONE_STRING.fullmatch(text):
                return _node(cst.SimpleString, value=text)
            return self._parsed_literal(node)
        if isinstance(value, bool):  # pragma: no cover - handled above
            raise Unsupported("bool")
        kind = (
            cst.Integer
            if isinstance(value, int)
            else cst.Float
            if isinstance(value, float)
            else cst.Imaginary
        )
        return _node(kind, value=self._segment(node))

    def _parsed_literal(self, node: ast.expr) -> Any:
        """f-strings and implicitly concatenated strings: libcst parses just the literal (a
        long run of literals as one leaf, as parse_module reads it)."""
        text = self._segment(node)
        try:
            parsed = parse_expression(f"({text})")
        except Exception as exc:  # noqa: BLE001 - libcst raises bare exceptions on odd input
            raise Unsupported("string literal") from exc
        return _with_fields(parsed, lpar=(), rpar=())

    def _subscript(self, node: ast.Subscript) -> Any:
        index = node.slice
        if isinstance(index, ast.Tuple) and index.elts and not self._parenthesized(index):
            elements = [self._element(e) for e in index.elts]
        else:
            elements = [self._element(index)]
        return _node(cst.Subscript, value=self.expr(node.value), slice=elements)

    def _element(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Slice):
            inner: Any = _node(
                cst.Slice,
                lower=self.optional(node.lower),
                upper=self.optional(node.upper),
                step=self.optional(node.step),
            )
            if node.step is not None or self._second_colon(node):
                _SET(inner, "second_colon", _node(cst.Colon))
        elif isinstance(node, ast.Starred):
            inner = _node(cst.Index, value=self.expr(node.value), star="*")
        else:
            inner = _node(cst.Index, value=self.expr(node))
        return _node(cst.SubscriptElement, slice=inner)

    def _second_colon(self, node: ast.Slice) -> bool:
        """`x[a::]`: a second colon with no step after it (libcst keeps it). Only brackets,
        comments and colons can follow the last bound."""
        bound = node.upper or node.lower
        needed = 1 if node.upper is not None else 2
        if bound is None:
            tail = self._segment(node)
        else:
            tail = self._between(bound, node)
        colons = sum(line.split("#", 1)[0].count(":") for line in tail.split("\n"))
        return colons >= needed

    def _between(self, before: ast.expr, outer: ast.expr) -> str:
        """The text after `before` up to the end of `outer`."""
        first, last = before.end_lineno or before.lineno, outer.end_lineno or outer.lineno
        start = self._column(first, before.end_col_offset or 0)
        end = self._column(last, outer.end_col_offset or 0)
        if first == last:
            return self.lines[first - 1][start:end]
        middle = self.lines[first : last - 1]
        return "\n".join([self.lines[first - 1][start:], *middle, self.lines[last - 1][:end]])

    def _parenthesized(self, node: ast.Tuple) -> bool:
        """`x[(a, b)]` (one index, a tuple) rather than `x[a, b]` (two)."""
        text = self._segment(node)
        if not (text.startswith("(") and text.endswith(")")):
            return False
        depth = 0
        tokens = _tokens(text)
        for index, token in enumerate(tokens):
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth -= 1
                if depth == 0:
                    # the first bracket closes at the very end: it encloses the whole tuple
                    return all(
                        t.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)
                        for t in tokens[index + 1 :]
                    )
        return False

    def _binary(self, node: ast.BinOp) -> Any:
        return _node(
            cst.BinaryOperation,
            left=self.expr(node.left),
            operator=_node(_BINARY[type(node.op)]),
            right=self.expr(node.right),
        )

    def _boolean(self, node: ast.BoolOp) -> Any:
        kind = cst.And if isinstance(node.op, ast.And) else cst.Or
        values = node.values
        out = self.expr(values[0])
        for value in values[1:]:  # `a and b and c` is ((a and b) and c)
            out = _node(
                cst.BooleanOperation, left=out, operator=_node(kind), right=self.expr(value)
            )
        return out

    def _unary(self, node: ast.UnaryOp) -> Any:
        return _node(
            cst.UnaryOperation,
            operator=_node(_UNARY[type(node.op)]),
            expression=self.expr(node.operand),
        )

    def _compare(self, node: ast.Compare) -> Any:
        targets = [
            _node(cst.ComparisonTarget, operator=_node(_COMPARE[type(op)]), comparator=self.expr(c))
            for op, c in zip(node.ops, node.comparators, strict=True)
        ]
        return _node(cst.Comparison, left=self.expr(node.left), comparisons=targets)

    def _if_expression(self, node: ast.IfExp) -> Any:
        return _node(
            cst.IfExp,
            test=self.expr(node.test),
            body=self.expr(node.body),
            orelse=self.expr(node.orelse),
        )

    def _lambda(self, node: ast.Lambda) -> Any:
        return _node(cst.Lambda, params=self._parameters(node.args), body=self.expr(node.body))

    def _elements(self, nodes: list[ast.expr]) -> list[Any]:
        return [
            _node(cst.StarredElement, value=self.expr(n.value))
            if isinstance(n, ast.Starred)
            else _node(cst.Element, value=self.expr(n))
            for n in nodes
        ]

    def _list(self, node: ast.List) -> Any:
        return _node(cst.List, elements=self._elements(node.elts))

    def _tuple(self, node: ast.Tuple) -> Any:
        return _node(cst.Tuple, elements=self._elements(node.elts))

    def _set(self, node: ast.Set) -> Any:
        return _node(cst.Set, elements=self._elements(node.elts))

    def _dict(self, node: ast.Dict) -> Any:
        elements = [
            _node(cst.StarredDictElement, value=self.expr(value))
            if key is None
            else _node(cst.DictElement, key=self.expr(key), value=self.expr(value))
            for key, value in zip(node.keys, node.values, strict=True)
        ]
        return _node(cst.Dict, elements=elements)

    def _for_in(self, generators: list[ast.comprehension]) -> Any:
        inner = None
        for generator in reversed(generators):
            inner = _node(
                cst.CompFor,
                target=self.expr(generator.target),
                iter=self.expr(generator.iter),
                ifs=[_node(cst.CompIf, test=self.expr(t)) for t in generator.ifs],
                inner_for_in=inner,
                asynchronous=_node(cst.Asynchronous) if generator.is_async else None,
            )
        return inner

    def _list_comp(self, node: ast.ListComp) -> Any:
        return _node(cst.ListComp, elt=self.expr(node.elt), for_in=self._for_in(node.generators))

    def _set_comp(self, node: ast.SetComp) -> Any:
        return _node(cst.SetComp, elt=self.expr(node.elt), for_in=self._for_in(node.generators))

    def _generator(self, node: ast.GeneratorExp) -> Any:
        return _node(
            cst.GeneratorExp, elt=self.expr(node.elt), for_in=self._for_in(node.generators)
        )

    def _dict_comp(self, node: ast.DictComp) -> Any:
        return _node(
            cst.DictComp,
            key=self.expr(node.key),
            value=self.expr(node.value),
            for_in=self._for_in(node.generators),
        )

    def _await(self, node: ast.Await) -> Any:
        return _node(cst.Await, expression=self.expr(node.value))

    def _yield(self, node: ast.Yield) -> Any:
        return _node(cst.Yield, value=self.optional(node.value))

    def _yield_from(self, node: ast.YieldFrom) -> Any:
        return _node(cst.Yield, value=_node(cst.From, item=self.expr(node.value)))

    def _named(self, node: ast.NamedExpr) -> Any:
        return _node(cst.NamedExpr, target=self.expr(node.target), value=self.expr(node.value))


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise Unsupported("cannot tokenize a subscript") from exc


def _first(pair: tuple[tuple[int, int], Any]) -> tuple[int, int]:
    return pair[0]


def _dotted(name: str) -> Any:
    """`a.b.c` as libcst spells a dotted name: Attribute(Attribute(a, b), c)."""
    parts = name.split(".")
    out: Any = _node(cst.Name, value=parts[0])
    for part in parts[1:]:
        out = _node(cst.Attribute, value=out, attr=_node(cst.Name, value=part))
    return out


def _with_fields(node: Any, **fields: object) -> Any:
    for name, value in fields.items():
        _SET(node, name, value)
    return node


def rebuild_module(tree: ast.Module, text: str, keep: Sequence[bool] | None) -> cst.Module:
    """The libcst module of the statements of `tree` whose first line `keep` marks (all of
    them when None), as libcst would parse them from those lines, formatting aside. `text` is
    the text `tree` was parsed from (same lines). Raises `Unsupported`."""
    try:
        return _Builder(text, keep).module(tree)
    except (
        KeyError,
        IndexError,
        ValueError,
        RecursionError,
    ) as exc:  # a shape this builder did not expect
        raise Unsupported(f"{type(exc).__name__}: {exc}") from exc
