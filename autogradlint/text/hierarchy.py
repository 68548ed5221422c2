"""Which classes inherit from which: one linear walk, shared by every layer that asks.

Each layer (byte gates, text preselection, `ast` slicing, the CST facts) decides which classes
are autograd Functions the same way: seeds (a base that may name one, text/functions.py, a known class) and
every class whose base is one of them, transitively. Iterating "until nothing changes" over all
classes costs one pass per level of the chain (10,000 chained subclasses took 216 s); walking
from the seeds down a base -> subclasses map visits each class once.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

from .functions import may_name_function

K = TypeVar("K", bound=Hashable)


def descendants(seeds: Iterable[K], bases_of: Mapping[K, Iterable[K]]) -> set[K]:
    """The seeds and every class that has one of them among its bases, transitively."""
    children: dict[K, list[K]] = {}
    for name, bases in bases_of.items():
        for base in bases:
            children.setdefault(base, []).append(name)
    found = set(seeds)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def inherited(
    kinds_of: Mapping[K, set[str]], bases_of: Mapping[K, Iterable[K]]
) -> dict[K, set[str]]:
    """Each class's kinds together with those of all its ancestors (one walk per kind)."""
    out = {name: set(kinds) for name, kinds in kinds_of.items()}
    every = {kind for kinds in kinds_of.values() for kind in kinds}
    for kind in every:
        seeds = [name for name, kinds in kinds_of.items() if kind in kinds]
        for name in descendants(seeds, bases_of):
            out.setdefault(name, set()).add(kind)
    return out


def function_like(
    classes: Iterable[tuple[str, Iterable[str]]], known: Iterable[str] = ()
) -> set[str]:
    """The one rule every text-level layer uses to say which classes may be autograd Functions
    (an over-approximation: analysis/facts.py and the project index decide for real): `known`
    names, classes with a base that may name a Function (functions.may_name_function, by its
    last component), and every class deriving from one of those, transitively."""
    seeds = set(known)
    bases_of: dict[str, set[str]] = {}
    for name, bases in classes:
        lasts = {base.rsplit(".", 1)[-1] for base in bases}
        if _spelled_function(lasts):
            seeds.add(name)
        bases_of.setdefault(name, set()).update(lasts)
    return descendants(seeds, bases_of)


def _spelled_function(lasts: set[str]) -> bool:
    """A base that may name a Function (functions.may_name_function, by its last component)."""
    return any(may_name_function(last) for last in lasts)
