"""Text-level marks of code a check reads, found at memory speed: direct calls on a Function
class (`Fn.forward(`, `Fn()(`, `Fn.apply(`, `Fn(k)(`, and through a name bound to one) and the
calls that build a graph in a helper."""

from __future__ import annotations

import re

CALL_TAILS = (".forward(", "()(", ".apply(")


def direct_call_offsets(
    text: str, function_like: set[str], tails: tuple[str, ...] = CALL_TAILS
) -> list[int]:
    """Where `Fn.forward(`, `Fn()(` or `Fn.apply(` is called on a Function class (AGL407 and
    AGL410 read those).

    Found from the two literal tails, so the search runs at memory speed on large files."""
    if not function_like:
        return []
    out: list[int] = []
    for tail in tails:
        at = text.find(tail)
        while at != -1:
            head = at
            while head > 0 and (text[head - 1].isalnum() or text[head - 1] == "_"):
                head -= 1
            if text[head:at] in function_like:
                out.append(head)
            at = text.find(tail, at + 1)
    return out


def instance_call_offsets(text: str, function_like: set[str]) -> list[int]:
    """Where a Function is instantiated with arguments and the instance called (AGL407): the
    legacy `Fn(k, eps)(x)`, and `f = Fn(k)` with each later `f(` (the call may be a statement
    away). One `str.find` per Function name, so it stays at memory speed."""
    out: list[int] = []
    for name in function_like:
        at = text.find(name + "(")
        while at != -1:
            head, opening = at, at + len(name)
            at = text.find(name + "(", at + 1)
            if word_char(text[head - 1 : head]) or text[max(0, head - 6) : head] == "class ":
                continue
            closing = _closing(text, opening)
            if closing is None:
                continue
            after = closing + 1
            while after < len(text) and text[after] in " \t":
                after += 1
            if text[after : after + 1] == "(":
                out.append(head)
                continue
            line_start = text.rfind("\n", 0, head) + 1
            held = _ASSIGNED.fullmatch(text, line_start, head)
            if held is not None:
                out.append(head)
                out.extend(_later_uses(text, held.group(1), closing))
    return sorted(set(out))


_ASSIGNED = re.compile(r"[ \t]*(\w+)[ \t]*=[ \t]*")


def _closing(text: str, opening: int) -> int | None:
    """The `)` that closes the `(` at `opening` (parentheses counted, strings not parsed:
    a stray one in a string only costs a mark)."""
    depth = 0
    for index in range(opening, min(len(text), opening + 4000)):
        char = text[index]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index
    return None


def _later_uses(text: str, name: str, start: int) -> list[int]:
    """Every later use of the name holding the instance: its calls, and any rebinding (the
    tree decides from all of them whether the name still holds the instance at the call)."""
    found = []
    at = text.find(name, start)
    while at != -1:
        end = at + len(name)
        if (
            not word_char(text[at - 1 : at])
            and text[at - 1 : at] != "."
            and not word_char(text[end : end + 1])
        ):
            found.append(at)
        at = text.find(name, end)
    return found


def alias_offsets(text: str, function_like: set[str]) -> list[int]:
    """Where a name is bound to a Function's `apply` or `forward` (`op = Fn.apply`, `f =
    Fn.forward`), and where such a name is called (`op(`): AGL407 and AGL410 read the calls
    through it as they read `Fn.apply(` and `Fn.forward(`."""
    if not function_like:
        return []
    bound: dict[str, int] = {}
    for tail in (".apply", ".forward"):
        at = text.find(tail)
        while at != -1:
            after = text[at + len(tail) : at + len(tail) + 1]
            name_end = at
            head = at
            while head > 0 and word_char(text[head - 1]):
                head -= 1
            if not word_char(after) and after not in "(." and text[head:name_end] in function_like:
                target = _bound_name(text, head)
                if target is not None:
                    bound.setdefault(target[0], target[1])
            at = text.find(tail, at + 1)
    if not bound:
        return []
    out = list(bound.values())
    for name in bound:
        at = text.find(name + "(")
        while at != -1:
            if at == 0 or not (word_char(text[at - 1]) or text[at - 1] == "."):
                out.append(at)
            at = text.find(name + "(", at + 1)
    return sorted(out)


def _bound_name(text: str, value: int) -> tuple[str, int] | None:
    """(name, offset) of `name = ` right before `value` on its line, if the text has that."""
    at = value
    while at > 0 and text[at - 1] in " \t":
        at -= 1
    if at == 0 or text[at - 1] != "=" or (at > 1 and text[at - 2] in "=!<>+-*/%&|^@:"):
        return None
    at -= 1
    while at > 0 and text[at - 1] in " \t":
        at -= 1
    end = at
    while at > 0 and word_char(text[at - 1]):
        at -= 1
    if at == end or (at > 0 and text[at - 1] not in " \t\n"):
        return None
    return text[at:end], at


def holds_graph_call(text: str) -> bool:
    """What makes a helper worth following: family A looks for `x.backward(` /
    `autograd.backward(` and `autograd.grad(` / an imported `grad(` in it (not `compute_grad(`).
    A helper without them, calling none that has them, is not parsed."""
    if ".backward(" in text:
        return True
    at = text.find("grad(")
    while at != -1:
        if not word_char(text[at - 1 : at]):
            return True
        at = text.find("grad(", at + 1)
    return False


def word_char(char: str) -> bool:
    return char.isalnum() or char == "_"
