"""What a file's bytes say without parsing: its class statements, the classes it imports under
another name, its direct `X.forward(` / `X()(` / `X.apply(` / `X(k)(` callees (all of them, for every file read), and
its module-scope imports (for the files the project index resolves through)."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from .bindings import Binding

ClassDecl = tuple[str, tuple[str, ...], bool]  # name, dotted bases as written, file has autograd
# No `^` anchor (it would defeat the literal-prefix search): the line start is checked by hand.
# The bases run to the first `)`, found with one `find` per stretch: `[^)]*\)` in the pattern
# rescanned the rest of the file from every `class X(` that no `)` follows (quadratic).
# `class X:` is read too (no bases): a mixin a Function of another file derives from.
_CLASS_RE = re.compile(rb"class[ \t]+(\w+)[ \t]*([(:])")


def class_declarations(data: bytes, autograd: bool | None = None) -> list[ClassDecl]:
    """The class statements of one file, from bytes: what the cross-file index is built from.
    `autograd`: whether the file says `autograd`, when the caller has looked already."""
    if b"class" not in data:
        return []
    if autograd is None:
        autograd = b"autograd" in data
    out: list[ClassDecl] = []
    carriage = b"\r" in data  # a lone \r ends a line too (old Mac files)
    close = -1  # the `)` that ends the bases of the last class statement read
    for match in _CLASS_RE.finditer(data):
        start = match.start()
        if start < close:
            continue  # inside the bases before: one match, as the text is read once
        bare = match.group(2) == b":"
        if not bare and close < match.end():
            close = data.find(b")", match.end())
            if close == -1:
                break  # no `)` after it: neither this nor any later one has its bases
        line_start = data.rfind(b"\n", 0, start) + 1
        if carriage:
            line_start = data.rfind(b"\r", line_start, start) + 1 or line_start
        if data[line_start:start].strip(b" \t\f"):  # a form feed may lead an indent
            continue  # `subclass Foo(...)` or `# a class Foo(...)`: not a class statement
        name = match.group(1).decode("ascii", "replace")
        if bare:
            out.append((name, (), autograd))
            continue
        bases = tuple(
            sorted(
                {
                    b"".join(b.split()).decode("ascii", "replace")
                    for b in data[match.end() : close].split(b",")
                    if b.strip() and b"=" not in b
                }
            )
        )
        out.append((name, bases, autograd))
    return out


_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# `X.forward(`, `X()(` and `X.apply(`, and `op = X.apply` (a name bound to one, then called)
_CALLS = (b".forward", b"()(", b".apply")
_IMPORT_ALIAS = re.compile(rb"(\w+)\s+as\s+(\w+)")


@dataclass(frozen=True)
class Outline:
    """What a file's bytes say about it, without parsing: its class statements, the classes it
    imports under another name (`from .base import Base as PublicBase`: the project index's
    filter must follow the rename), and the names it calls directly (`X.forward(`, `X()(`),
    which are wrong on an autograd Function."""

    decls: tuple[ClassDecl, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    callees: tuple[str, ...] = ()


def _word_before(data: bytes, end: int) -> str:
    start = end
    while start > 0 and data[start - 1] in _WORD:
        start -= 1
    return data[start:end].decode("ascii", "replace")


def _offsets(data: bytes, token: bytes) -> list[int]:
    """Where `token` occurs (bytes.find runs at memory speed; a regex that cannot start with
    a literal tries every byte)."""
    out: list[int] = []
    at = data.find(token)
    while at != -1:
        out.append(at)
        at = data.find(token, at + 1)
    return out


_IDENTIFIER = re.compile(rb"[A-Za-z_]\w*")
_HELD = re.compile(rb"=[ \t]*([A-Z]\w*)\(")  # starts at a literal: memory speed


def _opening(data: bytes, closing: int) -> int:
    """Where the `(` that the `)` at `closing` closes is (parentheses counted, a bounded walk
    back: a miss only loses a filter mark the tree would not confirm either way)."""
    depth = 0
    for index in range(closing, max(-1, closing - 4000), -1):
        char = data[index]
        if char == 0x29:  # ')'
            depth += 1
        elif char == 0x28:  # '('
            depth -= 1
            if depth == 0:
                return index
    return 0


def outline(data: bytes, decls: Sequence[ClassDecl] | None = None) -> Outline:
    callees = {_word_before(data, at) for token in _CALLS for at in _offsets(data, token)}
    # An instance made with arguments and called (the legacy `Fn(k, eps)(x)`), or held first
    # (`f = Fn(k)`): over-approximated, as a filter (AGL407 decides from the tree).
    callees.update(_word_before(data, _opening(data, at)) for at in _offsets(data, b")("))
    callees.update(m.group(1).decode("ascii", "replace") for m in _HELD.finditer(data))
    callees.discard("")
    aliases: set[tuple[str, str]] = set()
    for at in _offsets(data, b" as "):
        alias = _IDENTIFIER.match(data, at + 4)
        name = _word_before(data, at) if alias is not None else ""
        if name[:1].isupper():  # a class (or torch's `Function`) imported as another name
            aliases.add((name, alias.group().decode("ascii", "replace")))  # type: ignore[union-attr]
    return Outline(
        tuple(class_declarations(data) if decls is None else decls),
        tuple(sorted(aliases)),
        tuple(sorted(callees)),
    )


# `([\w.]+)`, not `(\.*[\w.]*)`: the dots twice, and an empty name let both blanks take one run.
_FROM = re.compile(rb"[ \t]*from[ \t]+([\w.]+)[ \t]+import\b")
_PLAIN = re.compile(rb"[ \t]*import\b")
_NAME = re.compile(rb"([\w.]+)(?:\s+as\s+(\w+))?")
_COMMENT = re.compile(rb"#[^\n]*")
# Blocks at column 0 whose body is still module scope.
_MODULE_BLOCK = re.compile(rb"(?:if|elif|else|try|except|finally|with)\b")


def module_imports(data: bytes) -> tuple[Binding, ...]:
    """Module-scope import bindings read from the bytes (statements at column 0, or inside a
    top-level if/try/with block), without `ast`: `("import", "a.b", asname)` or
    `("from", "..pkg", name, asname)`, in source order."""
    if b"import" not in data:
        return ()
    out: list[Binding] = []
    headers: list[int] | None = None  # column-0 statement starts, computed when needed
    seen_lines: set[int] = set()
    for at in _offsets(data, b"import"):
        line_start = data.rfind(b"\n", 0, at) + 1
        if line_start in seen_lines:
            continue
        match = _FROM.match(data, line_start) or _PLAIN.match(data, line_start)
        if match is None or match.end() < at:
            continue
        seen_lines.add(line_start)
        if data[line_start : line_start + 1] in (b" ", b"\t"):
            if headers is None:
                headers = [0, *(m.start() + 1 for m in _COLUMN_0.finditer(data))]
            header = headers[bisect_right(headers, line_start) - 1]
            if not _MODULE_BLOCK.match(data, header):
                continue  # inside a def or class: not module scope
        end = data.find(b"\n", match.end())
        end = len(data) if end == -1 else end
        rest = data[match.end() : end]
        if rest.lstrip().startswith(b"("):
            close = data.find(b")", match.end())
            rest = data[match.end() : len(data) if close == -1 else close]
        while rest.rstrip().endswith(b"\\") and end < len(data):  # backslash continuations
            nxt = data.find(b"\n", end + 1)
            nxt = len(data) if nxt == -1 else nxt
            rest = rest.rstrip()[:-1] + b" " + data[end + 1 : nxt]
            end = nxt
        rest = _COMMENT.sub(b"", rest.split(b";", 1)[0]).replace(b"(", b" ").replace(b")", b" ")
        is_from = match.re is _FROM
        base = match.group(1).decode("ascii", "replace") if is_from else ""
        for part in rest.split(b","):
            name = _NAME.search(part)
            if name is None:
                continue
            target = name.group(1).decode("ascii", "replace")
            alias = name.group(2).decode("ascii", "replace") if name.group(2) else None
            if is_from:
                if target != "*":
                    out.append(("from", base, target, alias))
            else:
                out.append(("import", target, alias))
    return tuple(out)


_COLUMN_0 = re.compile(rb"\n(?=[^\s#])")
