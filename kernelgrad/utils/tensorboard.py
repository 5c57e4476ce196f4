"""``kg.utils.tensorboard.SummaryWriter``: PyTorch's TensorBoard logger.

Event files are written by the ``tensorboard`` package's own writer
(``EventFileWriter``) with its protocol buffers and plugin metadata, so TensorBoard reads
them as it reads PyTorch's. ``tensorboard`` is an optional dependency:
``pip install 'kernelgrad[tensorboard]'``.

What is written, as in PyTorch: scalars (``add_scalar``; ``add_scalars`` in one
sub-folder per series), histograms, images (PNG, encoded here), text, matplotlib
figures, precision-recall curves, hyperparameters, embeddings for the projector, and
``add_graph``: the operations autograd records for one forward pass (a node per
operation, named after it: ``MulBackward0`` becomes ``Mul_0``; parameters keep their
names, ``fc1.weight`` as ``fc1/weight``). Audio, video, meshes and custom scalar
layouts are not written (``NotImplementedError`` says so).

>>> import tempfile
>>> from kernelgrad.utils.tensorboard import SummaryWriter
>>> with SummaryWriter(tempfile.mkdtemp()) as writer:
...     for step in range(3):
...         writer.add_scalar("loss", 1.0 / (step + 1), step)
"""

from __future__ import annotations

import math
import os
import socket
import struct
import time
import zlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

try:
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog
    from tensorboard.compat.proto.graph_pb2 import GraphDef
    from tensorboard.compat.proto.node_def_pb2 import NodeDef
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary
    from tensorboard.compat.proto.versions_pb2 import VersionDef
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "kernelgrad.utils.tensorboard needs the tensorboard package: "
        "pip install 'kernelgrad[tensorboard]' (or pip install tensorboard)"
    ) from error

from ..tensor import Tensor

__all__ = ["SummaryWriter"]


def _numpy(value: Any) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _scalar(value: Any, tag: str) -> float:
    array = _numpy(value)
    if array.size != 1:
        raise ValueError(
            f"add_scalar({tag!r}): expected one number, got an array of shape {array.shape}; "
            "log its mean or one element, or use add_histogram for many values"
        )
    return float(array.reshape(()))


