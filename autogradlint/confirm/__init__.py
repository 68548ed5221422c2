"""The runtime confirmer: executes flagged code in a subprocess to turn findings into evidence.

This is the only part of autogradlint that runs the code it analyses, and only when asked
(`autogradlint confirm`, `check --confirm`); torch is imported here alone, lazily.
"""
