"""`python -m autogradlint`."""

from .cli import main

main()
