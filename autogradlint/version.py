"""The version string, in a module of its own: what reports and the cache stamp import without
the package's public API."""

__version__ = "0.1.0"
