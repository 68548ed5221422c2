"""How a C/C++/CUDA function body uses one parameter, read by following the pointer: the aliases
of `data_ptr()` / `data<T>()` / accessors (`auto`, `T*`, `const T*`, casts), how each alias is
indexed (with the tensor's own strides, or densely), and what is written through it, wherever
in the text each of these appears."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

from .tokens import ASSIGNMENTS, FORWARD_LIMIT, STEPS, Tokens, is_check, is_macro

# How a compiled function reads a tensor parameter. Ordered from harmless to harmful: a merge
# of several implementations keeps the worst.
GUARDED = "guarded"  # made contiguous first (`.contiguous()`), and read only through that
STRIDED = "strided"  # read through its own strides or accessors
CHECKED = "checked"  # its contiguity is checked: a non-contiguous gradient raises
UNKNOWN = "unknown"  # the text does not say (or the source is not there)
RAW = "raw"  # read through `data_ptr()` / `data<T>()` with dense indexing: the silent bug
RANK = {GUARDED: 0, STRIDED: 0, CHECKED: 1, UNKNOWN: 2, RAW: 3}
SAFE = frozenset({GUARDED, STRIDED})

_POINTER_METHODS = frozenset(
    {"data_ptr", "data", "const_data_ptr", "mutable_data_ptr", "const_data", "mutable_data"}
)
_MUTABLE_METHODS = frozenset({"mutable_data_ptr", "mutable_data"})  # asked for to write
_ACCESSORS = frozenset(
    {"accessor", "packed_accessor", "packed_accessor32", "packed_accessor64",
     "generic_packed_accessor", "mutable_accessor", "mutable_packed_accessor32",
     "mutable_packed_accessor64"}
)  # fmt: skip
_GUARDS = frozenset({"contiguous", "expect_contiguous"})
_UNWRAPS = frozenset({"value"})  # `c10::optional<at::Tensor>` / `std::optional`: the tensor
_STRIDES = frozenset({"stride", "strides"})
_CASTS = frozenset({"static_cast", "reinterpret_cast", "const_cast"})
_NOT_CASTS = frozenset({"if", "while", "for", "switch", "catch", "sizeof"})
# Library calls that write through one of their arguments: the positions written.
_DESTINATIONS: dict[str, frozenset[int]] = {
    **dict.fromkeys(
        ("memcpy", "memmove", "memset", "cudaMemcpy", "cudaMemcpyAsync", "cudaMemset",
         "cudaMemsetAsync", "cudaMemcpy2D", "cudaMemcpy2DAsync", "hipMemcpy", "hipMemcpyAsync",
         "hipMemset", "hipMemsetAsync", "fill", "fill_n", "atomicAdd", "atomicSub",
         "atomicExch", "atomicMax", "atomicMin", "atomicCAS", "gpuAtomicAdd", "fastAtomicAdd",
         "gpuAtomicAddNoReturn"),
        frozenset({0}),
    ),
    **dict.fromkeys(("copy", "copy_n", "copy_backward", "transform"), frozenset({2})),
}  # fmt: skip
# TensorIterator: an output is written, an input is read through its strides.
_ITERATOR_OUTPUTS = frozenset({"add_output", "add_owned_output", "add_borrowed_output"})
_ITERATOR_INPUTS = frozenset(
    {"add_input", "add_owned_input", "add_const_input", "add_borrowed_input", "getTensorInfo"}
)
_LIBRARIES = ("at::", "torch::", "std::", "c10::")  # never the project's code: not followed
_MAX_ALIASES = 64  # names one parameter is followed through (a pathological body stops here)


@dataclass(frozen=True)
class Access:
    """What a body does with one tensor parameter: where (an offset in the body, or a line
    once located) each kind of evidence first appears; None where there is none."""

    raw: int | None = None  # read through a pointer with dense indexing
    strided: int | None = None  # read through its own strides, or an accessor
    contiguous: int | None = None  # made contiguous (`.contiguous()`) before it is read
    checked: int | None = None  # its contiguity is checked (TORCH_CHECK, assert)
    writes: int | None = None  # written: in place, or through a pointer or accessor

    @property
    def how(self) -> str:
        """The verdict: a dense read decides unless a check stops it first."""
        if self.raw is not None:
            return CHECKED if self.checked is not None else RAW
        if self.strided is not None:
            return STRIDED
        if self.contiguous is not None:
            # `ASSERT(mat2.is_contiguous())` and only then `mat2.contiguous()` (Minkowski's
            # coo_spmm): the check raises on a non-contiguous tensor before the copy is made
            early = self.checked is not None and self.checked < self.contiguous
            return CHECKED if early else GUARDED
        if self.checked is not None:
            return CHECKED
        return UNKNOWN

    @property
    def evidence(self) -> int | None:
        """Where the verdict's evidence is."""
        how = self.how
        if how == CHECKED:
            return self.checked
        return {RAW: self.raw, STRIDED: self.strided, GUARDED: self.contiguous}.get(how)

    def located(self, line: Callable[[int], int]) -> Access:
        """The same with offsets turned into lines."""
        changes = {
            f.name: line(getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) is not None
        }
        return replace(self, **changes)


