"""Shared pytest configuration.

* ``--backend cpu|cuda`` picks the device every backend-parametrised test runs on (the
  ``device`` fixture). CI runs the suite twice: ``--backend cpu``, and ``--backend cuda``
  in its own process under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, set by
  this file before Numba is imported), where only tiny shapes are practical.
* Markers: ``slow`` (not run by the default command), ``gpu`` (needs a real GPU; skipped
  otherwise), ``torch`` (skipped when PyTorch is not installed).
* Hypothesis: no deadline (first calls compile kernels); fewer examples under the
  simulator.
"""

from __future__ import annotations

import os
import sys

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        action="store",
        default="cpu",
        choices=("cpu", "cuda"),
        help="device for backend-parametrised tests (cuda uses the simulator without a GPU)",
    )


def pytest_configure(config: pytest.Config) -> None:
    backend = config.getoption("--backend")
    simulate = backend == "cuda" and not os.environ.get("KG_TEST_REAL_GPU")
    if simulate and "numba" not in sys.modules:
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    from hypothesis import HealthCheck, settings

    common = {
        "deadline": None,
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
        "derandomize": True,
    }
    settings.register_profile("cpu", max_examples=40, **common)
    settings.register_profile("cuda", max_examples=6, **common)
    settings.load_profile("cuda" if backend == "cuda" else "cpu")


def _real_gpu_available() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        import kernelgrad as kg

        return bool(kg.cuda.is_available())
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    real_gpu = None
    try:
        import torch  # noqa: F401

        have_torch = True
    except ImportError:
        have_torch = False
    for item in items:
        if "gpu" in item.keywords:
            if real_gpu is None:
                real_gpu = _real_gpu_available()
            if not real_gpu:
                item.add_marker(pytest.mark.skip(reason="needs a real CUDA GPU"))
        if "torch" in item.keywords and not have_torch:
            item.add_marker(pytest.mark.skip(reason="PyTorch is not installed"))


@pytest.fixture(scope="session")
def backend_name(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--backend")


@pytest.fixture(scope="session")
def device(backend_name: str) -> str:
    """The device string tests create tensors on ("cpu" or "cuda")."""
    if backend_name == "cuda":
        import kernelgrad as kg

        if not kg.cuda.is_available():
            pytest.skip("the CUDA backend is not available (no GPU and no simulator)")
    return backend_name


@pytest.fixture(scope="session")
def simulated(backend_name: str) -> bool:
    """True when CUDA runs under the simulator: keep shapes tiny."""
    return backend_name == "cuda" and os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


# The fuzz campaign's case counts (tests/fuzz/oracle.py), printed after the run. Its
# hooks live here, not in tests/fuzz/conftest.py: with pytest-xdist (the simulated pass
# runs on two workers) the controller loads only this conftest, and each worker sends its
# counts to the controller when it finishes.
_FUZZ_COUNTERS = ("cases", "outcomes", "refusals", "builtin_raises", "known")


def _fuzz_campaign():
    module = sys.modules.get("tests.fuzz.oracle")
    return None if module is None else module.CAMPAIGN


def pytest_sessionfinish(session: pytest.Session) -> None:
    campaign = _fuzz_campaign()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and campaign is not None:
        workeroutput["kernelgrad_fuzz"] = {
            name: dict(getattr(campaign, name)) for name in _FUZZ_COUNTERS
        }


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    counts = getattr(node, "workeroutput", {}).get("kernelgrad_fuzz")
    if counts:
        from tests.fuzz.oracle import CAMPAIGN

        for name, values in counts.items():
            getattr(CAMPAIGN, name).update(values)


def pytest_terminal_summary(terminalreporter: object) -> None:
    campaign = _fuzz_campaign()
    report = campaign.summary() if campaign is not None else ""
    if report:
        terminalreporter.write_sep("-", "kernelgrad fuzz campaign")
        terminalreporter.write_line(report)
