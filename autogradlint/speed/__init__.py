"""How little of a file is parsed, and how fast: byte gates (gates), a string-aware statement
scan (statements), text-level and `ast` selection of what a check may read (preselect, slicing),
libcst without per-node validation (parsing), placing findings by generating one statement
(positions), and refusing what libcst cannot take (complexity). Their contract is the
differential tests (tests/test_slicing.py, tests/test_parsing.py, the corpus tests): whatever
they skip, a check would not have read."""
