"""Import bindings: local names and the qualified names they stand for (no parser needed)."""

from __future__ import annotations

from collections.abc import Iterable

# ("import", "a.b", asname or None) or ("from", "..pkg", name, asname or None), as listed by
# slicing.import_bindings in source order.
Binding = tuple[str, str, str | None] | tuple[str, str, str, str | None]


class Bindings:
    """Maps local names bound by import statements to the qualified names they stand for."""

    def __init__(self, bindings: Iterable[Binding] = ()) -> None:
        self.aliases: dict[str, str] = {}
        for binding in bindings:
            if len(binding) == 3:  # ("import", module, asname)
                self.bind_import(binding[1], binding[2])
            else:
                self.bind_from(binding[1], binding[2], binding[3])

    def bind_import(self, module: str, asname: str | None) -> None:
        """`import module [as asname]`."""
        if asname is not None:
            self.aliases[asname] = module
        else:
            # `import torch.autograd` binds `torch`, which still means torch.
            head = module.split(".", 1)[0]
            self.aliases.setdefault(head, head)

    def bind_from(self, base: str, name: str, asname: str | None) -> None:
        """`from base import name [as asname]`; `base` keeps its leading dots."""
        full = f"{base}{name}" if not base or base.endswith(".") else f"{base}.{name}"
        self.aliases[asname or name] = full

    def resolve_dotted(self, text: str) -> str:
        head, sep, rest = text.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return text
        return f"{target}{sep}{rest}" if rest else target

    def is_imported(self, name: str) -> bool:
        return name in self.aliases
