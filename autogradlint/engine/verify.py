"""Whether fixed code is Python this interpreter accepts: CPython's own compiler decides.

libcst accepts code CPython rejects (an import above `from __future__ import ...`, a tab mixed
into space indentation, `return` outside a function): a fix is written only when the result
compiles. Compiling runs nothing.
"""

from __future__ import annotations

import sys
import warnings


def compile_error(text: str, path: str = "<fixed>") -> str | None:
    """None when `text` compiles; else what CPython says is wrong, with the line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings (invalid escapes) are not errors
        try:
            compile(text, path, "exec", dont_inherit=True)
        except SyntaxError as exc:  # IndentationError and TabError included
            where = f"line {exc.lineno}: " if exc.lineno else ""
            return f"{where}{exc.msg}"
        except (ValueError, RecursionError, MemoryError) as exc:
            return f"{type(exc).__name__}: {exc}"
    return None


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"
