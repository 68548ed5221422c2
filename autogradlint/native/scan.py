"""Read one C/C++/CUDA source at token level: its Python bindings, its functions, and how each
function reads its tensor parameters. No compiler, no parser: regexes over the text with
comments blanked, bounded work per file, and "unknown" whenever the text does not say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# How a compiled function reads a tensor parameter, from the evidence in its body. Ordered from
# harmless to harmful: a merge of several implementations keeps the worst.
GUARDED = "guarded"  # makes it contiguous first (`.contiguous()`)
STRIDED = "strided"  # reads it through its own strides or accessors, or only through ATen
CHECKED = "checked"  # TORCH_CHECKs contiguity: a non-contiguous gradient raises
UNKNOWN = "unknown"  # the text does not say (or the source is not there)
RAW = "raw"  # reads `data_ptr()` / `data<T>()` with no guard: the silent bug
RANK = {GUARDED: 0, STRIDED: 0, CHECKED: 1, UNKNOWN: 2, RAW: 3}
SAFE = frozenset({GUARDED, STRIDED})

MAX_BYTES = 4_000_000  # a larger source (a 20 MB generated header) is not read: unknown
_MAX_BODY = 400_000  # a body longer than this is an unbalanced `#if` branch: not a function

# Comments, string and character literals, in one pass (an unterminated one runs to the end).
_LEXEMES = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:[^\"\\\n]|\\.)*\"?|'(?:[^'\\\n]|\\.){0,8}'?", re.S
)
_MODULE = re.compile(
    r"\b(PYBIND11_MODULE|TORCH_LIBRARY|TORCH_LIBRARY_FRAGMENT|TORCH_LIBRARY_IMPL)\s*\(\s*(\w+)"
    r"\s*,\s*(\w+)(?:\s*,\s*(\w+))?\s*\)\s*\{"
)
_MODULE_VARIABLE = re.compile(r"\bpy(?:bind11)?::module_?\s*&?\s*(\w+)\s*[,)]")
_FUNCTION = re.compile(
    r"\b([A-Za-z_]\w*)\s*\(([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*)\)\s*(?:const\s*)?(?:noexcept\s*)?(?:->\s*[\w:<>,\s]+)?\{"
)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
_KEYWORDS = frozenset(
    {"if", "for", "while", "switch", "catch", "return", "sizeof", "else", "do", "defined"}
)
_RAW_READ = r"\s*(?:\.|->)\s*(?:data_ptr|data|const_data_ptr|mutable_data_ptr)\s*[<(]"
_STRIDE_READ = r"\s*(?:\.|->)\s*(?:(?:packed_|generic_packed_)?accessor\w*|stride|strides)\b"
# TORCH_CHECK, AT_ASSERTM, a project's own ASSERT / CHECK_ARG ... and the C `assert`.
_CHECK = r"\b(?:[A-Z_]*(?:CHECK|ASSERT)[A-Z0-9_]*|assert)"
_GUARD = r"\s*(?:\.|->)\s*(?:contiguous|expect_contiguous)\s*\("


@dataclass(frozen=True)
class Function:
    """A C++ function definition and how it reads each tensor parameter."""

    name: str  # unqualified
    line: int
    params: tuple[str, ...]  # every parameter name, in order
    tensors: tuple[int, ...]  # which of them are tensors
    reads: tuple[tuple[str, int], ...]  # per tensor parameter: (how, line of the evidence)
    calls: tuple[tuple[int, str, int], ...]  # (tensor parameter, callee, its position there)
    macros: tuple[tuple[int, str, int], ...] = ()  # (tensor parameter, macro it is given, line)
    writes: tuple[int, ...] = ()  # per tensor parameter: line of a write into it (0: none seen)


@dataclass(frozen=True)
class Binding:
    """A name Python can call: `m.def("name", &fn)` in a pybind11 module, or an op of a
    `TORCH_LIBRARY` namespace with its implementation(s)."""

    kind: str  # pybind | op
    module: str  # the module token (TORCH_EXTENSION_NAME for setup-named ones) or namespace
    name: str
    target: str  # the C++ function (unqualified), "" when given as a lambda or schema only
    line: int
    schema: str = ""


class Source:
    """One native source, read lazily: comments blanked once, braces matched once, and only
    the functions someone asks about are analysed."""

    def __init__(self, path: str, text: str | None = None) -> None:
        self.path = path
        self._raw = text
        self._text: str | None = None
        self._braces: dict[int, int] | None = None
        self._lines: _LineIndex | None = None

    @property
    def raw(self) -> str:
        """The text as read (read on first use; unreadable or oversized: empty)."""
        if self._raw is None:
            text = _read(self.path)
            if self.path.endswith(".py"):
                text = inline_sources(text) if "load_inline" in text else ""
            self._raw = text
        return self._raw

    @property
    def header(self) -> bool:
        return self.path.endswith((".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl"))

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = blank_comments(self.raw)
        return self._text

    @property
    def braces(self) -> dict[int, int]:
        if self._braces is None:
            self._braces = _matching_braces(self.text)
        return self._braces

    def line(self, offset: int) -> int:
        if self._lines is None:
            self._lines = _LineIndex(self.text)
        return self._lines.line(offset)

    def macros(self) -> dict[str, str]:
        if "#" not in self.raw or "define" not in self.raw:
            return {}
        return {m.group(1): m.group(3) for m in _DEFINE.finditer(self.text)}

    def bindings(self) -> list[Binding]:
        """The names this file binds: `m.def(...)` on a pybind11 module (in its
        `PYBIND11_MODULE` block or in a function handed the module), and the ops of its
        `TORCH_LIBRARY*` blocks."""
        raw = self.raw
        pybind = "PYBIND11_MODULE" in raw or "::module" in raw
        if not pybind and "TORCH_LIBRARY" not in raw:
            return []
        if self.header and "::module" not in raw:
            return []  # a header binds only through a function handed the module
        text = self.text
        found: list[Binding] = []
        module = "TORCH_EXTENSION_NAME"
        variables: set[str] = set()
        for match in _MODULE.finditer(text):
            macro, first = match.group(1), match.group(2)
            var = match.group(4) or match.group(3)
            if macro == "PYBIND11_MODULE":
                module = first
                variables.add(var)
                continue
            end = self.braces.get(match.end() - 1)
            if end is not None:
                found.extend(self._defs(var, "op", first, match.end(), end))
        variables.update(_MODULE_VARIABLE.findall(text))
        for var in variables:
            found.extend(self._defs(var, "pybind", module, 0, len(text)))
        return found

    def _defs(self, var: str, kind: str, module: str, start: int, end: int) -> list[Binding]:
        text = self.text
        out: list[Binding] = []
        pattern = re.compile(
            rf"\b{re.escape(var)}\s*\.\s*(def|impl)\s*\(\s*(?:\(\s*std::string\s*\(\s*)?\"([^\"]*)\""
        )
        for definition in pattern.finditer(text, start, end):
            verb, name = definition.groups()
            if kind == "pybind" and verb != "def":
                continue
            opened = text.index("(", definition.start())
            args = _arguments(text, opened + 1)
            target = ""
            if len(args) > 1:
                expression = args[1].strip()
                pointer = re.search(r"&\s*([A-Za-z_][\w:]*)", expression)
                plain = re.match(
                    r"(?:TORCH_FN\s*\(\s*)?([A-Za-z_][\w:]*)\s*(?:<[^;]*>)?\s*\)?$", expression
                )
                chosen = pointer or plain
                if chosen is not None and not expression.startswith(("[", '"')):
                    target = chosen.group(1).rsplit("::", 1)[-1]
                    if target in ("py", "torch", "c10", "pybind11"):
                        target = ""
            schema = ""
            if kind == "op":
                schema = name if "(" in name else ""
                name = name.split("(", 1)[0].split(".", 1)[0].rsplit("::", 1)[-1]
            out.append(Binding(kind, module, name, target, self.line(definition.start()), schema))
        return out

    def functions(self, name: str) -> list[Function]:
        """Every definition of a function called `name` in this file."""
        if name not in self.raw:
            return []
        text = self.text
        found: list[Function] = []
        for candidate in re.finditer(rf"\b{re.escape(name)}\s*\(", text):
            match = _FUNCTION.match(text, candidate.start())
            if match is None:
                continue
            start = match.end() - 1
            end = self.braces.get(start)
            if end is None or end - start > _MAX_BODY:
                continue
            found.append(self._function(name, match, text[start:end], start))
        return found

    def _function(self, name: str, match: re.Match[str], body: str, start: int) -> Function:
        params = _parameters(match.group(2))
        names = tuple(pname for _, pname in params)
        tensors = tuple(i for i, (kind, pname) in enumerate(params) if _is_tensor(kind) and pname)
        line = self.line(match.start())
        if not tensors:
            return Function(name, line, names, (), (), ())
        calls = _calls(body)
        reads: list[tuple[str, int]] = []
        passed: list[tuple[int, str, int]] = []
        given: list[tuple[int, str, int]] = []
        writes: list[int] = []
        for index in tensors:
            how, at = _how_read(names[index], body)
            reads.append((how, self.line(start + at) if how != UNKNOWN else 0))
            written = _written(names[index], body)
            writes.append(self.line(start + written) if written is not None else 0)
            given.extend(
                (index, macro, self.line(start + offset))
                for macro, offset in macro_calls(names[index], body)
            )
            word = re.compile(rf"\s*{re.escape(names[index])}\s*")
            passed.extend(
                (index, callee, position)
                for callee, args in calls
                for position, arg in enumerate(args)
                if word.fullmatch(arg)
            )
        return Function(
            name, line, names, tensors, tuple(reads), tuple(passed), tuple(given), tuple(writes)
        )


def inline_sources(text: str) -> str:
    """The C++ a Python file hands `load_inline` (`cpp_sources` / `cuda_sources` strings, at
    their own line numbers, every other line blank) and a pybind11 block for its `functions`:
    load_inline binds each under its own name, in a module Python binds to any name."""
    import ast

    from ..text.ast_walk import parse_quietly

    tree = parse_quietly(text)
    if tree is None:
        return ""
    constants = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    lines = [""] * (text.count("\n") + 2)
    bound: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _called(node.func).endswith("load_inline")):
            continue
        for keyword in node.keywords:
            values = (
                keyword.value.elts
                if isinstance(keyword.value, (ast.List, ast.Tuple))
                else [keyword.value]
            )
            values = [constants.get(v.id, v) if isinstance(v, ast.Name) else v for v in values]
            if keyword.arg in ("cpp_sources", "cuda_sources"):
                for value in values:
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        for offset, line in enumerate(value.value.split("\n")):
                            if value.lineno + offset - 1 < len(lines):
                                lines[value.lineno + offset - 1] = line
            elif keyword.arg == "functions":
                if isinstance(keyword.value, ast.Dict):
                    values = list(keyword.value.keys)  # type: ignore[arg-type]
                bound += [
                    v.value
                    for v in values
                    if isinstance(v, ast.Constant) and isinstance(v.value, str)
                ]
    if not bound:
        return "\n".join(lines)
    defs = " ".join(f'm.def("{name}", &{name});' for name in bound if name.isidentifier())
    return "\n".join(lines) + f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ {defs} }}\n"


def _called(func: object) -> str:
    import ast

    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _read(path: str) -> str:
    import os

    try:
        if os.path.getsize(path) > MAX_BYTES:
            return ""
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def blank_comments(text: str) -> str:
    """Comments become spaces (newlines kept, so offsets and lines stay); literals stay."""

    def blank(match: re.Match[str]) -> str:
        token = match.group()
        if token.startswith(("//", "/*")):
            return re.sub(r"[^\n]", " ", token)
        return token

    return _LEXEMES.sub(blank, text.replace("\x00", " "))


def _is_tensor(kind: str) -> bool:
    return "Tensor" in kind and "TensorList" not in kind and "vector" not in kind


def _parameters(text: str) -> list[tuple[str, str]]:
    """(type, name) per parameter; defaults and templates tolerated."""
    params: list[tuple[str, str]] = []
    depth = 0
    piece: list[str] = []
    for char in text + ",":
        if char in "<([":
            depth += 1
        elif char in ">)]":
            depth = max(depth - 1, 0)
        if char == "," and depth == 0:
            part = "".join(piece).split("=", 1)[0].strip()
            piece = []
            words = re.findall(r"[A-Za-z_]\w*", part)
            if part and words and part != "void":
                params.append((part[: part.rfind(words[-1])], words[-1] if len(words) > 1 else ""))
            continue
        piece.append(char)
    return params


_TAILS: dict[str, re.Pattern[str]] = {}  # what follows a parameter's name, compiled once


def _word_then(name: str, tail: str, body: str) -> int | None:
    """Where `re.search(rf"\\b{name}{tail}", body)` would match, found from the name with
    `str.find`: a pattern that starts with `\\b` has no literal to skip ahead to, and `re`
    tries it at every position of the body (once per parameter)."""
    if not name[:1].isidentifier():
        found = re.search(rf"\b{re.escape(name)}{tail}", body)
        return None if found is None else found.start()
    pattern = _TAILS.get(tail)
    if pattern is None:
        pattern = _TAILS[tail] = re.compile(tail)
    at = body.find(name)
    while at != -1:
        before = body[at - 1 : at]
        if not (before.isalnum() or before == "_") and pattern.match(body, at + len(name)):
            return at
        at = body.find(name, at + 1)
    return None


def _how_read(name: str, body: str) -> tuple[str, int]:
    """The strongest evidence in `body` of how parameter `name` is read, and its offset."""
    guarded = _word_then(name, _GUARD, body)
    if guarded is not None:
        return GUARDED, guarded
    word = re.escape(name)
    checked = re.search(rf"{_CHECK}\s*\(\s*!?\s*\(?\s*{word}\s*(?:\.|->)\s*is_contiguous\b", body)
    if checked is not None:
        return CHECKED, checked.start()
    raw = _word_then(name, _RAW_READ, body)
    strided = _word_then(name, _STRIDE_READ, body)
    if strided is not None and (raw is None or strided < raw):
        return STRIDED, strided
    if raw is not None:
        return RAW, raw
    return UNKNOWN, 0


_INPLACE = r"\s*(?:\.|->)\s*(?:[a-z]\w*[a-z0-9]_|mutable_data_ptr|mutable_data)\s*[<(]"
_DECLARED_AS = r"(?:auto|(?:at::|torch::)?Tensor)\s*&?\s*(\w+)\s*=\s*"


def _written(name: str, body: str) -> int | None:
    """Offset of the evidence that the function writes into parameter `name`: an in-place
    method on it, or returning it (or its `.contiguous()`, the same buffer when it already is)
    after handing its pointer to a kernel: "the backward pass is completely in-place"."""
    word = re.escape(name)
    found = _word_then(name, _INPLACE, body)
    if found is not None:
        return found
    aliases = [name] + re.findall(
        rf"{_DECLARED_AS}{word}\s*(?:(?:\.|->)\s*contiguous\s*\(\s*\))?\s*;", body
    )
    # `float* p = g.data_ptr<float>();` then `p[i] *= s` / `*p = v`: a write through the pointer
    for pointer in re.finditer(
        rf"(?<!const )\b\w+\s*\*\s*(\w+)\s*=\s*(?:\w+_cast<[^>]*>\s*\()?\s*{word}{_RAW_READ}", body
    ):
        ptr = re.escape(pointer.group(1))
        # after the declaration: `p[i] = v`, `p[i] *= s`, `*p = v` (not `float* p = ...`)
        store = re.compile(
            rf"(?:\b{ptr}\s*\[[^\]]*\]|(?<![\w)\]])\*\s*\(?\s*{ptr}\b[^=;]*?)\s*[-+*/]?=(?!=)"
        ).search(body, pointer.end())
        if store is not None:
            return store.start()
    for alias in aliases:
        escaped = re.escape(alias)
        if _word_then(alias, _RAW_READ, body) is None:
            continue  # returning an untouched tensor is not a write
        returned = re.search(rf"\breturn\s+{escaped}\s*;", body)
        if returned is not None:
            return returned.start()
    return None


def macro_calls(name: str, body: str) -> list[tuple[str, int]]:
    """(macro, offset) of the upper-case macros `name` is handed to (`CHECK_INPUT(grad)`): the
    index knows their definitions, which often live in a header."""
    word = re.escape(name)
    pattern = rf"\b([A-Z][A-Z0-9_]*)\s*\(\s*{word}\s*[,)]"
    return [(m.group(1), m.start()) for m in re.finditer(pattern, body)]


def macro_checks(macro: str, macros: dict[str, str], depth: int = 0) -> bool:
    """Whether a macro (through the macros it expands to) checks contiguity."""
    body = macros.get(macro)
    if body is None or depth > 4:
        return False
    if "is_contiguous" in body:
        return True
    return any(macro_checks(inner, macros, depth + 1) for inner in re.findall(r"\b[A-Z]\w*", body))


_CALL = re.compile(r"\b([A-Za-z_][\w:]*)\s*(?:<<<[^;]*?>>>\s*)?\(")


def _calls(body: str) -> list[tuple[str, list[str]]]:
    """(callee, argument texts) of each call in a body that is not torch's or the std's."""
    out: list[tuple[str, list[str]]] = []
    for match in _CALL.finditer(body):
        callee = match.group(1)
        if callee in _KEYWORDS or callee.startswith(("at::", "torch::", "std::", "c10::")):
            continue
        args = _arguments(body, match.end())
        if args:
            out.append((callee.rsplit("::", 1)[-1], args))
    return out


def _arguments(body: str, start: int) -> list[str]:
    depth = 0
    args: list[str] = []
    piece_start = start
    limit = min(len(body), start + 2000)
    for index in range(start, limit):
        char = body[index]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                args.append(body[piece_start:index])
                return args
            depth -= 1
        elif char == "," and depth == 0:
            args.append(body[piece_start:index])
            piece_start = index + 1
        elif char == ";":
            return []
    return []


def _matching_braces(text: str) -> dict[int, int]:
    """Offset of each `{` -> offset of its `}` (unbalanced ones are left out)."""
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for match in re.finditer(r"[{}]|\"(?:[^\"\\\n]|\\.)*\"", text):
        token = match.group()
        if token == "{":
            stack.append(match.start())
        elif token == "}" and stack:
            pairs[stack.pop()] = match.start()
    return pairs


class _LineIndex:
    """Offset -> 1-based line, by bisection over newline offsets (built once per file)."""

    def __init__(self, text: str) -> None:
        self.starts = [m.end() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        import bisect

        return bisect.bisect_right(self.starts, offset) + 1
