"""Pick, from the text alone, the statements of a file that can matter to a check.

CPython's `ast` of a whole 5,000-line module costs ~40 ms; this selection costs a few. The
string-aware scan in chunks.py finds statements; those holding a mark (a Function class, a
hook, an extension loader, a direct Function call, a module-scope import) are kept, large
defs and classes that merely contain a mark keep only their header and, recursively, the
statements of their body that hold one. Each mark here is a text-level twin of a criterion
of slicing.py's `ast` selection, and may match more than it (inside a string, say); it must
never match less, or a statement `ast` would have kept is lost. tests/test_slicing.py and the
corpus test hold the two selections equal.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left
from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..checks.reads import Reads
from ..checks.registry import EVERY_CHECK_READS
from ..settings import DEFAULT_LOADERS, HELPER_DEPTH
from ..text.bindings import Bindings
from ..text.functions import FUNCTION_ALIAS
from ..text.hierarchy import function_like
from ..text.marks import (
    alias_offsets,
    direct_call_offsets,
    holds_graph_call,
    instance_call_offsets,
    word_char,
)
from ..text.outline import module_imports
from ..text.statements import body_start, chunk_of, chunk_starts, class_members, is_bare_string
from .op_definitions import op_definition_chunks

_CLASS_DECL = re.compile(r"class[ \t]+(\w+)[ \t]*(\()?")
# A hook defined as a method, or bound as a class attribute (`__torch_function__ = impl`).
_HOOK_NAME = re.compile(r"__torch_(?:function|dispatch)__(?=[ \t]*(?:\(|=[^=]))")
_FUNCTION_ALIAS = re.compile(FUNCTION_ALIAS)
_IMPORT = re.compile(r"import[ \t\\(]")
_TRITON = re.compile(r"@[ \t]*triton\.")
_DEF_NAME = re.compile(r"\n(?:async[ \t]+)?def[ \t]+(\w+)")
_NOT_MODULE_SCOPE = re.compile(r"(?:@|def\b|async\b|class\b)")


def _class_decls(text: str) -> list[tuple[int, str, str]]:
    """(offset, name, bases up to the first `)`) of each `class Name(` or `class Name`. The
    `)` is found once per stretch of text: a pattern reading the bases up to `)` rescanned the
    rest of the file from every `class X(` that no `)` follows (quadratic)."""
    out: list[tuple[int, str, str]] = []
    close = -1  # the `)` that ends the bases last read (-2: there is none further on)
    for match in _CLASS_DECL.finditer(text):
        if match.start() < close:
            continue  # inside the bases before
        bases = ""
        if match.group(2) and close != -2:
            if close < match.end():
                close = text.find(")", match.end())
                close = -2 if close == -1 else close
            if close >= 0:
                bases = text[match.end() : close]
        out.append((match.start(), match.group(1), bases))
    return out


@functools.lru_cache(maxsize=8)
def _handler(ops: frozenset[str]) -> re.Pattern[str]:
    """A dispatch handler registered by decorator for one of `ops` (`@implements(aten.to...`)."""
    return re.compile(r"aten\.(?:" + "|".join(sorted(ops)) + r")\b")


def _commented(text: str, offset: int) -> bool:
    """Whether `offset` is on a line that starts with `#`: a comment, or text in a string;
    either way no hook, handler or loader the selector keeps. (Not for direct Function calls:
    the selector finds those from the text too.)"""
    return text[text.rfind("\n", 0, offset) + 1 : offset].lstrip(" \t\f").startswith("#")


def _at_line_start(text: str, offset: int) -> bool:
    return not text[text.rfind("\n", 0, offset) + 1 : offset].strip(" \t\f")


@functools.lru_cache(maxsize=8)
def _loader_calls(loaders: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """Calls whose last name matches a loader pattern's last component (`load(`): one pattern
    per name, each starting with a literal where it can (an alternation, or a leading
    lookbehind, makes `re` try every position of a 5 MB file)."""
    names = sorted({pattern.rsplit(".", 1)[-1] for pattern in loaders})
    return tuple(
        re.compile(
            "".join(r"\w*" if c == "*" else r"\w" if c == "?" else re.escape(c) for c in name)
            + r"[ \t]*\("
        )
        for name in names
    )


def _loader_offsets(text: str, loaders: tuple[str, ...]) -> list[int]:
    """Calls that may load an extension. As slicing's selector does, a callee whose head is
    bound by a module-scope import must resolve to a configured loader: `tl.load(` in a
    Triton kernel (triton.language.load) or `np.load(` is none. The imports are read from the
    text (outline.module_imports, as the project index reads them); a callee whose start is
    not plain (`f().load(`, a chain broken over lines) is kept."""
    out: list[int] = []
    imports: Bindings | None = None
    for pattern in _loader_calls(loaders):
        for match in pattern.finditer(text):
            at = match.start()
            if word_char(text[at - 1 : at]) or _commented(text, at):
                continue
            callee = _callee_before(text, at, text.find("(", at))
            if callee is not None:
                if imports is None:
                    imports = Bindings(module_imports(text.encode("utf-8", "surrogatepass")))
                if imports.is_imported(callee.partition(".")[0]) and not any(
                    fnmatchcase(imports.resolve_dotted(callee), p) for p in loaders
                ):
                    continue
            out.append(at)
    return out


def _callee_before(text: str, at: int, end: int) -> str | None:
    """The dotted callee ending in the name at `at` (`tl.load`), or None when it does not
    start plainly: after `)` or `]`, a `.` before spaces, or at a line start after a line
    that ends with `.` or may hide one in a comment."""
    start = at
    while start > 0 and (word_char(text[start - 1]) or text[start - 1] == "."):
        start -= 1
    callee = text[start:end].rstrip(" \t")
    before = start
    while before > 0 and text[before - 1] in " \t":
        before -= 1
    if text[before - 1 : before] in ("\n", "\r"):
        # A line start inside brackets (`(\n    tl.load(...)`): plain when the line before
        # holds code ending in no `.` or `\` and no comment that could hide one.
        end_before = before - 1 - (text[before - 2 : before] == "\r\n")
        previous = text[text.rfind("\n", 0, end_before) + 1 : end_before].rstrip(" \t\r")
        if not previous.strip() or "#" in previous or previous.endswith((".", "\\")):
            return None
    elif before == 0 or text[before - 1] in ".)]\\":
        return None
    if any(not part.isidentifier() for part in callee.split(".")):
        return None
    return callee


# A def or class larger than this (in characters) that merely holds something of interest is
# split into its own statements, and so on down to _MAX_DEPTH levels.
_BIG = 4000
_MAX_DEPTH = 4


@dataclass
class _Marks:
    """Offsets in the text of what makes a statement worth parsing, sorted."""

    functions: list[int]  # class statements of Function classes
    others: list[int]  # hooks, direct Function calls, extension loaders
    imports: list[int]
    calls: list[int]  # direct Function calls (also in `others`)

    def within(self, start: int, end: int) -> list[int]:
        return [
            offset
            for found in (self.functions, self.others, self.imports)
            for offset in found[bisect_left(found, start) : bisect_left(found, end)]
        ]


def kept_ranges(
    text: str,
    starts: list[int],
    known_functions: frozenset[str],
    loaders: tuple[str, ...] = DEFAULT_LOADERS,
    reads: Reads | None = None,
) -> list[tuple[int, int]] | None:
    """The (start, end) offsets of the statements a check may read, in order, found from the
    text; None when nothing in it can matter. Top-level statements (whose chunks begin at
    `starts`) are kept whole, except large defs and classes that merely contain something of
    interest: those keep their header and, recursively, the statements of their body that do.
    `reads`: what the enabled checks read (checks/reads.py); None: what every check reads."""
    reads = EVERY_CHECK_READS if reads is None else reads
    decls = [decl for decl in _class_decls(text) if _at_line_start(text, decl[0])]
    names: set[str] = set()
    if reads.function_names:
        # The same rule as slicing's _function_like_names, over the class statements' text (a
        # keyword base such as `metaclass=...` counts by its name: more is kept, never less).
        names = function_like(
            (
                (name, [base.split("=", 1)[0].strip() for base in bases.split(",")])
                for _, name, bases in decls
            ),
            set(known_functions) | set(_FUNCTION_ALIAS.findall(text)),
        )
    function_offsets: list[int] = []
    if reads.functions:
        function_offsets = [offset for offset, name, _ in decls if name in names]
    hook_offsets: list[int] = []
    if reads.overrides:
        hook_offsets = [
            m.start() for m in _HOOK_NAME.finditer(text) if not _commented(text, m.start())
        ]
    if reads.handler_ops:
        # Anywhere, not only on an `@` line: a decorator's arguments may span lines. The ast
        # side keeps only the defs a decorator registers; a mark elsewhere only keeps more.
        hook_offsets += [
            m.start()
            for m in _handler(reads.handler_ops).finditer(text)
            if not _commented(text, m.start())
        ]
    tails = reads.call_tails + ((".apply(",) if reads.apply_arity else ())
    # on Functions of this file or imported ones
    calls = direct_call_offsets(text, names, tails) if tails else []
    if "()(" in reads.call_tails:  # the legacy `Fn(k)(x)`, `f = Fn(k); f(x)`
        calls += instance_call_offsets(text, names)
    if tails:
        calls += alias_offsets(text, names)  # and through a name bound to `Fn.apply`
    custom_ops: set[int] = set()
    if reads.custom_ops and "register_autograd" in text:
        custom_ops = _custom_op_chunks(text, starts)
    if reads.op_definitions:
        custom_ops |= op_definition_chunks(text, starts)
    if reads.functions and ("FunctionCtx" in text or "BackwardCFunction" in text):
        custom_ops |= _ctx_step_chunks(text, starts)  # backward steps written apart
    if not function_offsets and not hook_offsets and not calls and not custom_ops:
        return None
    loader_offsets = _loader_offsets(text, loaders) if reads.functions else []
    marks = _Marks(
        function_offsets,
        sorted(hook_offsets + calls + loader_offsets),
        [m.start() for m in _IMPORT.finditer(text)],
        sorted(calls),
    )
    bounds = [*starts, len(text)]
    keep = {
        index
        for index in chunk_of(starts, marks.functions) | chunk_of(starts, marks.others)
        if not _inert(text, bounds[index], bounds[index + 1], marks)
    }
    whole: set[int] = set()  # chunks that must stay whole (Functions' helper functions)
    top_classes = {name: offset for offset, name, _ in decls if text[offset - 1 : offset] in "\n"}
    # Helpers are followed from top-level Function classes only, as slicing's _function_uses
    # does: a class that merely holds a nested Function (a test case) is no caller, or its
    # own `Case.` references would keep the whole class.
    callers = chunk_of(starts, [at for at in marks.functions if text[at - 1 : at] in "\n"])
    helpers: dict[int, set[str]] = {}  # helper class -> the names called on it
    for index in callers:
        start, end = bounds[index], bounds[index + 1]
        for used, offset in top_classes.items():
            # `Helpers.` as a whole word: str.find per class runs at memory speed, where a
            # `(\w+)\.` pattern (no literal to start from) tries every position of the class.
            called = _attributes_used(text, used + ".", start, end)
            if called:
                (helper,) = chunk_of(starts, [offset])
                helpers[helper] = helpers.get(helper, set()) | called
    whole |= _helper_chunks(text, starts, bounds, callers)
    whole |= custom_ops
    keep |= whole | helpers.keys()
    for index in chunk_of(starts, marks.imports):
        if not _NOT_MODULE_SCOPE.match(text, starts[index]) and not _inert(
            text, bounds[index], bounds[index + 1], marks
        ):
            keep.add(index)  # module-scope imports (inside if/try at top level too)
    ranges: list[tuple[int, int]] = []
    for index in sorted(keep):
        start, end = bounds[index], bounds[index + 1]
        if index in whole:
            ranges.append((start, end))
        elif index in helpers:
            ranges.extend(_helper_class(text, start, end, helpers[index], marks))
        else:
            ranges.extend(_refine(text, start, end, marks, 0))
    return ranges or None


_REGISTER = re.compile(r"register_autograd[ \t]*\(")
_WORD = re.compile(r"[A-Za-z_]\w*|::")
_OP_NAME = re.compile(r"""["']([\w.]+::[\w.]+)["']""")


def _custom_op_chunks(text: str, starts: list[int]) -> set[int]:
    """Module-level `register_autograd(...)` statements, the defs they name, and the op's own
    def (named by the receiver, or by its `"ns::op"` string): slicing's `custom_op_spans` is
    the `ast` twin (this may keep more, never less)."""
    bounds = [*starts, len(text)]
    calls = chunk_of(starts, [m.start() for m in _REGISTER.finditer(text)])
    handed = _handed_class_chunks(text, starts)
    calls = {i for i in calls if not _NOT_MODULE_SCOPE.match(text, bounds[i])}
    if not calls:
        return handed
    words: set[str] = set()
    literals: set[str] = set()
    for index in calls:
        chunk = text[bounds[index] : bounds[index + 1]]
        words.update(_WORD.findall(chunk))
        literals.update(_OP_NAME.findall(chunk))
    named = [m.start() + 1 for m in _DEF_NAME.finditer(text) if m.group(1) in words]
    named += [m.start() for literal in literals for m in re.finditer(re.escape(literal), text)]
    kept = {i for i in chunk_of(starts, named) if _NOT_MODULE_SCOPE.match(text, bounds[i])}
    return calls | kept | handed


_CLASS_HEADER = re.compile(r"\nclass[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?")


def _handed_class_chunks(text: str, starts: list[int]) -> set[int]:
    """Module-level defs holding a `register_autograd(` call and a `.backward`, the chunks
    calling them, and the classes named in those calls' arguments with their bases: slicing's
    `_handed_class_spans` is the `ast` twin (this may keep more, never less)."""
    bounds = [*starts, len(text)]
    defs = {
        index
        for index in chunk_of(starts, [m.start() for m in _REGISTER.finditer(text)])
        if text.startswith(("def ", "async def ", "@"), bounds[index])
        and ".backward" in text[bounds[index] : bounds[index + 1]]
    }
    if not defs:
        return set()
    names = {
        m.group(1) for m in _DEF_NAME.finditer(text) if chunk_of(starts, [m.start() + 1]) & defs
    }
    names |= {
        m.group(1)
        for index in defs
        if (
            m := re.match(r"(?:@[^\n]*\n\s*)*(?:async[ \t]+)?def[ \t]+(\w+)", text[bounds[index] :])
        )
    }
    if not names:
        return defs
    pattern = re.compile(
        r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")[ \t]*\(([^()]*)\)"
    )
    callers = [m for m in pattern.finditer(text)]
    words = {word for m in callers for word in _WORD.findall(m.group(1))}
    headers = {m.group(1): (m.start() + 1, m.group(2) or "") for m in _CLASS_HEADER.finditer(text)}
    frontier = words & headers.keys()
    reached: set[str] = set()
    while frontier:  # a hook class may inherit its backward from a base of the file
        reached |= frontier
        frontier = {
            word for name in frontier for word in _WORD.findall(headers[name][1])
        } & headers.keys() - reached
    offsets = [m.start() for m in callers] + [headers[name][0] for name in reached]
    return defs | chunk_of(starts, offsets)


def _ctx_step_chunks(text: str, starts: list[int]) -> set[int]:
    """Module-level defs that name `FunctionCtx` and read `.saved_tensors`: slicing's
    `ctx_step_spans` is the `ast` twin (this may keep more, never less)."""
    bounds = [*starts, len(text)]
    marks = [m.start() for m in re.finditer(r"FunctionCtx|BackwardCFunction", text)]
    return {
        index
        for index in chunk_of(starts, marks)
        if text.startswith(("def ", "async def ", "@"), bounds[index])
        and ".saved_tensors" in text[bounds[index] : bounds[index + 1]]
    }


def _helper_chunks(text: str, starts: list[int], bounds: list[int], callers: set[int]) -> set[int]:
    """Module-level functions the Functions call (`_recompute(fn, x, g)`), and the ones those
    call, HELPER_DEPTH calls deep, that hold a graph call or call one that does: the checks
    follow backward into them (slicing's `_function_uses` is the `ast` twin)."""
    top_defs: dict[str, list[int]] = {}  # a name may be defined more than once (@overload)
    for match in _DEF_NAME.finditer(text):
        top_defs.setdefault(match.group(1), []).append(match.start() + 1)
    reached: set[int] = set()
    frontier = callers
    for _ in range(HELPER_DEPTH):
        spans = [(bounds[i], bounds[i + 1]) for i in frontier]
        offsets = [
            at
            for name, defined in top_defs.items()
            if any(_calls(text, name, start, end) for start, end in spans)
            for at in defined
        ]
        frontier = chunk_of(starts, sorted(offsets)) - reached
        if not frontier:
            break
        reached |= frontier
    if not reached:
        return reached
    kept = {i for i in reached if holds_graph_call(text[bounds[i] : bounds[i + 1]])}
    names = {name for name, defined in top_defs.items() if chunk_of(starts, defined) & kept}
    return kept | {
        i
        for i in reached - kept
        if any(_calls(text, name, bounds[i], bounds[i + 1]) for name in names)
    }


# After the dot of an attribute, Python allows only blanks, line breaks inside brackets, line
# continuations and comments before the name (possessive: no backtracking over long comments).
_ATTRIBUTE = re.compile(r"(?:[ \t\f\r\n\\]++|\#[^\n]*+)*+(\w+)")


def _attributes_used(text: str, prefix: str, start: int, end: int) -> set[str]:
    """The names text[start:end] may read off `prefix` (`Helpers.` starting a word: `prepare`
    for `Helpers.prepare(x)`). Text in strings and comments may add names (`a Helpers. Then`),
    never take one away: every attribute the code reads is among them."""
    names: set[str] = set()
    at = text.find(prefix, start, end)
    while at != -1:
        if not word_char(text[at - 1 : at]):
            attribute = _ATTRIBUTE.match(text, at + len(prefix), end)
            if attribute is not None:
                names.add(attribute.group(1))
        at = text.find(prefix, at + 1, end)
    return names


def _helper_class(
    text: str, start: int, end: int, names: set[str], marks: _Marks
) -> list[tuple[int, int]]:
    """A class whose methods the Functions call (`Helpers.prepare(x)`): its header and the
    defs of those names, and what its other statements hold that a check reads (as in
    `_refine`). slicing's `_helper_ranges` keeps the named static methods only: this may
    keep more, never less; a statement the text leaves in doubt is kept."""
    body = _split_body(text, start, end, marks, 0)
    if body is None:
        return [(start, end)]
    offset, indent = body
    members = class_members(text, offset, end, indent)
    marked = chunk_of([first for first, _last, _name in members], marks.within(offset, end))
    out = [(start, offset)]
    for index, (inner_start, inner_end, name) in enumerate(members):
        if name is None or name in names:
            out.append((inner_start, inner_end))
        elif index in marked:
            out.extend(_member(text, inner_start, inner_end, indent, marks, 1))
    return out if len(out) > 1 else []


def _calls(text: str, name: str, start: int, end: int) -> bool:
    """Whether text[start:end] has `name(` (or `name (`) with `name` a whole word; str.find runs
    at memory speed where a pattern without a literal prefix tries every position."""
    at = text.find(name, start, end)
    while at != -1:
        after = at + len(name)
        while after < end and text[after] in " \t":
            after += 1
        if after < end and text[after] == "(" and not word_char(text[at - 1 : at]):
            return True
        at = text.find(name, at + 1, end)
    return False


def _refine(text: str, start: int, end: int, marks: _Marks, depth: int) -> list[tuple[int, int]]:
    """One statement's kept ranges: itself, or its header and the body statements that hold a
    mark (a Function class is always kept whole: every check reads all of it), or nothing
    when the only marks in its body are ones no check reads (local imports, docstrings)."""
    body = _split_body(text, start, end, marks, depth)
    if body is None:
        return [(start, end)]
    offset, indent = body
    starts = chunk_starts(text, indent, offset, end)
    keep = chunk_of(starts, marks.within(offset, end))
    if not keep:
        return [(start, end)]
    bounds = [*starts, end]
    out = [(start, offset)]
    for index in sorted(keep):
        out.extend(_member(text, bounds[index], bounds[index + 1], indent, marks, depth + 1))
    # Its header alone would not parse; without a body statement worth reading, slicing's
    # selector keeps nothing of it either.
    return out if len(out) > 1 else []


def _split_body(
    text: str, start: int, end: int, marks: _Marks, depth: int
) -> tuple[int, str] | None:
    """Where the body of the large def or class text[start:end] starts, and its indentation,
    when its statements can be kept one by one; None when it is kept whole: small, deep,
    not readable from the text, or itself a Function class or a hook (checks read all of
    those)."""
    if end - start <= _BIG or depth >= _MAX_DEPTH:
        return None
    body = body_start(text, start, end)
    if body is None or not _only_imports(marks, start, body[0]):
        return None
    return body


def _member(
    text: str, start: int, end: int, indent: str, marks: _Marks, depth: int
) -> list[tuple[int, int]]:
    """What is kept of a body statement that holds a mark: nothing for imports local to a
    nested def or class (they bind nothing checked code sees) or a docstring."""
    if (
        _NOT_MODULE_SCOPE.match(text, start + len(indent)) and _only_imports(marks, start, end)
    ) or _inert(text, start, end, marks):
        return []
    return _refine(text, start, end, marks, depth)


def _inert(text: str, start: int, end: int, marks: _Marks) -> bool:
    """A docstring (a statement that is one string literal): the marks in it are text, not
    code. slicing's selector keeps such a statement only on a line with a direct Function
    call (found from the text too), so one holding such a call stays."""
    found = marks.calls[bisect_left(marks.calls, start) : bisect_left(marks.calls, end)]
    return not found and is_bare_string(text, start, end)


def _only_imports(marks: _Marks, start: int, end: int) -> bool:
    """Whether the only marks in text[start:end] are imports."""
    return not any(
        found[bisect_left(found, start) : bisect_left(found, end)]
        for found in (marks.functions, marks.others)
    )


def triton_kernels(text: str, starts: list[int]) -> set[str]:
    """Top-level defs with a `@triton.` decorator (jit, autotune, heuristics), from the text:
    a decorated def is one chunk, its decorators at column 0 before its `def` line."""
    bounds = [*starts, len(text)]
    names: set[str] = set()
    at_column_0 = [
        m.start() for m in _TRITON.finditer(text) if text[m.start() - 1 : m.start()] in "\n"
    ]
    for index in chunk_of(starts, at_column_0):
        found = _DEF_NAME.search(text, bounds[index], bounds[index + 1])
        if found is not None:
            names.add(found.group(1))
    return names
