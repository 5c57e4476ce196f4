"""The ``reference`` fixture of tests/nn: NumPy always, PyTorch where installed."""

from tests.nn.conftest import reference  # noqa: F401