# --- images -----------------------------------------------------------------------------------
def _png(image: np.ndarray) -> bytes:
    """PNG bytes of an (H, W, C) uint8 image with C = 1, 3 or 4 channels."""
    height, width, channels = image.shape
    color_type = {1: 0, 3: 2, 4: 6}[channels]
    rows = np.concatenate([np.zeros((height, 1), np.uint8), image.reshape(height, -1)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def _to_hwc(image: np.ndarray, dataformats: str) -> np.ndarray:
    """An image in ``dataformats`` (``CHW``, ``HWC``, ``HW``; ``NCHW``/``NHWC`` grids)
    as (H, W, C) with C = 1, 3 or 4."""
    dataformats = dataformats.upper()
    if image.ndim != len(dataformats) or sorted(dataformats) != sorted(set(dataformats)):
        raise ValueError(
            f"an image of shape {image.shape} does not match dataformats={dataformats!r} "
            "(use 'CHW', 'HWC' or 'HW' for one image, 'NCHW' or 'NHWC' for several)"
        )
    if "N" in dataformats:
        image = _grid(image.transpose([dataformats.index(d) for d in "NCHW"]))
        dataformats = "CHW"
    if dataformats == "HW":
        image = image[None]
        dataformats = "CHW"
    hwc = image.transpose([dataformats.index(d) for d in "HWC"])
    if hwc.shape[2] not in (1, 3, 4):
        raise ValueError(f"an image needs 1, 3 or 4 channels, got {hwc.shape[2]}")
    return hwc


def _grid(images: np.ndarray, columns: int = 8) -> np.ndarray:
    """(N, C, H, W) images side by side, ``columns`` per row, as one (C, H', W') image."""
    count, channels, height, width = images.shape
    if channels == 1:
        images = np.repeat(images, 3, axis=1)
        channels = 3
    columns = max(1, min(count, columns))
    rows = math.ceil(count / columns)
    canvas = np.zeros((channels, rows * height, columns * width), dtype=images.dtype)
    for index in range(count):
        row, column = divmod(index, columns)
        canvas[:, row * height : (row + 1) * height, column * width : (column + 1) * width] = (
            images[index]
        )
    return canvas


def _image_summary(tag: str, image: Any, dataformats: str) -> Summary:
    array = _numpy(image)
    hwc = _to_hwc(array, dataformats)
    scale = 1 if hwc.dtype == np.uint8 else 255  # floats are in [0, 1], as in PyTorch
    pixels = np.clip(hwc.astype(np.float32) * scale, 0, 255).astype(np.uint8)
    proto = Summary.Image(
        height=pixels.shape[0],
        width=pixels.shape[1],
        colorspace=pixels.shape[2],
        encoded_image_string=_png(pixels),
    )
    return Summary(value=[Summary.Value(tag=tag, image=proto)])


# --- histograms and curves ----------------------------------------------------------------------
def _tensorflow_bins() -> np.ndarray:
    """TensorBoard's default bucket limits: +-1e-12 growing by 10% to 1e20, and 0."""
    positive = 1e-12 * 1.1 ** np.arange(math.ceil(math.log(1e32) / math.log(1.1)))
    return np.concatenate([-positive[::-1], [0.0], positive])


def _histogram(values: np.ndarray, bins: Any, max_bins: int | None) -> HistogramProto:
    values = values.reshape(-1).astype(np.float64)
    if values.size == 0:
        raise ValueError("add_histogram: the values are empty")
    if not np.all(np.isfinite(values)):
        raise ValueError("add_histogram: the values contain NaN or infinity")
    counts, limits = np.histogram(values, bins=_tensorflow_bins() if bins == "tensorflow" else bins)
    if max_bins is not None and len(counts) > max_bins:
        group = math.ceil(len(counts) / max_bins)
        padded = np.pad(counts, (0, -len(counts) % group))
        counts = padded.reshape(-1, group).sum(axis=1)
        limits = np.append(limits[:-1:group], limits[-1])
    # TensorBoard stores right edges only: keep the occupied range plus one empty bucket
    # on the left, whose right edge is the range's left edge.
    occupied = np.flatnonzero(counts)
    first, last = int(occupied[0]), int(occupied[-1]) + 1
    left = np.concatenate([[0], counts[first:last]])
    return HistogramProto(
        min=float(values.min()),
        max=float(values.max()),
        num=int(values.size),
        sum=float(values.sum()),
        sum_squares=float(values @ values),
        bucket_limit=limits[first : last + 1].tolist(),
        bucket=left.tolist(),
    )


def _pr_curve(labels: np.ndarray, predictions: np.ndarray, thresholds: int, weights: Any) -> Any:
    """(6, thresholds): true/false positives, true/false negatives, precision, recall at
    ``thresholds`` evenly spaced thresholds (TensorBoard's pr_curves layout)."""
    labels = labels.reshape(-1).astype(np.float64)
    predictions = predictions.reshape(-1).astype(np.float64)
    weights = 1.0 if weights is None else _numpy(weights).reshape(-1).astype(np.float64)
    buckets = np.floor(np.clip(predictions, 0, 1) * (thresholds - 1)).astype(np.int64)
    true = np.bincount(buckets, weights=labels * weights, minlength=thresholds)
    false = np.bincount(buckets, weights=(1 - labels) * weights, minlength=thresholds)
    true_positives = np.cumsum(true[::-1])[::-1]
    false_positives = np.cumsum(false[::-1])[::-1]
    true_negatives = false_positives[0] - false_positives
    false_negatives = true_positives[0] - true_positives
    precision = true_positives / np.maximum(1e-7, true_positives + false_positives)
    recall = true_positives / np.maximum(1e-7, true_positives + false_negatives)
    return np.stack(
        [true_positives, false_positives, true_negatives, false_negatives, precision, recall]
    )


# --- graphs ---------------------------------------------------------------------------------------
def _graph(model: Any, inputs: Any) -> GraphDef:
    """The operations autograd recorded for ``model(*inputs)``: one node per operation,
    parameters under their names, inputs as ``input/i``, outputs as ``output/i``."""
    from ..autograd import AccumulateGrad, enable_grad

    inputs = inputs if isinstance(inputs, tuple | list) else (inputs,)
    watched = []
    for value in inputs:
        if isinstance(value, Tensor) and value.dtype.is_floating_point:
            value = value.detach().requires_grad_(True)
        watched.append(value)
    with enable_grad():
        outputs = model(*watched)
    outputs = outputs if isinstance(outputs, tuple | list) else (outputs,)
    leaves = {id(p): (name.replace(".", "/"), "Parameter") for name, p in model.named_parameters()}
    for index, value in enumerate(watched):
        if isinstance(value, Tensor):
            leaves[id(value)] = (f"input/{index}", "Input")
    nodes: dict[int, NodeDef] = {}
    counter: dict[str, int] = {}

    def visit(function: Any) -> str:
        """The node name of a grad_fn (adding it and its inputs to ``nodes``)."""
        if isinstance(function, AccumulateGrad):
            leaf = function.variable
            if id(leaf) not in nodes:
                name, op = leaves.get(id(leaf), (f"constant/{len(nodes)}", "Constant"))
                nodes[id(leaf)] = NodeDef(name=name, op=op)
            return nodes[id(leaf)].name
        if id(function) in nodes:
            return nodes[id(function)].name
        stack = [(function, False)]
        while stack:  # iterative: a deep network must not hit the recursion limit
            node, expanded = stack.pop()
            if id(node) in nodes:
                continue
            children = [child for child, _ in node.next_functions if child is not None]
            pending = [c for c in children if not isinstance(c, AccumulateGrad)]
            pending = [c for c in pending if id(c) not in nodes]
            if not expanded and pending:
                stack.append((node, True))
                stack.extend((child, False) for child in pending)
                continue
            op = node.name().removesuffix("Backward0")
            counter[op] = counter.get(op, -1) + 1
            node_def = NodeDef(name=f"{op}_{counter[op]}", op=op)
            node_def.input.extend(visit(child) for child in children)
            nodes[id(node)] = node_def
        return nodes[id(function)].name

    output_nodes = []
    for index, output in enumerate(outputs):
        if isinstance(output, Tensor) and output.grad_fn is not None:
            node = NodeDef(name=f"output/{index}", op="Output")
            node.input.append(visit(output.grad_fn))
            output_nodes.append(node)
    return GraphDef(node=[*nodes.values(), *output_nodes], versions=VersionDef(producer=22))


# --- the writer ---------------------------------------------------------------------------------
class SummaryWriter:
    """Writes TensorBoard event files into ``log_dir`` (PyTorch's ``SummaryWriter``).

    Args:
        log_dir: the folder (default ``runs/<date>_<host><comment>``).
        comment: appended to the default folder name.
        purge_step: on a resumed run, hide the events of steps >= this in TensorBoard.
        max_queue: events held before a write (then flushed).
        flush_secs: the longest time events wait before they are written.
        filename_suffix: appended to the event file's name.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike | None = None,
        comment: str = "",
        purge_step: int | None = None,
        max_queue: int = 10,
        flush_secs: int = 120,
        filename_suffix: str = "",
    ) -> None:
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = os.fspath(log_dir)
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self._writers: dict[str, EventFileWriter] = {}
        self._writer(self.log_dir)

    # -- files --
    def _writer(self, folder: str) -> EventFileWriter:
        writer = self._writers.get(folder)
        if writer is None:
            writer = EventFileWriter(folder, self.max_queue, self.flush_secs, self.filename_suffix)
            self._writers[folder] = writer
            if self.purge_step is not None:
                start = SessionLog(status=SessionLog.START)
                writer.add_event(
                    Event(wall_time=time.time(), step=self.purge_step, session_log=start)
                )
        return writer

    def get_logdir(self) -> str:
        """The folder the main event file is written to."""
        return self.log_dir

    def _add(
        self,
        summary: Summary,
        global_step: int | None,
        walltime: float | None,
        folder: str | None = None,
    ) -> None:
        event = Event(wall_time=time.time() if walltime is None else walltime, summary=summary)
        if global_step is not None:
            event.step = int(global_step)
        self._writer(folder or self.log_dir).add_event(event)

    # -- what can be logged --
    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        new_style: bool = False,
        double_precision: bool = False,
    ) -> None:
        """Log one number (a Python number, a NumPy scalar or a one-element tensor)."""
        value = _scalar(scalar_value, tag)
        if new_style:
            from tensorboard.plugins.scalar import metadata

            dtype = np.float64 if double_precision else np.float32
            proto = tensor_util.make_tensor_proto(np.asarray(value, dtype=dtype))
            metadata_proto = metadata.create_summary_metadata(display_name="", description="")
            entry = Summary.Value(tag=tag, tensor=proto, metadata=metadata_proto)
        else:
            entry = Summary.Value(tag=tag, simple_value=value)
        self._add(Summary(value=[entry]), global_step, walltime)

    def add_scalars(
        self,
        main_tag: str,
        tag_scalar_dict: Mapping[str, Any],
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """Log several series in one chart: each goes to the folder
        ``<log_dir>/<main_tag>_<key>`` under the tag ``main_tag``, as in PyTorch."""
        walltime = time.time() if walltime is None else walltime
        for key, value in tag_scalar_dict.items():
            folder = os.path.join(self.log_dir, f"{main_tag.replace('/', '_')}_{key}")
            summary = Summary(value=[Summary.Value(tag=main_tag, simple_value=_scalar(value, key))])
            self._add(summary, global_step, walltime, folder)

    def add_histogram(
        self,
        tag: str,
        values: Any,
        global_step: int | None = None,
        bins: Any = "tensorflow",
        walltime: float | None = None,
        max_bins: int | None = None,
    ) -> None:
        """Log the distribution of ``values`` (``bins``: TensorBoard's default buckets,
        a count, or any of NumPy's bin rules such as ``"auto"``)."""
        histogram = _histogram(_numpy(values), bins, max_bins)
        self._add(Summary(value=[Summary.Value(tag=tag, histo=histogram)]), global_step, walltime)

    def add_image(
        self,
        tag: str,
        img_tensor: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        dataformats: str = "CHW",
    ) -> None:
        """Log an image: floats in [0, 1] or uint8 in [0, 255], with 1, 3 or 4 channels
        laid out as ``dataformats`` says."""
        self._add(_image_summary(tag, img_tensor, dataformats), global_step, walltime)

    def add_images(
        self,
        tag: str,
        img_tensor: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        dataformats: str = "NCHW",
    ) -> None:
        """Log a batch of images as one grid, 8 per row."""
        self._add(_image_summary(tag, img_tensor, dataformats), global_step, walltime)

    def add_figure(
        self,
        tag: str,
        figure: Any,
        global_step: int | None = None,
        close: bool = True,
        walltime: float | None = None,
    ) -> None:
        """Log a matplotlib figure (or a list of them, as a grid) as an image."""
        figures = figure if isinstance(figure, list) else [figure]
        images = []
        for item in figures:
            item.canvas.draw()
            images.append(np.asarray(item.canvas.buffer_rgba())[..., :3].transpose(2, 0, 1))
            if close:
                import matplotlib.pyplot as plt

                plt.close(item)
        image = np.stack(images) if isinstance(figure, list) else images[0]
        formats = "NCHW" if isinstance(figure, list) else "CHW"
        self._add(_image_summary(tag, image, formats), global_step, walltime)

    def add_text(
        self,
        tag: str,
        text_string: str,
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """Log a text (rendered as Markdown by TensorBoard)."""
        from tensorboard.plugins.text import metadata

        proto = tensor_util.make_tensor_proto([text_string.encode("utf-8")])
        entry = Summary.Value(
            tag=f"{tag}/text_summary",
            tensor=proto,
            metadata=metadata.create_summary_metadata(display_name="", description=""),
        )
        self._add(Summary(value=[entry]), global_step, walltime)

    def add_pr_curve(
        self,
        tag: str,
        labels: Any,
        predictions: Any,
        global_step: int | None = None,
        num_thresholds: int = 127,
        weights: Any = None,
        walltime: float | None = None,
    ) -> None:
        """Log a precision-recall curve of binary ``labels`` against ``predictions`` in
        [0, 1], evaluated at ``num_thresholds`` thresholds."""
        from tensorboard.plugins.pr_curve import metadata

        curve = _pr_curve(_numpy(labels), _numpy(predictions), num_thresholds, weights)
        entry = Summary.Value(
            tag=tag,
            tensor=tensor_util.make_tensor_proto(curve.astype(np.float32)),
            metadata=metadata.create_summary_metadata(
                display_name=tag, description="", num_thresholds=num_thresholds
            ),
        )
        self._add(Summary(value=[entry]), global_step, walltime)

    def add_hparams(
        self,
        hparam_dict: Mapping[str, Any],
        metric_dict: Mapping[str, Any],
        hparam_domain_discrete: Mapping[str, Sequence[Any]] | None = None,
        run_name: str | None = None,
        global_step: int | None = None,
    ) -> None:
        """Log one run's hyperparameters and final metrics for TensorBoard's HParams
        view, in a sub-folder ``run_name`` (default: the current time), as PyTorch does."""
        from google.protobuf import struct_pb2
        from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

        def value(item: Any) -> struct_pb2.Value:
            if isinstance(item, bool):
                return struct_pb2.Value(bool_value=item)
            if isinstance(item, int | float | np.number):
                return struct_pb2.Value(number_value=float(item))
            if isinstance(item, str):
                return struct_pb2.Value(string_value=item)
            if isinstance(item, Tensor):
                return struct_pb2.Value(number_value=_scalar(item, "hparam"))
            raise TypeError(f"add_hparams: {item!r} is not a bool, number, string or tensor")

        def summary(tag: str, **data: Any) -> Summary:
            content = plugin_data_pb2.HParamsPluginData(version=0, **data)
            entry = Summary.Value(tag=tag, metadata=metadata.create_summary_metadata(content))
            return Summary(value=[entry])

        infos = []
        for name in hparam_dict:
            info = api_pb2.HParamInfo(name=name)
            if hparam_domain_discrete and name in hparam_domain_discrete:
                info.domain_discrete.extend(value(v) for v in hparam_domain_discrete[name])
            infos.append(info)
        metrics = [api_pb2.MetricInfo(name=api_pb2.MetricName(tag=name)) for name in metric_dict]
        folder = os.path.join(self.log_dir, run_name or str(time.time()))
        experiment = api_pb2.Experiment(hparam_infos=infos, metric_infos=metrics)
        self._add(summary(metadata.EXPERIMENT_TAG, experiment=experiment), None, None, folder)
        start = plugin_data_pb2.SessionStartInfo(start_time_secs=time.time())
        for name, item in hparam_dict.items():
            start.hparams[name].CopyFrom(value(item))
        self._add(
            summary(metadata.SESSION_START_INFO_TAG, session_start_info=start), None, None, folder
        )
        end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS)
        self._add(summary(metadata.SESSION_END_INFO_TAG, session_end_info=end), None, None, folder)
        for name, metric in metric_dict.items():
            scalar = Summary(value=[Summary.Value(tag=name, simple_value=_scalar(metric, name))])
            self._add(scalar, global_step, None, folder)

    def add_graph(
        self,
        model: Any,
        input_to_model: Any = None,
        verbose: bool = False,
        use_strict_trace: bool = True,
    ) -> None:
        """Log the graph of ``model(input_to_model)``: the operations autograd records
        for one forward pass (see the module docstring)."""
        if input_to_model is None:
            raise ValueError("add_graph needs an example input: add_graph(model, inputs)")
        graph = _graph(model, input_to_model)
        if verbose:
            print(graph)
        self._writer(self.log_dir).add_event(
            Event(wall_time=time.time(), graph_def=graph.SerializeToString())
        )

    def add_embedding(
        self,
        mat: Any,
        metadata: Sequence[Any] | None = None,
        label_img: Any = None,
        global_step: int | None = None,
        tag: str = "default",
        metadata_header: Sequence[str] | None = None,
    ) -> None:
        """Save vectors (one per row of ``mat``), their labels and thumbnail images for
        TensorBoard's projector (``<log_dir>/<step>/<tag>/`` and
        ``projector_config.pbtxt``)."""
        from google.protobuf import text_format
        from tensorboard.plugins.projector.projector_config_pb2 import EmbeddingInfo

        vectors = _numpy(mat)
        if vectors.ndim != 2:
            raise ValueError(f"add_embedding: mat must be 2-D (N x D), got shape {vectors.shape}")
        subfolder = f"{str(global_step or 0).zfill(5)}/{tag.replace('/', '_')}"
        folder = os.path.join(self.log_dir, subfolder)
        os.makedirs(folder, exist_ok=True)
        np.savetxt(os.path.join(folder, "tensors.tsv"), vectors, delimiter="\t", fmt="%.8g")
        info = EmbeddingInfo(
            tensor_name=f"{tag}:{str(global_step or 0).zfill(5)}",
            tensor_path=f"{subfolder}/tensors.tsv",
        )
        if metadata is not None:
            with open(os.path.join(folder, "metadata.tsv"), "w", encoding="utf-8") as handle:
                if metadata_header is not None:
                    handle.write("\t".join(metadata_header) + "\n")
                for row in metadata:
                    cells = row if isinstance(row, list | tuple) else [row]
                    handle.write("\t".join(str(c) for c in cells) + "\n")
            info.metadata_path = f"{subfolder}/metadata.tsv"
        if label_img is not None:
            images = _numpy(label_img)  # (N, C, H, W)
            sprite = _grid(images, columns=math.ceil(math.sqrt(len(images))))
            pixels = _to_hwc(sprite, "CHW")
            scale = 1 if pixels.dtype == np.uint8 else 255
            pixels = np.clip(pixels.astype(np.float32) * scale, 0, 255).astype(np.uint8)
            with open(os.path.join(folder, "sprite.png"), "wb") as handle:
                handle.write(_png(pixels))
            info.sprite.image_path = f"{subfolder}/sprite.png"
            info.sprite.single_image_dim.extend([images.shape[3], images.shape[2]])
        with open(os.path.join(self.log_dir, "projector_config.pbtxt"), "a") as handle:
            handle.write("embeddings {\n" + text_format.MessageToString(info) + "}\n")

    def _not_written(self, what: str) -> None:
        raise NotImplementedError(
            f"SummaryWriter.{what} is not supported by kernelgrad; scalars, histograms, "
            "images, figures, text, PR curves, hyperparameters, graphs and embeddings are"
        )

    def add_audio(self, *args: Any, **kwargs: Any) -> None:
        self._not_written("add_audio")

    def add_video(self, *args: Any, **kwargs: Any) -> None:
        self._not_written("add_video")

    def add_mesh(self, *args: Any, **kwargs: Any) -> None:
        self._not_written("add_mesh")

    def add_custom_scalars(self, *args: Any, **kwargs: Any) -> None:
        self._not_written("add_custom_scalars")

    def flush(self) -> None:
        """Write every pending event to disk."""
        for writer in self._writers.values():
            writer.flush()

    def close(self) -> None:
        """Flush and close every event file (the writer reopens them if used again)."""
        for writer in self._writers.values():
            writer.flush()
            writer.close()
        self._writers = {}

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
