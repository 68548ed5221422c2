"""The checks, one module each; registry.py is their one list. Importing the package imports
none of them (nor libcst): the CLI gates files through admission.py while the engine loads."""
