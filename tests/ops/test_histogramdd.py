"""``kg.histogramdd`` against ``torch.histogramdd`` and ``numpy.histogramdd``: counts,
weights, densities, explicit and equal-width bins, points on bin edges (PyTorch's
float32 edges decide their bins), batched inputs, the errors; and a tiny case on every
backend."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import as_numpy

RNG = np.random.default_rng(7)
POINTS = RNG.standard_normal((40, 2)).astype(np.float32)
WEIGHTS = RNG.random(40).astype(np.float32)
EDGES = [np.array([-1, 0, 0.5, 3], np.float32), np.array([-3, 0, 5], np.float32)]


def _around(edges):
    """Every edge and the floats on either side of it."""
    edges = edges.astype(np.float32)
    return np.concatenate([np.nextafter(edges, -np.inf), edges, np.nextafter(edges, np.inf)])


# the grid of points on and beside the edges of 7 x 9 bins over [-1, 1] x [-0.7, 0.7]
ON_EDGES = np.stack(
    np.meshgrid(_around(np.linspace(-1, 1, 8)), _around(np.linspace(-0.7, 0.7, 10))), -1
).reshape(-1, 2)

CASES = {
    "int-bins": (POINTS, {"bins": 4}),
    "bins-per-dim-range": (POINTS, {"bins": [3, 5], "range": [-1, 1, -2, 2]}),
    "density": (POINTS, {"bins": 3, "density": True}),
    "weight-density": (POINTS, {"bins": [3, 2], "weight": WEIGHTS, "density": True}),
    "weight": (POINTS, {"bins": (2, 3), "weight": WEIGHTS}),
    "edges": (POINTS, {"bins": EDGES}),
    "batched-3d": (RNG.standard_normal((2, 5, 3)).astype(np.float32), {"bins": 2}),
    "on-edges": (ON_EDGES, {"bins": [7, 9], "range": [-1, 1, -0.7, 0.7]}),
    "float64": (POINTS.astype(np.float64) * 1.37, {"bins": [11, 13]}),
    "one-value": (np.ones((3, 2), np.float32), {"bins": 2}),
    "empty": (np.zeros((0, 2), np.float32), {"bins": 2}),
    "one-dim": (POINTS[:, :1], {"bins": 5}),
}


def _arguments(module, options):
    converted = dict(options)
    if isinstance(options["bins"], list) and isinstance(options["bins"][0], np.ndarray):
        converted["bins"] = [module.tensor(e) for e in options["bins"]]
    if "weight" in options:
        converted["weight"] = module.tensor(options["weight"])
    return converted


@pytest.mark.torch
@pytest.mark.parametrize("case", list(CASES))
def test_histogramdd_matches_pytorch_and_numpy(case):
    torch = pytest.importorskip("torch")
    points, options = CASES[case]
    got = kg.histogramdd(kg.tensor(points), **_arguments(kg, options))
    expected = torch.histogramdd(torch.tensor(points), **_arguments(torch, options))
    assert type(got).__name__ == "histogramdd" and got._fields == ("hist", "bin_edges")
    assert isinstance(got.bin_edges, tuple) and len(got.bin_edges) == points.shape[-1]
    assert got.hist.dtype == kg.tensor(points).dtype
    np.testing.assert_allclose(as_numpy(got.hist), expected.hist.numpy(), rtol=1e-6)
    for mine, theirs in zip(got.bin_edges, expected.bin_edges):
        np.testing.assert_array_equal(as_numpy(mine), theirs.numpy())
    flat = points.reshape(-1, points.shape[-1])
    numpy_range = None
    if "range" in options:
        r = options["range"]
        numpy_range = [(r[2 * k], r[2 * k + 1]) for k in range(flat.shape[1])]
    counts, _ = np.histogramdd(
        flat,
        bins=options["bins"],
        range=numpy_range,
        weights=options.get("weight"),
        density=options.get("density", False),
    )
    if case == "on-edges":  # NumPy's float64 edges put some points in other bins
        assert np.abs(as_numpy(got.hist) - counts).sum() > 0
    else:
        np.testing.assert_allclose(as_numpy(got.hist), counts, rtol=1e-5)


@pytest.mark.torch
def test_histogramdd_errors_are_pytorchs():
    torch = pytest.importorskip("torch")
    x = np.zeros((5, 2), np.float32)
    bad = [
        (np.zeros(5, np.float32), {"bins": 3}, "at least 2 dimensions"),
        (x, {"bins": [3]}, "innermost dimension"),
        (x, {"bins": 3, "range": [0.0, 1.0]}, "range should have 4 elements"),
        (x, {"bins": 3, "weight": np.ones(4, np.float32)}, "weight"),
        (x, {"bins": 0}, "bins must be > 0"),
        (x, {"bins": 3, "range": [1.0, 0.0, 0.0, 1.0]}, "min should not exceed max"),
    ]
    for points, options, message in bad:
        with pytest.raises(RuntimeError):
            torch.histogramdd(torch.tensor(points), **_arguments(torch, options))
        with pytest.raises(RuntimeError, match=message):
            kg.histogramdd(kg.tensor(points), **_arguments(kg, options))
    with pytest.raises(TypeError, match="floating point"):
        kg.histogramdd(kg.zeros(5, 2, dtype=kg.int64), bins=2)
    with pytest.raises(RuntimeError, match="dtype"):
        kg.histogramdd(kg.tensor(x), bins=2, weight=kg.ones(5, dtype=kg.float64))


def test_histogramdd_on_every_backend(device):
    points = kg.tensor([[0.0, 0.0], [0.5, 1.0], [1.0, 1.0]], device=device)
    weight = kg.tensor([1.0, 2.0, 3.0], device=device)
    hist, edges = kg.histogramdd(points, bins=2, weight=weight)
    assert hist.device == points.device and all(e.device == points.device for e in edges)
    np.testing.assert_array_equal(as_numpy(hist), [[1.0, 0.0], [0.0, 5.0]])
    np.testing.assert_array_equal(as_numpy(edges[0]), [0.0, 0.5, 1.0])
