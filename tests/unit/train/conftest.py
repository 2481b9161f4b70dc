"""Every train test runs torch on one intra-op thread (tests/conftest.py::torch_one_thread)."""

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_thread(torch_one_thread: None) -> None:
    return None
