"""Writing fixed files without harming them (write): the engine makes the fixes."""
