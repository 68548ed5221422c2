"""`autogradlint lsp`: the language server over stdio."""

from __future__ import annotations

import sys

from .app import main
from .common import EXIT_ERROR, Console, print_error


@main.command()
def lsp() -> None:
    """Run the language server over stdio (needs the `lsp` extra: pygls, lsprotocol)."""
    import importlib.util

    missing = [name for name in ("pygls", "lsprotocol") if importlib.util.find_spec(name) is None]
    if missing:  # pragma: no cover - depends on the environment
        exc = f"{' and '.join(missing)} not installed"
        print_error(
            Console(stderr=True),
            f"the language server needs pygls and lsprotocol ({exc}); "
            "install them with `pip install 'autogradlint[lsp]'`",
        )
        sys.exit(EXIT_ERROR)
    from ..isolation import clean_path

    clean_path()  # `python -m autogradlint lsp` in a project: import nothing more from it
    from ..lsp.server import run

    run()
