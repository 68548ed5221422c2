"""Fixes: building edits (edits), spelling torch in scope (torch_name), mapping sliced edits back
to the file (splice), proving the result is valid Python (verify), the fix loop (loop) and
writing files without harming them (write)."""
