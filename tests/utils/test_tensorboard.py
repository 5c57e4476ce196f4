"""SummaryWriter: event files read back with TensorBoard's own reader."""

from __future__ import annotations

import os

import numpy as np
import pytest

import kernelgrad as kg

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator,
)
from tensorboard.util import tensor_util

from kernelgrad.utils.tensorboard import SummaryWriter


def read(folder) -> EventAccumulator:
    accumulator = EventAccumulator(str(folder), size_guidance={"tensors": 0, "images": 0})
    accumulator.Reload()
    return accumulator


def test_scalars_histograms_images_and_text_read_back(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        for step in range(3):
            writer.add_scalar("loss", kg.tensor(1.0 / (step + 1)), step)
        writer.add_scalar("accuracy", np.float64(0.75), 5, new_style=True)
        values = np.random.default_rng(0).standard_normal(1000)
        writer.add_histogram("weights", kg.tensor(values), 1)
        writer.add_histogram("counts", values, 2, bins=10)
        writer.add_image("chw", kg.rand(3, 5, 7), 0)
        writer.add_image(
            "hw", (np.arange(20).reshape(4, 5) * 10).astype(np.uint8), 0, dataformats="HW"
        )
        writer.add_images("grid", np.zeros((10, 1, 4, 4), np.float32), 0)
        writer.add_text("note", "**trained**", 3)
    run = read(tmp_path)
    losses = run.Scalars("loss")
    assert [e.step for e in losses] == [0, 1, 2]
    np.testing.assert_allclose([e.value for e in losses], [1.0, 0.5, 1 / 3], rtol=1e-6)
    accuracy = run.Tensors("accuracy")[0]
    assert accuracy.step == 5 and tensor_util.make_ndarray(accuracy.tensor_proto) == 0.75
    weights = run.Histograms("weights")[0].histogram_value
    assert weights.num == 1000 and sum(weights.bucket) == 1000
    assert weights.min == pytest.approx(values.min()) and weights.max == pytest.approx(values.max())
    assert weights.bucket_limit[0] <= values.min() or weights.bucket[0] == 0
    assert sum(run.Histograms("counts")[0].histogram_value.bucket) == 1000
    image = run.Images("chw")[0]
    assert (image.width, image.height) == (7, 5)
    assert image.encoded_image_string.startswith(b"\x89PNG")
    assert (run.Images("grid")[0].width, run.Images("grid")[0].height) == (32, 8)
    text = run.Tensors("note/text_summary")[0]
    assert tensor_util.make_ndarray(text.tensor_proto).tolist() == [b"**trained**"]


def test_images_decode_to_the_logged_pixels(tmp_path):
    pytest.importorskip("PIL")
    import io

    from PIL import Image

    pixels = (np.arange(60).reshape(4, 5, 3) * 4).astype(np.uint8)
    with SummaryWriter(tmp_path) as writer:
        writer.add_image("rgb", pixels, 0, dataformats="HWC")
        writer.add_image("float", kg.tensor(pixels.transpose(2, 0, 1) / 255.0), 0)
    run = read(tmp_path)
    for tag in ("rgb", "float"):
        decoded = np.asarray(Image.open(io.BytesIO(run.Images(tag)[0].encoded_image_string)))
        np.testing.assert_array_equal(decoded, pixels)


def test_add_scalars_writes_one_folder_per_series(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        for step in range(2):
            writer.add_scalars("loss", {"train": 1.0 + step, "test": 2.0 + step}, step)
    for series, first in (("train", 1.0), ("test", 2.0)):
        events = read(tmp_path / f"loss_{series}").Scalars("loss")
        assert [(e.step, e.value) for e in events] == [(0, first), (1, first + 1)]


def test_graph_pr_curve_hparams_and_embedding(tmp_path):
    model = kg.nn.Sequential(kg.nn.Linear(4, 3), kg.nn.ReLU(), kg.nn.Linear(3, 2))
    with SummaryWriter(tmp_path) as writer:
        writer.add_graph(model, kg.ones(5, 4))
        labels = np.array([0, 0, 1, 1])
        writer.add_pr_curve("pr", labels, np.array([0.1, 0.6, 0.4, 0.9]), 0, num_thresholds=5)
        writer.add_hparams({"lr": 0.1, "optimizer": "adam"}, {"final/loss": 0.25}, run_name="a")
        writer.add_embedding(
            kg.randn(6, 3), metadata=list(range(6)), label_img=kg.rand(6, 1, 4, 4), tag="points"
        )
    run = read(tmp_path)
    graph = run.Graph()
    names = {node.name: node for node in graph.node}
    assert {"0/weight", "0/bias", "2/weight", "2/bias", "input/0", "output/0"} <= set(names)
    ops = sorted(node.op for node in graph.node)
    assert ops.count("Parameter") == 4 and "Relu" in ops
    relu = next(node for node in graph.node if node.op == "Relu")
    assert len(relu.input) == 1 and relu.input[0] in names
    curve = tensor_util.make_ndarray(run.Tensors("pr")[0].tensor_proto)
    assert curve.shape == (6, 5)
    # threshold 0: everything predicted positive: 2 true positives, 2 false positives
    assert curve[:4, 0].tolist() == [2, 2, 0, 0] and curve[4, 0] == 0.5 and curve[5, 0] == 1
    hparams = read(tmp_path / "a")
    assert [e.value for e in hparams.Scalars("final/loss")] == [0.25]
    assert "_hparams_/session_start_info" in hparams.summary_metadata
    config = (tmp_path / "projector_config.pbtxt").read_text()
    assert 'tensor_path: "00000/points/tensors.tsv"' in config
    assert np.loadtxt(tmp_path / "00000/points/tensors.tsv").shape == (6, 3)
    assert os.path.getsize(tmp_path / "00000/points/sprite.png") > 0


def test_errors_name_the_problem(tmp_path, monkeypatch):
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match=r"expected one number, got an array of shape \(2,\)"):
            writer.add_scalar("loss", kg.ones(2))
        with pytest.raises(ValueError, match="does not match dataformats='CHW'"):
            writer.add_image("image", np.zeros((4, 4)))
        with pytest.raises(ValueError, match="NaN or infinity"):
            writer.add_histogram("h", np.array([1.0, np.nan]))
        with pytest.raises(NotImplementedError, match="add_audio is not supported"):
            writer.add_audio("sound", np.zeros(10))
    monkeypatch.chdir(tmp_path)
    with SummaryWriter(comment="_run") as default:  # runs/<date>_<host>_run, as in PyTorch
        assert default.get_logdir().startswith("runs") and default.get_logdir().endswith("_run")
    assert len(os.listdir(tmp_path / default.get_logdir())) == 1  # its event file


def test_without_the_package_the_import_error_names_the_extra():
    import subprocess
    import sys

    from tests.helpers import ROOT

    code = (
        "import sys; sys.modules['tensorboard'] = None\n"
        "try:\n    import kernelgrad.utils.tensorboard\n"
        "except ImportError as error:\n    print(error)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert "pip install 'kernelgrad[tensorboard]'" in done.stdout, done.stderr


def test_a_matplotlib_figure_becomes_an_image(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(2, 1), dpi=50)
    plt.plot([0, 1], [1, 0])
    with SummaryWriter(tmp_path) as writer:
        writer.add_figure("curve", figure, 0)
    image = read(tmp_path).Images("curve")[0]
    assert (image.width, image.height) == (100, 50)
    assert not plt.fignum_exists(figure.number)  # closed, as with PyTorch's close=True
