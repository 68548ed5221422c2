"""The language server (pygls): diagnostics, quick fixes, fix-all and hover docs for editors."""
