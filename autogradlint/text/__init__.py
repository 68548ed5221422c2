"""Text utilities under every analysis: the string-aware statement scan, class outlines and
imports from bytes, `ast` helpers, line splicing, suppression comments, and the one place that
names torch's Function base classes. Nothing here imports libcst."""