@dataclass(frozen=True)
class Pass:
    """The parameter (or a pointer into it) handed to another function."""

    callee: str  # unqualified
    position: int
    offset: int
    kind: str  # "tensor": the tensor itself; "guarded": a contiguous copy; "pointer": writable


@dataclass
class _Pointer:
    const: bool  # points to const: nothing is written through it
    accessor: bool = False  # an accessor: indexed by the tensor's strides
    guarded: bool = False  # into a contiguous copy: how it is indexed says nothing
    origin: int = -1  # the token where it was taken (`g.data_ptr<float>()`): the evidence


@dataclass
class _Found:
    """Evidence as it is collected (the first offset of each kind)."""

    access: dict[str, int] = field(default_factory=dict)
    passes: list[Pass] = field(default_factory=list)
    macros: list[tuple[str, int]] = field(default_factory=list)

    def note(self, kind: str, offset: int) -> None:
        if kind not in self.access or offset < self.access[kind]:
            self.access[kind] = offset


class Reader:
    """One body, tokenized once, asked about each parameter."""

    def __init__(self, body: str) -> None:
        self.tokens = Tokens(body)

    def tensor(self, name: str) -> tuple[Access, list[Pass], list[tuple[str, int]]]:
        """How parameter `name` (a tensor) is used: the evidence, the calls it is handed to,
        and the upper-case macros it is given (`CHECK_INPUT(grad)`)."""
        use = _TensorUse(self.tokens, name)
        use.run()
        found = use.found
        return Access(**found.access), found.passes, found.macros

    def pointer(self, name: str, const: bool, accessor: bool) -> tuple[int | None, list[Pass]]:
        """Where a pointer (or accessor) parameter is written through, and the calls a
        writable pointer into it is handed to."""
        use = _PointerUse(self.tokens, reads=False)
        pointer = _Pointer(const=const, accessor=accessor)
        for index in self.tokens.occurrences(name):
            use.use(index, index, pointer, 0, [])
        return use.found.access.get("writes"), use.found.passes


