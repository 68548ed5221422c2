"""How each report names files, as ruff does: the text formats relative to the current
directory (absolute outside it), JSON absolute, SARIF as URIs relative to the current directory.

The engine writes the absolute path of every other file it cites in a message (the C++ line a
gradient reaches): a text report shortens those the same way as the file names it prints."""

from __future__ import annotations

import os
import re

_STDIN = "<stdin>"


def absolute(path: str) -> str:
    """The absolute path (lexically: a symlinked file is named by its link, as it was found)."""
    return path if path == _STDIN else os.path.abspath(path)


def relative(path: str, cwd: str | None = None) -> str:
    """`path` relative to `cwd` (default: the current directory) when it lies below it, else
    absolute; `<stdin>` as it is."""
    if path == _STDIN:
        return path
    here = cwd if cwd is not None else os.getcwd()
    full = os.path.abspath(path)
    prefix = here.rstrip(os.sep) + os.sep
    return full[len(prefix) :] if full.startswith(prefix) else full


def relative_in(text: str, cwd: str | None = None) -> str:
    """`text` with the absolute paths below `cwd` it cites made relative to it."""
    here = cwd if cwd is not None else os.getcwd()
    prefix = here.rstrip(os.sep) + os.sep
    if prefix == os.sep or prefix not in text:
        return text
    # Only where a path starts: after a space, a bracket or a quote, or at the start.
    return re.sub(rf"(^|[\s(`'\"]){re.escape(prefix)}", r"\1", text)
