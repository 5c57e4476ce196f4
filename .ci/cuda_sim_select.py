"""pytest plugin for .ci/run-cuda-sim: keep only the tests that run on the CUDA backend.

Those are the tests that take the ``device`` or ``simulated`` fixture (backend-
parametrised), the CUDA backend's own tests (which take a ``cuda`` fixture) and
everything in files named ``test_cuda*.py``. The rest (pure front-end, data, CLI tests)
already run in the CPU pass and would only cost time here.
"""

from __future__ import annotations

import pytest

_FIXTURES = {"device", "simulated", "cuda"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    selected, deselected = [], []
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & _FIXTURES or item.path.name.startswith("test_cuda"):
            selected.append(item)
        else:
            deselected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
