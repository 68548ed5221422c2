"""Read one C/C++/CUDA source at token level: its Python bindings, its functions, and how each
function uses its tensor parameters (access.py follows the pointers). No compiler, no parser:
regexes and hand scans over the text with comments blanked, each one pass over what it reads,
and "unknown" whenever the text does not say.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace

from .access import CHECKED, GUARDED, RANK, RAW, SAFE, STRIDED, UNKNOWN, Access, Reader
from .tokens import Tokens

__all__ = ["CHECKED", "GUARDED", "RANK", "RAW", "SAFE", "STRIDED", "UNKNOWN", "Access"]

MAX_BYTES = 4_000_000  # a larger source (a 20 MB generated header) is not read: unknown
_MAX_BODY = 400_000  # a body longer than this is an unbalanced `#if` branch: not a function

# No pattern here repeats characters that the pattern beside it repeats too: `re` never tries
# a run of blanks two ways, and every pattern takes one pass over what it reads.
# Comments, string and character literals, in one pass (an unterminated one runs to the end).
_LEXEMES = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:[^\"\\\n]|\\.)*\"?|'(?:[^'\\\n]|\\.){0,8}'?", re.S
)
_MODULE = re.compile(
    r"\b(PYBIND11_MODULE|TORCH_LIBRARY|TORCH_LIBRARY_FRAGMENT|TORCH_LIBRARY_IMPL)\s*\(\s*(\w+)"
    r"\s*,\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)\s*\{"
)
_MODULE_VARIABLE = re.compile(r"\bpy(?:bind11)?::module_?\s*(?:&\s*)?(\w+)\s*[,)]")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)\n]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
# `m.def("name", ...)`, `m.impl("op", ...)`, `m.def(std::string("...`: a binding, whose variable
# says which module or library block it belongs to.
_DEFINITION = re.compile(
    r"\b(\w+)\s*\.\s*(def|impl)\s*\(\s*(?:\(\s*std::string\s*\(\s*)?\"([^\"\n]*)\""
)
# `void register_ops(torch::Library& m) {`: a function handed a library block's variable, whose
# `m.impl(...)`s bind ops of the namespace of the block that calls it (gsplat's per-file
# registrars, called from `TORCH_LIBRARY_IMPL(gsplat, CUDA, m) { register_ops(m); }`).
_LIBRARY_FUNCTION = re.compile(
    r"\b(\w+)\s*\(\s*(?:(?:torch|c10)\s*::\s*)?Library\s*&\s*(\w+)\s*\)\s*\{"
)
# A marshalling specialization (`struct TorchArgDef<Grad> { static auto to(const Grad& g) {
# return to_torch_args(g.renders, g.alphas); } ... }`): the op's schema carries the struct's
# fields, in that order, as separate arguments.
_SPECIALIZATION = re.compile(r"\bstruct\s+\w+\s*<\s*([\w:]+)\s*>\s*\{")
_STRUCT = re.compile(r"\bstruct\s+(\w+)\s*\{")
# A struct parameter's field, read as one name (same length, so offsets and lines stay).
FIELD = "\u018e"
_POINTER_TARGET = re.compile(r"&\s*([A-Za-z_][\w:]*)")
_NAME_TARGET = re.compile(r"(?:TORCH_FN\s*\(\s*)?([A-Za-z_][\w:]*)")


@dataclass(frozen=True)
class Function:
    """A C++ function definition, how it uses each tensor parameter, and which of its pointer
    parameters it writes through (a kernel handed `grad.data_ptr<float>()`)."""

    name: str  # unqualified
    line: int
    params: tuple[str, ...]  # every parameter name, in order
    tensors: tuple[int, ...]  # which of them are tensors
    reads: tuple[tuple[str, int], ...]  # per tensor parameter: (how, line of the evidence)
    calls: tuple[tuple[int, str, int], ...]  # (tensor parameter, callee, its position there)
    macros: tuple[tuple[int, str, int], ...] = ()  # (tensor parameter, macro it is given, line)
    writes: tuple[int, ...] = ()  # per tensor parameter: line of a write into it (0: none seen)
    # Per tensor parameter, every kind of evidence with its line: read-raw, stride-aware,
    # made-contiguous, checked-contiguous, written.
    accesses: tuple[Access, ...] = ()
    # (parameter, callee, position, line): a contiguous copy of a tensor parameter handed on
    # (its reads say nothing, its writes may reach the parameter), or a writable pointer into
    # a tensor or pointer parameter (the callee's definition says whether it writes).
    handed: tuple[tuple[int, str, int, int, str], ...] = ()
    pointers: tuple[tuple[int, int], ...] = ()  # (writable pointer parameter, line of a write)
    readonly: tuple[int, ...] = ()  # pointer parameters that point to const


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
    # The function handed the library's variable that binds it (its namespace is that of the
    # `TORCH_LIBRARY*` block calling it: module is "" until the index finds that block).
    registrar: str = ""


class Source:
    """One native source, read lazily: comments blanked once, braces matched once, and only
    the functions someone asks about are analysed."""

    def __init__(self, path: str, text: str | None = None) -> None:
        self.path = path
        self._raw = text
        self._text: str | None = None
        self._braces: dict[int, int] | None = None
        self._lines: _LineIndex | None = None
        self._tokens: Tokens | None = None  # of the whole text, when a binding's call is read
        self._marshalled: dict[str, tuple[tuple[str, str], ...]] | None = None

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
        `PYBIND11_MODULE` block or in a function handed the module), the ops of its
        `TORCH_LIBRARY*` blocks, and those of functions handed a library (`registrar`)."""
        raw = self.raw
        pybind = "PYBIND11_MODULE" in raw or "::module" in raw
        if not pybind and "TORCH_LIBRARY" not in raw and "Library" not in raw:
            return []
        if self.header and "::module" not in raw:
            return []  # a header binds only through a function handed the module
        text = self.text
        module = "TORCH_EXTENSION_NAME"
        variables: set[str] = set()
        for match in _MODULE.finditer(text):
            if match.group(1) == "PYBIND11_MODULE":
                module = match.group(2)
                variables.add(match.group(4) or match.group(3))
        # (start, end, variable, namespace or "", registrar or "")
        blocks = [(start, end, var, ns, "") for start, end, var, ns in self._library_blocks()]
        if "Library" in raw:
            for match in _LIBRARY_FUNCTION.finditer(text):
                end = self.braces.get(match.end() - 1)
                if end is not None and (not blocks or match.end() > blocks[-1][1]):
                    blocks.append((match.end(), end, match.group(2), "", match.group(1)))
            blocks.sort()
        variables.update(_MODULE_VARIABLE.findall(text))
        found: list[Binding] = []
        starts = [block[0] for block in blocks]
        for definition in _DEFINITION.finditer(text):
            var, verb, name = definition.groups()
            at = definition.start()
            inside = bisect.bisect_right(starts, at) - 1
            if inside >= 0 and at < blocks[inside][1] and blocks[inside][2] == var:
                _, _, _, namespace, registrar = blocks[inside]
                binding = self._binding(definition, "op", namespace)
                found.append(replace(binding, registrar=registrar) if registrar else binding)
            if verb == "def" and var in variables:
                found.append(self._binding(definition, "pybind", module))
        return found

    def _library_blocks(self) -> list[tuple[int, int, str, str]]:
        """(body start, body end, variable, namespace) of each `TORCH_LIBRARY*` block."""
        if "TORCH_LIBRARY" not in self.raw:
            return []
        blocks: list[tuple[int, int, str, str]] = []
        for match in _MODULE.finditer(self.text):
            if match.group(1) == "PYBIND11_MODULE":
                continue
            end = self.braces.get(match.end() - 1)
            # Blocks do not nest (each is a function): one inside another is not read twice.
            if end is not None and (not blocks or match.end() > blocks[-1][1]):
                blocks.append((match.end(), end, match.group(4) or match.group(3), match.group(2)))
        return blocks

    def library_handoffs(self) -> dict[str, str]:
        """Function -> namespace, for each function a `TORCH_LIBRARY*` block hands its variable
        (`TORCH_LIBRARY_IMPL(gsplat, CUDA, m) { gsplat::register_ops(m); }`)."""
        found: dict[str, str] = {}
        for start, end, var, namespace in self._library_blocks():
            call = re.compile(rf"(\w+)\s*\(\s*{re.escape(var)}\s*\)")
            for match in call.finditer(self.text, start, end):
                found.setdefault(match.group(1), namespace)
        return found

    def marshalled(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Struct type -> its fields (type, name) in the order a marshalling specialization
        of this file flattens them into an op's arguments (`return to_torch_args(g.a, g.b)`)."""
        if self._marshalled is not None:
            return self._marshalled
        found: dict[str, tuple[tuple[str, str], ...]] = {}
        self._marshalled = found
        raw = self.raw
        if "struct" not in raw or "<" not in raw:
            return found
        text = self.text
        for match in _SPECIALIZATION.finditer(text):
            end = self.braces.get(match.end() - 1)
            if end is None:
                continue
            kind = match.group(1).rsplit("::", 1)[-1]
            names = _flattened_fields(text[match.end() : end], kind)
            if names and kind not in found:
                declared = self._struct_fields(kind)
                found[kind] = tuple((declared.get(name, ""), name) for name in names)
        return found

    def _struct_fields(self, kind: str) -> dict[str, str]:
        """Field name -> its type, from `struct kind { ... };` in this file."""
        text = self.text
        for match in _STRUCT.finditer(text):
            if match.group(1) != kind:
                continue
            end = self.braces.get(match.end() - 1)
            if end is None:
                continue
            fields: dict[str, str] = {}
            for statement in text[match.end() : end].split(";"):
                part = statement.split("=", 1)[0].strip()
                if not part or "(" in part or part.startswith(("static", "using", "//")):
                    continue
                words = re.findall(r"[A-Za-z_]\w*", part)
                if len(words) > 1:
                    fields[words[-1]] = part[: part.rfind(words[-1])].strip()
            return fields
        return {}

    def _arguments(self, opened: int) -> list[str]:
        """The argument texts of the call whose `(` is at offset `opened` ([] when it is not
        closed): read from the file's tokens, whose brackets are matched once."""
        if self._tokens is None:
            self._tokens = Tokens(self.text)
        tokens = self._tokens
        index = bisect.bisect_left(tokens.start, opened)
        if tokens.at(index) != "(" or tokens.match[index] < 0:
            return []
        return [
            self.text[tokens.start[first] : tokens.start[last] + len(tokens.text[last])]
            if first <= last
            else ""
            for first, last in tokens.arguments(index)
        ]

    def _binding(self, definition: re.Match[str], kind: str, module: str) -> Binding:
        """The binding a `var.def("name", target)` / `var.impl(...)` match makes."""
        name = definition.group(3)
        args = self._arguments(self.text.index("(", definition.start()))
        target = ""
        if len(args) > 1:
            expression = args[1].strip()
            chosen = _POINTER_TARGET.search(expression) or _named(expression)
            if chosen is not None and not expression.startswith(("[", '"')):
                target = chosen.group(1).rsplit("::", 1)[-1]
                if target in ("py", "torch", "c10", "pybind11"):
                    target = ""
        schema = ""
        if kind == "op":
            schema = name if "(" in name else ""
            name = name.split("(", 1)[0].split(".", 1)[0].rsplit("::", 1)[-1]
        return Binding(kind, module, name, target, self.line(definition.start()), schema)

    def functions(self, name: str, flat: bool = False) -> list[Function]:
        """Every definition of a function called `name` in this file. `flat`: as an op's
        dispatcher calls it, a struct parameter that this file marshals (`marshalled`) taking
        one argument per field, each read as the name `param<FIELD>field`."""
        if not name or name not in self.raw:
            return []
        text = self.text
        fields = self.marshalled() if flat else {}
        found: list[Function] = []
        covered = 0  # C++ has no nested functions: inside a definition, `name(...) {` is not one
        at = text.find(name)
        while at != -1:
            before = text[at - 1 : at]
            plain = at >= covered and not (before.isalnum() or before == "_")
            header = _header(text, at, len(name)) if plain else None
            if header is not None:
                params, opened = header
                end = self.braces.get(opened)
                if end is not None and end - opened <= _MAX_BODY:
                    body = text[opened:end]
                    found.append(self._function(name, at, params, body, opened, fields))
                    covered = end
            at = text.find(name, at + 1)
        return found

    def _function(
        self,
        name: str,
        at: int,
        header: str,
        body: str,
        start: int,
        fields: dict[str, tuple[tuple[str, str], ...]] | None = None,
    ) -> Function:
        params = _parameters(header)
        if fields:
            params, body = _flatten(params, body, fields)
        names = tuple(pname for _, pname in params)
        tensors = tuple(i for i, (kind, pname) in enumerate(params) if _is_tensor(kind) and pname)
        pointers = [i for i, (kind, pname) in enumerate(params) if pname and _is_pointer(kind)]
        line = self.line(at)
        if not tensors and not pointers:
            return Function(name, line, names, (), (), ())
        reader = Reader(body)

        def located(offset: int) -> int:
            return self.line(start + offset)

        accesses: list[Access] = []
        calls: list[tuple[int, str, int]] = []
        given: list[tuple[int, str, int]] = []
        handed: list[tuple[int, str, int, int, str]] = []
        for index in tensors:
            access, passes, macros = reader.tensor(names[index])
            accesses.append(access.located(located))
            given.extend((index, macro, located(offset)) for macro, offset in macros)
            for handed_on in passes:
                if handed_on.kind == "tensor":
                    calls.append((index, handed_on.callee, handed_on.position))
                else:
                    where = located(handed_on.offset)
                    handed.append(
                        (index, handed_on.callee, handed_on.position, where, handed_on.kind)
                    )
        written: list[tuple[int, int]] = []
        readonly: list[int] = []
        for index in pointers:
            kind = params[index][0]
            const = _points_to_const(kind)
            if const:
                readonly.append(index)
                continue
            offset, passes = reader.pointer(names[index], const, "ccessor" in kind)
            written.append((index, located(offset) if offset is not None else 0))
            handed.extend((index, p.callee, p.position, located(p.offset), p.kind) for p in passes)
        return Function(
            name,
            line,
            names,
            tensors,
            tuple((a.how, a.evidence or 0) for a in accesses),
            tuple(calls),
            tuple(given),
            tuple(a.writes or 0 for a in accesses),
            tuple(accesses),
            tuple(handed),
            tuple(written),
            tuple(readonly),
        )


def _flattened_fields(body: str, kind: str) -> tuple[str, ...]:
    """The fields a marshalling specialization's `to(const kind& g)` returns, in order
    (`return to_torch_args(g.renders, g.alphas);`); () when it returns anything else."""
    param = re.search(rf"\(\s*const\s+(?:[\w:]*::)?{re.escape(kind)}\s*&\s*(\w+)\s*\)", body)
    if param is None:
        return ()
    returned = re.search(r"\breturn\s+[\w:]+\s*\(([^;{}]*)\)\s*;", body[param.end() :])
    if returned is None:
        return ()
    field = re.compile(rf"^\s*{re.escape(param.group(1))}\s*\.\s*(\w+)\s*$")
    names: list[str] = []
    for argument in returned.group(1).split(","):
        matched = field.match(argument)
        if matched is None:
            return ()  # a computed value: the flattening is not what the text shows
        names.append(matched.group(1))
    return tuple(names)


def _flatten(
    params: list[tuple[str, str]], body: str, fields: dict[str, tuple[tuple[str, str], ...]]
) -> tuple[list[tuple[str, str]], str]:
    """Struct parameters of a marshalled type become one parameter per field, and the body
    reads `grad.renders` as the name `grad<FIELD>renders` (same length: offsets stay)."""
    out: list[tuple[str, str]] = []
    for kind, name in params:
        words = [w for w in re.findall(r"[A-Za-z_]\w*", kind) if w not in ("const", "struct")]
        members = fields.get(words[-1]) if name and words else None
        if not members:
            out.append((kind, name))
            continue
        out.extend((member_kind, f"{name}{FIELD}{member}") for member_kind, member in members)
        access = re.compile(
            rf"(?<![\w.>]){re.escape(name)}(\s*)\.(\s*)({'|'.join(m for _, m in members)})\b"
        )
        body = access.sub(rf"{name}{FIELD}\3\1\2", body)
    return out, body


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
    return (
        "Tensor" in kind
        and "TensorList" not in kind
        and "vector" not in kind
        and ("ccessor" not in kind and "*" not in kind)
    )


def _is_pointer(kind: str) -> bool:
    """A pointer or an accessor parameter (what a kernel is handed)."""
    return "*" in kind or "ccessor" in kind


def _points_to_const(kind: str) -> bool:
    """`const float* g`, `float const* g`, `PackedTensorAccessor32<const float, 2>`: nothing is
    written through it (`float* const g` is a const pointer to writable floats)."""
    if "*" in kind:
        words = kind[: kind.index("*")].replace("<", " ").replace(",", " ").split()
        return "const" in words
    inside = kind.split("<", 1)[1] if "<" in kind else ""
    return inside.lstrip().startswith("const ")


def _header(text: str, at: int, length: int) -> tuple[str, int] | None:
    """(parameters, offset of the body's `{`) when `name(...)` at `at` opens a definition:
    `name(params) const noexcept -> type {`, parameters holding at most one level of
    parentheses and no `;{}`. A hand scan: one pass over what it reads."""
    index = _skip_blanks(text, at + length)
    if text[index : index + 1] != "(":
        return None
    opened = index
    depth = 0
    index += 1
    size = len(text)
    while index < size:
        char = text[index]
        if char == "(":
            if depth:
                return None
            depth = 1
        elif char == ")":
            if not depth:
                break
            depth = 0
        elif char in ";{}":
            return None
        index += 1
    else:
        return None
    params = text[opened + 1 : index]
    index = _skip_blanks(text, index + 1)
    for word in ("const", "noexcept"):
        if text.startswith(word, index):
            index = _skip_blanks(text, index + len(word))
    if text.startswith("->", index):
        index += 2
        while index < size and (text[index] in _RETURN_TYPE or text[index].isalnum()):
            index += 1
    return (params, index) if text[index : index + 1] == "{" else None


_RETURN_TYPE = frozenset(":<>,_ \t\r\n\f\v")


def _skip_blanks(text: str, index: int) -> int:
    size = len(text)
    while index < size and text[index].isspace():
        index += 1
    return index


def _named(expression: str) -> re.Match[str] | None:
    """`fn`, `ns::fn`, `fn<float>`, `TORCH_FN(fn)`: a function named as the whole expression
    (anything after the name must be template arguments or the closing parenthesis)."""
    found = _NAME_TARGET.match(expression)
    if found is None:
        return None
    rest = expression[found.end() :].strip()
    if rest.endswith(")"):
        rest = rest[:-1].rstrip()
    if rest and not (rest.startswith("<") and rest.endswith(">") and ";" not in rest):
        return None
    return found


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


def macro_checks(macro: str, macros: dict[str, str], depth: int = 0) -> bool:
    """Whether a macro (through the macros it expands to) checks contiguity."""
    body = macros.get(macro)
    if body is None or depth > 4:
        return False
    if "is_contiguous" in body:
        return True
    return any(macro_checks(inner, macros, depth + 1) for inner in re.findall(r"\b[A-Z]\w*", body))


# A brace, or a string literal to skip (an unterminated one ends with its line: requiring the
# closing quote would rescan the line from every escaped quote in it).
_BRACES = re.compile(r"[{}]|\"(?:[^\"\\\n]|\\.)*\"?")


def _matching_braces(text: str) -> dict[int, int]:
    """Offset of each `{` -> offset of its `}` (unbalanced ones are left out)."""
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for match in _BRACES.finditer(text):
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