class _PointerUse:
    """Follows pointers and accessors: their element reads, writes, aliases and calls."""

    def __init__(self, tokens: Tokens, reads: bool) -> None:
        self.t = tokens
        self.reads = reads
        self.found = _Found()
        self.followed: set[str] = set()
        self.stride_at: list[int] = []  # sorted token indices that carry the tensor's strides
        # Those that carry the strides it came with (read before any `g = g.contiguous()`).
        self.original_stride_at: list[int] = []
        self.stride_reads: list[int] = []  # `g.stride(0)` outside a check: the strides are used
        # Token ranges of the branches taken only when the tensor is contiguous.
        self.contiguous_branches: list[tuple[int, int]] = []
        self._branch_depth: list[int] | None = None

    # --- what a site says -------------------------------------------------------------------
    def has_stride(self, first: int, last: int) -> bool:
        import bisect

        at = bisect.bisect_left(self.stride_at, first)
        return at < len(self.stride_at) and self.stride_at[at] <= last

    def has_original_stride(self, first: int, last: int) -> bool:
        import bisect

        at = bisect.bisect_left(self.original_stride_at, first)
        return at < len(self.original_stride_at) and self.original_stride_at[at] <= last

    def _site(self, pointer: _Pointer, index: int, strided: bool) -> None:
        if not self.reads or pointer.guarded:
            return
        offset = self.t.start[pointer.origin if pointer.origin >= 0 else index]
        if not (strided or pointer.accessor) and self._in_contiguous_branch(index):
            self.found.note("contiguous", offset)  # `if (g.is_contiguous()) { memcpy(...) }`
            return
        self.found.note("strided" if strided or pointer.accessor else "raw", offset)

    def _in_contiguous_branch(self, index: int) -> bool:
        if not self.contiguous_branches:
            return False
        if self._branch_depth is None:  # how many such branches hold each token, built once
            depth = [0] * (len(self.t) + 1)
            for first, last in self.contiguous_branches:
                depth[first] += 1
                depth[last + 1] -= 1
            for at in range(1, len(depth)):
                depth[at] += depth[at - 1]
            self._branch_depth = depth
        return self._branch_depth[index] > 0

    def _write(self, pointer: _Pointer, index: int) -> None:
        if not pointer.const:
            self.found.note("writes", self.t.start[index])

    # --- the pointer expression at tokens [first, last] -------------------------------------
    def use(
        self, first: int, last: int, pointer: _Pointer, depth: int, offsets: list[tuple[int, int]]
    ) -> None:
        t = self.t
        for _ in range(8):  # `(float*)(p + i)`: a few wrappers at most
            for _ in range(8):
                unwrapped = self._unwrap(first, last, pointer)
                if unwrapped[:2] == (first, last):
                    break
                first, last, pointer = unwrapped
            after = t.at(last + 1)
            if after == "[" and t.match[last + 1] > last:
                close = t.match[last + 1]
                ranges = [*offsets, (last + 2, close - 1)]
                while pointer.accessor and t.at(close + 1) == "[" and t.match[close + 1] > close:
                    ranges.append((close + 2, t.match[close + 1] - 1))
                    close = t.match[close + 1]
                if t.at(first - 1) == "&" and t.unary(first - 1):  # `&p[i]`: an address
                    first, last, offsets = first - 1, close, ranges
                    if pointer.accessor and _first_of_row(t, ranges[-1]):
                        # `&acc[n][h][0]`: the row's start, picked through the strides, but
                        # whatever walks it from there takes the last stride to be 1
                        pointer = replace(pointer, accessor=False)
                    continue
                self._element(first, close, pointer, ranges, deref=False)
                return
            if after in ("+", "-") and not pointer.accessor:
                end = t.expression_end(last + 2)
                if end < 0:
                    return  # longer than any offset: not judged
                if end > last + 1:
                    offsets = [*offsets, (last + 2, end)]
                    last = end
                    continue
            break
        before = t.at(first - 1)
        if pointer.accessor and after in (".", "->"):
            return  # `acc.size(0)`: the accessor's own methods
        if before == "*" and t.unary(first - 1):
            self._element(first - 1, last, pointer, offsets, deref=True)
        elif after in STEPS or before in STEPS:  # `p++`: a dense walk
            self._site(pointer, first, strided=False)
        elif after in ("+=", "-="):
            end = t.expression_end(last + 2)
            if end >= 0:
                self._site(pointer, first, strided=self.has_stride(last + 2, end))
        elif before in ("(", ",", "{") and after in (")", ",", "}"):
            opener = t.enclosing[first]
            callee = t.callee(opener) if opener >= 0 and t.at(opener) == "(" else ""
            if callee:
                self._pass(callee, opener, first, pointer, offsets)
            elif t.at(opener) == "{" and before != "{" or t.at(opener - 1) == "=":
                self._stored(pointer, first)  # `Params p = {ptr, n};`
            elif before == "{" and t.is_name(first - 2) and t.at(first - 3) not in (".", "->"):
                self._alias(t.text[first - 2], first - 2, pointer, depth, offsets)  # `T* p{ptr}`
        elif before == "=" and after in (";", ",", ")", "}"):
            if t.is_name(first - 2) and t.at(first - 3) not in (".", "->"):
                self._alias(t.text[first - 2], first - 2, pointer, depth, offsets)
            elif t.is_name(first - 2) or t.at(first - 2) == "]":
                self._stored(pointer, first)  # `params.x_ptr = ptr;`, `ptrs[i] = ptr;`
        elif before in ("?", ":") and depth < 4:
            self._chosen(first, pointer, depth, offsets)

    def _chosen(
        self, first: int, pointer: _Pointer, depth: int, offsets: list[tuple[int, int]]
    ) -> None:
        """`cond ? ptr : nullptr`: the pointer is what the conditional gives, where it goes."""
        t = self.t
        opener = t.enclosing[first]
        if opener >= 0 and t.at(opener) == "(":
            callee = t.callee(opener)
            if callee:
                self._pass(callee, opener, first, pointer, offsets)
            elif not t.is_name(opener - 1):  # `(cond ? ptr : nullptr)`: the group is the value
                self.use(opener, t.match[opener], pointer, depth + 1, offsets)
            return
        assigned = t.assigned(first)
        if assigned is not None:
            name, equals = assigned
            if t.at(equals - 2) in (".", "->"):
                self._stored(pointer, first)
            else:
                self._alias(name, equals - 1, pointer, depth, offsets)

    def _stored(self, pointer: _Pointer, index: int) -> None:
        """Kept in a struct or an array that code not read here indexes (a kernel's params):
        the tensor's strides read beside it make it stride-aware, and it may be written."""
        self._site(pointer, index, strided=bool(self.stride_reads))
        if not pointer.const:
            self.found.passes.append(Pass("", -1, self.t.start[index], "pointer"))

    def _unwrap(self, first: int, last: int, pointer: _Pointer) -> tuple[int, int, _Pointer]:
        """Step out of a grouping parenthesis or a cast around [first, last]."""
        t = self.t
        before = t.at(first - 1)
        if before == "(" and t.match[first - 1] == last + 1:
            opener = first - 1
            name = t.at(opener - 1)
            if name in (">", ">>"):
                start = t.template_start(opener - 1)
                if start > 0 and t.at(start - 1) in _CASTS:
                    const = _const_pointee([t.at(i) for i in range(start + 1, opener - 1)])
                    return start - 1, last + 1, replace(pointer, const=pointer.const or const)
                return first, last, pointer
            if not t.is_name(opener - 1) or name in _NOT_CASTS:
                return opener, last + 1, pointer  # `(p)`
            return first, last, pointer
        if before == ")" and t.match[first - 1] >= 0:
            opener = t.match[first - 1]
            inside = [t.at(i) for i in range(opener + 1, first - 1)]
            if "*" in inside and t.at(opener - 1) not in _NOT_CASTS and len(inside) < 12:
                const = _const_pointee(inside)  # `(const float*)p`
                return opener, last, replace(pointer, const=pointer.const or const)
        return first, last, pointer

    def _element(
        self, first: int, last: int, pointer: _Pointer, ranges: list[tuple[int, int]], deref: bool
    ) -> None:
        """`p[i]`, `*(p + i)`, `acc[i][j]`: one element read or written."""
        t = self.t
        after = last + 1
        if deref and t.at(after) in STEPS:  # `*p++`: a dense walk
            self._site(pointer, first, strided=False)
            after += 1
        if t.at(after) in ASSIGNMENTS or t.at(after) in STEPS or t.at(first - 1) in STEPS:
            self._write(pointer, first)
        if not ranges or all(b == a and t.at(a) == "0" for a, b in ranges):
            return  # the first element only: right whatever the layout
        self._site(pointer, first, any(self.has_stride(a, b) for a, b in ranges))

    def _pass(
        self,
        callee: str,
        opener: int,
        first: int,
        pointer: _Pointer,
        offsets: list[tuple[int, int]],
    ) -> None:
        """A pointer handed to a call: a dense read unless the call is given the strides too;
        a write when the call is one that writes there; else the index follows it."""
        t = self.t
        if is_check(callee):
            return
        close = t.match[opener]
        if pointer.guarded and self.reads and self.has_original_stride(opener, close):
            # `kernel(g.contiguous().data_ptr(), g.stride(0), ...)`: a dense copy indexed
            # with the strides of the tensor it was copied from (detectron2's ROIAlign)
            self.found.note("raw", t.start[pointer.origin if pointer.origin >= 0 else first])
        self._site(pointer, first, strided=self.has_stride(opener, close))
        position = t.position(opener, first)
        last = callee.rsplit("::", 1)[-1]
        written = _DESTINATIONS.get(last)
        if written is not None:
            if position in written:
                self._write(pointer, first)
            return
        if not pointer.const:
            self.found.passes.append(Pass(last, position, t.start[first], "pointer"))

    def _alias(
        self,
        name: str,
        declared: int,
        pointer: _Pointer,
        depth: int,
        offsets: list[tuple[int, int]],
    ) -> None:
        """`float* p = <pointer>;`: follow `p` from there."""
        t = self.t
        if depth > 4 or name in self.followed or len(self.followed) > _MAX_ALIASES:
            return
        self.followed.add(name)
        head = [t.at(i) for i in range(t.statement_start(declared), declared)]
        const = _const_pointee(head) if "*" in head else pointer.const
        alias = replace(pointer, const=const)
        later = [index for index in t.occurrences(name) if index > declared + 1]
        if not later:
            self._stored(pointer, declared)  # used only in macros: how is not seen
        for index in later:
            self.use(index, index, alias, depth + 1, [])


