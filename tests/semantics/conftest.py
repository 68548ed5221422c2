"""The semantics tests need torch; without it they skip with one line, never fail."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="tests/semantics verify PyTorch itself: pip install torch")

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The rows provoke PyTorch's own warnings on purpose (non-leaf .grad, create_graph cycles).
    for item in items:
        if HERE in Path(item.fspath).parents:
            item.add_marker(pytest.mark.filterwarnings("ignore::UserWarning"))
