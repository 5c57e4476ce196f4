"""Training curves as a PNG: loss on the left, accuracy on the right.

Matplotlib (Agg backend) draws the plot when it is installed (``pip install
kernelgrad[plot]``). Without it, a small built-in plotter writes the PNG with NumPy and
zlib: lines, grid, tick labels and a legend in a 3x5 pixel font. kernelgrad does not
depend on matplotlib because a training run should never fail, or take a second longer
to start, for the sake of a picture; the numbers themselves are in ``metrics.csv``.

>>> import os, tempfile
>>> from kernelgrad.plotting import save_training_plot
>>> history = {"epoch": [1, 2], "train_loss": [0.9, 0.5], "test_loss": [0.7, 0.6],
...            "train_accuracy": [0.7, 0.8], "test_accuracy": [0.75, 0.79]}
>>> path = os.path.join(tempfile.mkdtemp(), "curves.png")
>>> save_training_plot(path, history, engine="builtin")
'builtin'
>>> open(path, "rb").read(8) == b"\\x89PNG\\r\\n\\x1a\\n"
True
"""

from __future__ import annotations

import io
import itertools
import math
import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["save_training_plot", "write_png"]

TRAIN_COLOUR = (31, 119, 180)
TEST_COLOUR = (255, 127, 14)
STEP_COLOUR = (174, 199, 232)


def save_training_plot(
    path: str | os.PathLike[str], history: dict[str, Sequence[float]], engine: str = "auto"
) -> str:
    """Draw loss and accuracy curves into ``path``; return the engine used
    (``"matplotlib"`` or ``"builtin"``).

    ``history`` holds per-epoch lists ``epoch``, ``train_loss``, ``test_loss``,
    ``train_accuracy``, ``test_accuracy``, and optionally per-step ``step_epoch``
    (fractional epoch) and ``step_loss``.
    """
    if engine not in ("auto", "matplotlib", "builtin"):
        raise ValueError(f"engine must be 'auto', 'matplotlib' or 'builtin', got {engine!r}")
    if engine in ("auto", "matplotlib"):
        try:
            _plot_matplotlib(Path(path), history)
            return "matplotlib"
        except ImportError:
            if engine == "matplotlib":
                raise
    _plot_builtin(Path(path), history)
    return "builtin"


def _series(history: dict[str, Sequence[float]], key: str) -> list[float]:
    return [float(v) for v in history.get(key, []) if v is not None]


# --- matplotlib ---------------------------------------------------------------------------


def _plot_matplotlib(path: Path, history: dict[str, Sequence[float]]) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4), dpi=100)
    loss_axes, accuracy_axes = figure.subplots(1, 2)
    epochs = _series(history, "epoch")
    colours = {k: tuple(c / 255 for c in v) for k, v in _COLOURS.items()}
    if history.get("step_loss"):
        loss_axes.plot(
            _series(history, "step_epoch"),
            _series(history, "step_loss"),
            color=colours["step"],
            linewidth=1,
            label="train (steps)",
        )
    for key, label, colour in (("train_loss", "train", "train"), ("test_loss", "test", "test")):
        if history.get(key):
            loss_axes.plot(epochs, _series(history, key), "o-", color=colours[colour], label=label)
    for key, label, colour in (
        ("train_accuracy", "train", "train"),
        ("test_accuracy", "test", "test"),
    ):
        if history.get(key):
            accuracy_axes.plot(
                epochs, _series(history, key), "o-", color=colours[colour], label=label
            )
    for axes, title in ((loss_axes, "loss"), (accuracy_axes, "accuracy")):
        axes.set_title(title)
        axes.set_xlabel("epoch")
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    from .data._files import atomic_write_bytes

    atomic_write_bytes(path, buffer.getvalue())


_COLOURS = {"train": TRAIN_COLOUR, "test": TEST_COLOUR, "step": STEP_COLOUR}

# --- built-in plotter ---------------------------------------------------------------------

