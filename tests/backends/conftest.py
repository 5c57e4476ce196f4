"""Fixtures shared by the CUDA backend's tests."""

from __future__ import annotations

import pytest

import kernelgrad as kg


@pytest.fixture(scope="module")
def cuda() -> str:
    """The device name ``"cuda"``; skips the test where CUDA is unavailable."""
    if not kg.cuda.is_available():
        pytest.skip("CUDA is unavailable (no GPU, and NUMBA_ENABLE_CUDASIM is not set)")
    return "cuda"
