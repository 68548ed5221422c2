"""Facts computed once per parsed file and shared by every check."""