class _TensorUse(_PointerUse):
    """One tensor parameter: its aliases, the pointers and accessors taken from them, the
    strides read from them, and what is done to the tensor itself."""

    def __init__(self, tokens: Tokens, name: str) -> None:
        super().__init__(tokens, reads=True)
        self.name = name
        self.plain: dict[str, int] = {name: -1}  # the tensor under another name, from index
        self.copies: dict[str, int] = {}  # names of a contiguous copy of it
        self.guarded_from: dict[str, int] = {}  # `g = g.contiguous()`: from this index on
        self.pointers: dict[str, bool] = {}  # alias -> a writable pointer was taken from it

    def run(self) -> None:
        t = self.t
        self._aliases()
        self._strides()
        self._branches()
        for alias in [*self.plain, *self.copies]:
            for index in self.t.occurrences(alias):
                self._tensor(alias, index)
        for alias in [*self.plain, *self.copies]:
            if self.pointers.get(alias):
                self._returned(alias)
        access = self.found.access
        if "raw" not in access and "strided" not in access and self.stride_reads:
            # The strides are read, and no pointer use says otherwise (it is in a macro, or
            # ATen's): the layout is what the code works from.
            self.found.note("strided", t.start[min(self.stride_reads)])
        if not access and not self.found.passes and not self.pointers:
            returned = self._returned_through_aten()
            if returned is not None:
                # `return g.unsqueeze(-2).mul(c);`: only ATen reads it, and ATen honours strides
                self.found.note("strided", t.start[returned])

    def _returned_through_aten(self) -> int | None:
        """The first use when the parameter (under no other name) is only checked and read by
        ATen methods in a `return` statement, outside any call of the project's; else None."""
        t = self.t
        if len(self.plain) > 1 or self.copies:
            return None
        first: int | None = None
        for index in t.occurrences(self.name):
            opener = t.enclosing[index]
            callee = t.callee(opener) if opener >= 0 and t.at(opener) == "(" else ""
            if self._in_check(index) or (
                is_macro(callee) and t.at(index - 1) in ("(", ",") and t.at(index + 1) in (")", ",")
            ):
                continue  # `TORCH_CHECK(g.dim() == 2)`, `CHECK_DENSE(g)`
            member = _member(t, index)
            if (
                member is None
                or member[1] < 0
                or member[0] in _POINTER_METHODS
                or member[0] in _ACCESSORS
                or _in_place(member[0])
                or t.at(t.statement_start(index)) != "return"
                or (opener >= 0 and t.at(opener) != "{" and not callee.startswith(_LIBRARIES))
            ):
                return None
            first = index if first is None else first
        return first

    # --- names of the tensor -------------------------------------------------------------------
    def _aliases(self) -> None:
        """`auto g = grad;` (the same tensor), `auto g = grad.contiguous();` (a copy when it
        is not contiguous), and `grad = grad.contiguous();` (contiguous from there on)."""
        t = self.t
        pending = [self.name]
        while pending and len(self.plain) + len(self.copies) < _MAX_ALIASES:
            alias = pending.pop()
            for index in t.occurrences(alias):
                member = _member(t, index)
                assigned = t.assigned(index)
                if assigned is None:
                    continue
                target, equals = assigned
                if (
                    member is not None
                    and member[0] in _UNWRAPS
                    and equals == index - 1
                    and t.at(member[1] + 1) == ";"
                ):
                    # `auto g = g_.value();`: an optional tensor unwrapped is the tensor
                    if target not in self.plain and target not in self.copies:
                        self.plain[target] = equals
                        pending.append(target)
                elif member is not None and member[0] in _UNWRAPS:
                    # `auto g = grad.value().contiguous();`: a copy of the optional's tensor
                    chained = _member(t, member[1]) if member[1] > 0 else None
                    if chained is not None and chained[0] in _GUARDS:
                        if target not in self.plain and target not in self.copies:
                            self.copies[target] = equals
                elif member is not None and member[0] in _GUARDS:
                    if target in self.plain:
                        start = self.guarded_from.get(target, len(t))
                        self.guarded_from[target] = min(start, equals)
                    elif target not in self.copies:
                        self.copies[target] = equals
                elif t.at(index + 1) == ";" and equals == index - 1 and target not in self.plain:
                    if target not in self.copies:
                        self.plain[target] = equals
                        pending.append(target)

    def _strides(self) -> None:
        """Where the tensor's strides are read (`g.stride(0)`, `g.strides()`), and every use
        of a name computed from them (`const auto s0 = g.stride(0);`, `off = i * s0`)."""
        t = self.t
        seeds: list[int] = []
        original: list[int] = []
        for alias in self.plain:
            for index in t.occurrences(alias):
                member = _member(t, index)
                if member is not None and member[0] in _STRIDES:
                    seeds.append(index)
                    if index < self.guarded_from.get(alias, len(t)):
                        original.append(index)
                    if self._in_check(index):  # `TORCH_CHECK(g.stride(-1) == 1)`
                        self.found.note("checked", t.start[index])
                    else:
                        self.stride_reads.append(index)
        self.stride_at = self._spread(seeds)
        self.original_stride_at = self._spread(original)

    def _spread(self, seeds: list[int]) -> list[int]:
        """The seeds, and every use of a name computed from them (`off = i * s0`), sorted."""
        t = self.t
        found = set(seeds)
        pending = list(seeds)
        names: set[str] = set()
        while pending and len(names) < _MAX_ALIASES:
            assigned = t.assigned(pending.pop())
            if assigned is None or assigned[0] in names or assigned[0] in self.plain:
                continue
            names.add(assigned[0])
            for index in t.occurrences(assigned[0]):
                if index not in found:
                    found.add(index)
                    pending.append(index)
        return sorted(found)

    def _branches(self) -> None:
        """`if (g.is_contiguous()) {...}` (or the `else` of `if (!g.is_contiguous())`): what
        runs there sees a contiguous tensor."""
        t = self.t
        for alias in self.plain:
            for index in t.occurrences(alias):
                member = _member(t, index)
                if member is None or member[0] != "is_contiguous" or self._in_check(index):
                    continue
                condition = self._condition(index)
                if condition is None:
                    continue
                branch = _statement(t, t.match[condition] + 1)
                if branch is not None and t.at(index - 1) == "!":
                    after = branch[1] + 1
                    branch = _statement(t, after + 1) if t.at(after) == "else" else None
                if branch is not None:
                    self.contiguous_branches.append(branch)

    def _condition(self, index: int) -> int | None:
        """The `(` of the `if` whose condition holds the token at `index`, a few brackets up."""
        t = self.t
        opener = t.enclosing[index]
        for _ in range(4):
            if opener < 0 or t.at(opener) != "(" or t.match[opener] < 0:
                return None
            if t.at(opener - 1) == "if":
                return opener
            if t.callee(opener):
                return None  # an argument of a call, not a condition
            opener = t.enclosing[opener]
        return None

    # --- one occurrence of the tensor ----------------------------------------------------------
    def _tensor(self, alias: str, index: int) -> None:
        t = self.t
        copy = alias in self.copies
        if copy and index <= self.copies[alias]:
            return  # its own declaration
        guarded = copy or index > self.guarded_from.get(alias, len(t))
        member = _member(t, index)
        after = t.at(index + 1)
        if member is not None and member[0] in _UNWRAPS and member[1] > 0:
            # `grad.value()`: an optional's tensor, used as the tensor itself
            # (`CHECK_INPUT(grad.value())`, `grad.value().data_ptr<float>()`)
            unwrapped = member[1]
            member = _member(t, unwrapped)
            if member is None:
                if t.at(index - 1) in ("(", ",") and t.at(unwrapped + 1) in (")", ","):
                    self._handed(index, guarded)
                return
        if member is not None:
            self._member(alias, index, member, guarded)
        elif after in ASSIGNMENTS and after != "=":  # `grad *= s` on a Tensor: in place
            self.found.note("writes", t.start[index])
        elif after == "[" and t.at(t.match[index + 1] + 1) == "=":  # `grad[0] = v`: a fill
            self.found.note("writes", t.start[index])
        elif t.at(index - 1) in ("(", ",") and after in (")", ","):
            self._handed(index, guarded)

    def _member(self, alias: str, index: int, member: tuple[str, int, int], guarded: bool) -> None:
        """`alias.method<...>(...)` and what follows it."""
        t = self.t
        method, close, method_at = member
        offset = t.start[index]
        targs = _template_arguments(t, method_at)
        if method in _GUARDS:
            self.found.note("contiguous", offset)
            chained = _member(t, close) if close > 0 else None  # `g.contiguous().data_ptr()`
            if chained is not None and chained[0] in _POINTER_METHODS:
                const = _const_source(chained[0], t, chained[2])
                pointer = _Pointer(const=const, guarded=True, origin=index)
                self.use(index, chained[1], pointer, 0, [])
        elif method == "is_contiguous":
            if self._in_check(index):
                self.found.note("checked", offset)
        elif method in _POINTER_METHODS and close > 0:
            const = _const_source(method, t, method_at)
            if method in _MUTABLE_METHODS:
                self.found.note("writes", offset)  # asked for in order to write
            if not const:
                self.pointers[alias] = True
            self.use(index, close, _Pointer(const, guarded=guarded, origin=index), 0, [])
        elif method in _ACCESSORS and close > 0:
            const = bool(targs) and targs[0] == "const"
            accessor = _Pointer(const, accessor=True, guarded=guarded, origin=index)
            self._site(accessor, index, strided=True)
            self.use(index, close, accessor, 0, [])
        elif _in_place(method) and close > 0:
            self.found.note("writes", offset)

    def _in_check(self, index: int) -> bool:
        """Whether the token at `index` is inside a check's condition (a few brackets deep)."""
        t = self.t
        opener = t.enclosing[index]
        for _ in range(4):
            if opener < 0:
                return False
            if t.text[opener] == "(" and is_check(t.callee(opener)):
                return True
            opener = t.enclosing[opener]
        return False

    def _handed(self, index: int, guarded: bool) -> None:
        """The tensor itself as an argument."""
        t = self.t
        opener = t.enclosing[index]
        callee = t.callee(opener) if opener >= 0 else ""
        if not callee:
            return
        last = callee.rsplit("::", 1)[-1]
        position = t.position(opener, index)
        offset = t.start[index]
        if is_macro(callee):
            self.found.macros.append((callee, offset))
        elif last in _ITERATOR_OUTPUTS or (last.endswith("_out") and position == 0):
            self.found.note("writes", offset)
        elif last in _ITERATOR_INPUTS:
            self.found.note("strided", offset)
        elif callee.startswith(_LIBRARIES) or is_check(callee):
            return
        else:
            kind = "guarded" if guarded else "tensor"
            self.found.passes.append(Pass(last, position, offset, kind))

    def _returned(self, alias: str) -> None:
        """`return g;` after a writable pointer into `g` went to a kernel: the result is
        the buffer the kernel wrote ("the backward pass is completely in-place")."""
        t = self.t
        for index in t.occurrences(alias):
            if t.at(index - 1) == "return" and t.at(index + 1) == ";":
                self.found.note("writes", t.start[index - 1])


