"""The engine: one file's source in, findings (and fixes, and class summaries) out. The
pipeline (pipeline), the door every front end lints through (door), the suppression audit
(hygiene), the fix loop (fix_loop, torch_name, verify) and the editor's incremental runs
(incremental). Pure: no file system, no printing."""
