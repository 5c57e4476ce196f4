"""The ``reference`` fixture: a comparison test runs once against NumPy (always) and once
against PyTorch (marked ``torch``: skipped where PyTorch is not installed). On the CUDA
backend only the NumPy row runs: the PyTorch row checks the front end's semantics, which
the CPU pass already did, and the NumPy row checks this backend's values."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["numpy", pytest.param("torch", marks=pytest.mark.torch)])
def reference(request: pytest.FixtureRequest, backend_name: str) -> str:
    if request.param == "torch" and backend_name != "cpu":
        pytest.skip("the PyTorch comparison runs in the CPU pass; NumPy checks this backend")
    return request.param