def _member(t: Tokens, index: int) -> tuple[str, int, int] | None:
    """(method, index of its closing parenthesis or -1, index of its name) when the token at
    `index` is followed by `.method` / `->method` (`.template method<T>(...)` too)."""
    if t.at(index + 1) not in (".", "->"):
        return None
    at = index + 2
    if t.at(at) == "template":
        at += 1
    if not t.is_name(at):
        return None
    method_at = at
    at += 1
    if t.at(at) == "<":
        at = t.template_end(at)
        if at < 0:
            return None
    if t.at(at) == "(" and t.match[at] > at:
        return t.text[method_at], t.match[at], method_at
    return t.text[method_at], -1, method_at


def _first_of_row(t: Tokens, last_index: tuple[int, int]) -> bool:
    """Whether an accessor's last subscript (the token range) is the literal 0."""
    first, last = last_index
    return first == last and t.at(first) == "0"


def _statement(t: Tokens, first: int) -> tuple[int, int] | None:
    """(first, last) token of the statement or block that starts at `first` (bounded)."""
    if t.at(first) == "{":
        return (first, t.match[first]) if t.match[first] > first else None
    at = first
    for _ in range(FORWARD_LIMIT):
        token = t.at(at)
        if not token or token in ("}", "{"):
            return None
        if token in ("(", "[") and t.match[at] > at:
            at = t.match[at]
        elif token == ";":
            return first, at
        at += 1
    return None


def _template_arguments(t: Tokens, method_at: int) -> list[str]:
    if t.at(method_at + 1) != "<":
        return []
    end = t.template_end(method_at + 1)
    return [t.at(i) for i in range(method_at + 2, end - 1)] if end > 0 else []


def _const_source(method: str, t: Tokens, method_at: int) -> bool:
    """`const_data_ptr()`, or `data_ptr<const float>()`: a pointer to const."""
    if method.startswith("const_"):
        return True
    targs = _template_arguments(t, method_at)
    return bool(targs) and targs[0] == "const"


def _const_pointee(head: list[str]) -> bool:
    """Whether a declared type points to const: `const` before its first `*`."""
    star = head.index("*") if "*" in head else len(head)
    return "const" in head[:star]


def _in_place(method: str) -> bool:
    """`mul_`, `copy_`, `index_put_`: ATen's in-place methods (not `_private` names)."""
    return (
        len(method) > 2
        and method.endswith("_")
        and method[0].islower()
        and (method[-2].islower() or method[-2].isdigit())
    )