_FONT = {
    "0": ("111", "101", "101", "101", "111"),
    "1": ("010", "110", "010", "010", "111"),
    "2": ("111", "001", "111", "100", "111"),
    "3": ("111", "001", "111", "001", "111"),
    "4": ("101", "101", "111", "001", "001"),
    "5": ("111", "100", "111", "001", "111"),
    "6": ("111", "100", "111", "101", "111"),
    "7": ("111", "001", "010", "010", "010"),
    "8": ("111", "101", "111", "101", "111"),
    "9": ("111", "101", "111", "001", "111"),
    ".": ("000", "000", "000", "000", "010"),
    "-": ("000", "000", "111", "000", "000"),
    "(": ("010", "100", "100", "100", "010"),
    ")": ("010", "001", "001", "001", "010"),
    " ": ("000", "000", "000", "000", "000"),
    "a": ("000", "011", "101", "101", "011"),
    "c": ("000", "011", "100", "100", "011"),
    "e": ("010", "101", "111", "100", "011"),
    "h": ("100", "100", "111", "101", "101"),
    "i": ("010", "000", "010", "010", "010"),
    "l": ("010", "010", "010", "010", "001"),
    "n": ("000", "110", "101", "101", "101"),
    "o": ("000", "010", "101", "101", "010"),
    "p": ("000", "110", "101", "110", "100"),
    "r": ("000", "101", "110", "100", "100"),
    "s": ("000", "011", "110", "011", "110"),
    "t": ("010", "111", "010", "010", "001"),
    "u": ("000", "101", "101", "101", "011"),
    "y": ("000", "101", "011", "001", "110"),
}
_SCALE = 2  # font pixels per glyph dot


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.pixels = np.full((height, width, 3), 255, dtype=np.uint8)

    def rectangle(self, left: int, top: int, right: int, bottom: int, colour: tuple) -> None:
        height, width = self.pixels.shape[:2]
        top, bottom = max(top, 0), min(bottom, height)
        left, right = max(left, 0), min(right, width)
        if top < bottom and left < right:
            self.pixels[top:bottom, left:right] = colour

    def line(self, x0: float, y0: float, x1: float, y1: float, colour: tuple, width: int) -> None:
        steps = int(max(abs(x1 - x0), abs(y1 - y0)) * 2) + 2
        t = np.linspace(0.0, 1.0, steps)
        xs = np.rint(x0 + (x1 - x0) * t).astype(int)
        ys = np.rint(y0 + (y1 - y0) * t).astype(int)
        height, width_px = self.pixels.shape[:2]
        for dx in range(-(width // 2), width - width // 2):
            for dy in range(-(width // 2), width - width // 2):
                x, y = xs + dx, ys + dy
                keep = (x >= 0) & (x < width_px) & (y >= 0) & (y < height)
                self.pixels[y[keep], x[keep]] = colour

    def text(self, x: int, y: int, message: str, colour: tuple = (40, 40, 40)) -> None:
        """Draw ``message`` with its top-left corner at (x, y)."""
        for index, char in enumerate(message.lower()):
            glyph = _FONT.get(char, _FONT[" "])
            left = x + index * 4 * _SCALE
            for row, bits in enumerate(glyph):
                for column, bit in enumerate(bits):
                    if bit == "1":
                        self.rectangle(
                            left + column * _SCALE,
                            y + row * _SCALE,
                            left + (column + 1) * _SCALE,
                            y + (row + 1) * _SCALE,
                            colour,
                        )


def _text_width(message: str) -> int:
    return len(message) * 4 * _SCALE - _SCALE


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    if not math.isfinite(low) or not math.isfinite(high):
        return []
    span = high - low
    raw = span / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _format_tick(value: float, ticks: list[float]) -> str:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    decimals = max(0, min(4, -math.floor(math.log10(step)) if step > 0 else 0))
    if step * 10**decimals % 1 > 1e-6:
        decimals += 1
    return f"{value:.{decimals}f}"


def _panel(
    canvas: _Canvas,
    box: tuple[int, int, int, int],
    title: str,
    curves: list[tuple[list[float], list[float], tuple, int, str]],
) -> None:
    left, top, right, bottom = box
    canvas.text((left + right - _text_width(title)) // 2, top - 16, title)
    xs_all = [x for xs, _, _, _, _ in curves for x in xs]
    ys_all = [y for _, ys, _, _, _ in curves for y in ys if math.isfinite(y)]
    if not xs_all or not ys_all:
        canvas.rectangle(left, top, right, bottom, (245, 245, 245))
        return
    x_low, x_high = min(min(xs_all), 1.0), max(xs_all)
    x_low = min(x_low, 0.0) if any(x < 1 for x in xs_all) else x_low
    if x_high <= x_low:
        x_high = x_low + 1
    y_low, y_high = min(ys_all), max(ys_all)
    padding = (y_high - y_low) * 0.08 or abs(y_high) * 0.1 or 0.1
    y_low, y_high = y_low - padding, y_high + padding

    def px(x: float) -> float:
        return left + (x - x_low) / (x_high - x_low) * (right - left)

    def py(y: float) -> float:
        return bottom - (y - y_low) / (y_high - y_low) * (bottom - top)

    y_ticks = _nice_ticks(y_low, y_high)
    for tick in y_ticks:
        y = round(py(tick))
        canvas.rectangle(left, y, right, y + 1, (225, 225, 225))
        label = _format_tick(tick, y_ticks)
        canvas.text(left - 6 - _text_width(label), y - 5, label)
    x_ticks = [t for t in _nice_ticks(x_low, x_high, 6) if abs(t - round(t)) < 1e-9]
    for tick in x_ticks:
        x = round(px(tick))
        canvas.rectangle(x, top, x + 1, bottom, (225, 225, 225))
        label = str(round(tick))
        canvas.text(x - _text_width(label) // 2, bottom + 6, label)
    canvas.text((left + right - _text_width("epoch")) // 2, bottom + 20, "epoch")
    for edge in ((left, top, right, top + 1), (left, bottom, right, bottom + 1)):
        canvas.rectangle(*edge, (90, 90, 90))
    canvas.rectangle(left, top, left + 1, bottom + 1, (90, 90, 90))
    canvas.rectangle(right, top, right + 1, bottom + 1, (90, 90, 90))
    legend_y = top + 6
    for xs, ys, colour, width, label in curves:
        points = [(px(x), py(y)) for x, y in zip(xs, ys) if math.isfinite(y)]
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            canvas.line(x0, y0, x1, y1, colour, width)
        if width > 1:
            for x, y in points:
                canvas.rectangle(int(x) - 3, int(y) - 3, int(x) + 4, int(y) + 4, colour)
        if label:
            canvas.rectangle(right - 80, legend_y + 3, right - 64, legend_y + 6, colour)
            canvas.text(right - 58, legend_y, label)
            legend_y += 14


def _plot_builtin(path: Path, history: dict[str, Sequence[float]]) -> None:
    canvas = _Canvas(960, 400)
    epochs = _series(history, "epoch")
    loss_curves = []
    if history.get("step_loss"):
        loss_curves.append(
            (_series(history, "step_epoch"), _series(history, "step_loss"), STEP_COLOUR, 1, "")
        )
    loss_curves.append((epochs, _series(history, "train_loss"), TRAIN_COLOUR, 2, "train"))
    loss_curves.append((epochs, _series(history, "test_loss"), TEST_COLOUR, 2, "test"))
    accuracy_curves = [
        (epochs, _series(history, "train_accuracy"), TRAIN_COLOUR, 2, "train"),
        (epochs, _series(history, "test_accuracy"), TEST_COLOUR, 2, "test"),
    ]
    loss_curves = [c for c in loss_curves if c[0] and len(c[0]) == len(c[1])]
    accuracy_curves = [c for c in accuracy_curves if c[0] and len(c[0]) == len(c[1])]
    _panel(canvas, (70, 40, 450, 340), "loss", loss_curves)
    _panel(canvas, (550, 40, 930, 340), "accuracy", accuracy_curves)
    write_png(path, canvas.pixels)


def write_png(path: str | os.PathLike[str], pixels: Any) -> None:
    """Write an (H, W, 3) uint8 RGB array as a PNG file (zlib, no other dependency)."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"write_png expects an (H, W, 3) array, got shape {pixels.shape}")
    height, width = pixels.shape[:2]
    rows = np.concatenate([np.zeros((height, 1), dtype=np.uint8), pixels.reshape(height, -1)], 1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    payload = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )
    from .data._files import atomic_write_bytes

    atomic_write_bytes(Path(path), payload)
