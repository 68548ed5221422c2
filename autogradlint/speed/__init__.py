"""The tree front end, which the engine alone uses: text-level and `ast` selection of what a
check may read (preselect, slicing), libcst nodes rebuilt from `ast` without a parse (rebuild),
libcst twins of the statements a finding needs (twins), placing findings by generating one
statement (positions), and refusing what libcst cannot take (complexity). Their contract is the
differential tests (tests/test_slicing.py, tests/test_rebuild.py, the corpus tests): whatever
they skip, a check would not have read."""
