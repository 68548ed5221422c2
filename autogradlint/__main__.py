"""`python -m autogradlint`."""

from .cli import run

if __name__ == "__main__":  # not when a worker process imports the main module
    run()
