"""The ``kernelgrad`` command: ``train``, ``evaluate``, ``info`` and ``download``.

``kernelgrad train`` trains LeNet-5 (or ``--model mlp|cnn``) on Fashion-MNIST (or
``--dataset mnist|digits``) on the best available device, with a progress bar on
stderr, per-epoch test accuracy, a checkpoint every epoch (``--resume`` continues a
run exactly where it stopped), and metrics (JSON, CSV) and a loss/accuracy plot (PNG)
in the run folder. ``kernelgrad evaluate CHECKPOINT`` reports test accuracy, loss and
per-class accuracy. Expected user errors (a missing or corrupt dataset, a checkpoint of
another model, an unknown device) print one message and exit with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

__all__ = ["UserError", "main"]

MODELS = ("lenet", "mlp", "cnn")
DEFAULT_DATASET = "fashion-mnist"
DEFAULT_EPOCHS = 5
DIGITS_EPOCHS = 10  # default --epochs for the small embedded dataset
CHECKPOINT_KIND = "kernelgrad-train"
CHECKPOINT_NAME = "checkpoint.safetensors"


class UserError(Exception):
    """An error the user can fix; the command prints the message and exits with 2."""


def _process_age() -> float | None:
    """Seconds since this process started (Linux), or None where that is unknown."""
    try:
        with open("/proc/self/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


# --- progress -------------------------------------------------------------------------------


class Progress:
    """A progress line on ``stream``: samples done, samples/s, running loss, ETA.

    On a terminal the line is redrawn in place (at most 10 times a second); in a log
    file (not a TTY) a plain line is written at each quarter of the epoch, so that a
    log stays short and readable.
    """

    def __init__(self, total: int, label: str, stream: TextIO | None = None) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self.last_draw = 0.0
        self.next_quarter = 1
        self.done = 0

    def _line(self, loss: float | None) -> str:
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        rate = self.done / elapsed
        fraction = self.done / self.total if self.total else 1.0
        width = 24
        filled = int(width * fraction)
        bar = "=" * filled + (">" if filled < width else "") + " " * max(width - filled - 1, 0)
        remaining = (self.total - self.done) / rate if rate > 0 else 0.0
        loss_text = f"  loss {loss:.4f}" if loss is not None and math.isfinite(loss) else ""
        return (
            f"{self.label} [{bar}] {self.done}/{self.total} {fraction:4.0%}  "
            f"{rate:,.0f} samples/s{loss_text}  eta {_duration(remaining)}"
        )

    def wants_update(self, done: int) -> bool:
        """Whether :meth:`update` would draw now (lets callers skip reading the loss)."""
        if done >= self.total:
            return True
        if self.interactive:
            return time.perf_counter() - self.last_draw >= 0.1
        return done * 4 >= self.next_quarter * self.total

    def update(self, done: int, loss: float | None) -> None:
        self.done = done
        if not self.wants_update(done):
            return
        self.last_draw = time.perf_counter()
        if self.interactive:
            self.stream.write("\r" + self._line(loss) + "\x1b[K")
        else:
            while done * 4 >= self.next_quarter * self.total and self.next_quarter <= 4:
                self.next_quarter += 1
            self.stream.write(self._line(loss) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.interactive:
            self.stream.write("\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- devices --------------------------------------------------------------------------------


def _cuda_available() -> tuple[bool, str]:
    """(usable, why not): CUDA tensors can be made here (a GPU, or the simulator)."""
    try:
        from . import cuda
    except ImportError as error:
        return False, f"the CUDA backend cannot be loaded ({error})"
    try:
        if cuda.is_available():
            return True, ""
    except Exception as error:
        return False, f"checking for a GPU failed ({error})"
    return False, "no CUDA GPU or driver was found"


def _real_gpu() -> bool:
    """A real GPU, not numba's simulator (which is far too slow to train on)."""
    available, _ = _cuda_available()
    if not available:
        return False
    from . import cuda

    return not cuda.is_simulated()


def resolve_device(requested: str | None) -> Any:
    """``None``/``"auto"`` -> cuda when available, else cpu; otherwise parse and check."""
    from .device import as_device

    if requested in (None, "", "auto"):
        return as_device("cuda" if _real_gpu() else "cpu")
    try:
        device = as_device(requested)
    except (ValueError, TypeError) as error:
        raise UserError(f"--device {requested}: {error}") from None
    if device.type == "cuda":
        available, reason = _cuda_available()
        if not available:
            raise UserError(
                f"--device {requested}: CUDA is not available: {reason}. Use --device cpu (or "
                "leave --device out to use a GPU only when there is one)."
            )
        count = _cuda_device_count()
        if count is not None and device.index is not None and device.index >= count:
            raise UserError(f"--device {requested}: there are {count} CUDA device(s)")
    return device


def _cuda_device_count() -> int | None:
    try:
        from . import cuda

        return int(cuda.device_count())
    except Exception:
        return None


def set_threads(count: int | None) -> None:
    """Limit the threads of Numba's parallel kernels (``None``: leave the default)."""
    if count is None:
        return
    import numba

    available = numba.config.NUMBA_NUM_THREADS
    if count > available:
        raise UserError(
            f"--threads {count}: at most {available} (NUMBA_NUM_THREADS, the number of cores "
            "by default)"
        )
    numba.set_num_threads(count)


# --- datasets -------------------------------------------------------------------------------


@dataclass
class LoadedData:
    name: str
    train: Any
    test: Any
    source: str


def _download_progress() -> Any:
    state = {"url": None, "last": 0.0}

    def report(url: str, done: int, total: int | None) -> None:
        now = time.perf_counter()
        if url != state["url"]:
            state["url"] = url
            _note(f"downloading {url}")
        if total and (now - state["last"] > 2.0 or done == total):
            state["last"] = now
            _note(f"  {done / 1e6:.1f} / {total / 1e6:.1f} MB")

    return report


def load_data(
    name: str,
    data_dir: str | None,
    *,
    explicit: bool,
    allow_download: bool = True,
    limit_train: int | None = None,
    limit_test: int | None = None,
    need_train: bool = True,
) -> LoadedData:
    """Find (or download, or fall back to the embedded digits) and load a dataset."""
    from . import data as kgdata

    try:
        spec = kgdata.get_spec(name)
    except ValueError as error:
        raise UserError(str(error)) from None
    if data_dir is not None and not Path(data_dir).expanduser().is_dir():
        what = "not a folder" if Path(data_dir).expanduser().exists() else "no such folder"
        raise UserError(
            f"--data {data_dir}: {what}. Give the folder that holds the "
            f"{spec.title} files ({', '.join(n + '.gz' for n in spec.file_names())})."
        )
    try:
        location = kgdata.find_dataset(spec, data_dir)
    except kgdata.DatasetNotFoundError as not_found:
        location = None
        problem = str(not_found)
        if allow_download and spec.downloadable:
            _note(f"{spec.title} was not found locally; trying to download it.")
            try:
                location = kgdata.download_dataset(spec, progress=_download_progress())
            except kgdata.DownloadError as error:
                problem += f"\nDownloading failed: {error}"
        if location is None:
            if explicit or spec.name == "digits":
                raise UserError(problem) from None
            _note(problem)
            _note(
                "Falling back to the small dataset embedded in kernelgrad (1,797 handwritten "
                "digits, UCI, CC BY 4.0) so that this run trains something real; pass "
                f"--dataset {spec.name} to make a missing dataset an error instead."
            )
            return load_data(
                "digits",
                None,
                explicit=True,
                limit_train=limit_train,
                limit_test=limit_test,
                need_train=need_train,
            )
    try:
        train = kgdata.load_dataset(spec, train=True, location=location) if need_train else None
        test = kgdata.load_dataset(spec, train=False, location=location)
    except kgdata.IDXError as error:
        raise UserError(
            f"{spec.title} in {location.folder} is damaged: {error}\nReplace the file (delete "
            "it and download again, or reinstall the package it came from)."
        ) from None
    if limit_train is not None and train is not None and limit_train < len(train):
        train = kgdata.Subset(train, range(limit_train))
    if limit_test is not None and limit_test < len(test):
        test = kgdata.Subset(test, range(limit_test))
    return LoadedData(spec.name, train, test, f"{location.folder} ({location.source})")


def refuse_empty(data: LoadedData, need_train: bool) -> None:
    """A split without samples would train or evaluate on nothing (a loss of nan)."""
    splits = [("training", data.train)] if need_train else []
    for split, dataset in [*splits, ("test", data.test)]:
        if len(dataset) == 0:
            raise UserError(
                f"the {split} split of {data.name} in {data.source} holds no samples, so there "
                "is nothing to train or evaluate on; check the dataset's files (an IDX file "
                "whose header declares 0 items?)"
            )


def check_out_folder(out: Path) -> None:
    """The run folder can be created (or is a folder already): checked before training,
    so that a bad --out does not fail after the first epoch."""
    if out.exists():
        if not out.is_dir():
            raise UserError(f"--out {out}: this is a file, not a folder; give a folder")
        return
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"--out {out}: {parent} is a file, so the run folder cannot be made")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"--out {out}: cannot create a folder in {parent} (permission denied)")


# --- models, optimizers and checkpoints -----------------------------------------------------


def build(model_name: str, device: Any) -> Any:
    from .models import build_model

    if model_name not in MODELS:
        raise UserError(f"--model {model_name}: unknown; choose {', '.join(MODELS)}")
    return build_model(model_name).to(device)


def make_optimizer(name: str, parameters: Any, lr: float, momentum: float) -> Any:
    from . import optim

    if name == "adam":
        return optim.Adam(parameters, lr=lr)
    if name == "adamw":
        return optim.AdamW(parameters, lr=lr)
    if name == "sgd":
        return optim.SGD(parameters, lr=lr, momentum=momentum)
    raise UserError(f"--optimizer {name}: unknown; choose adam, adamw or sgd")


def make_scheduler(name: str, optimizer: Any, lr: float, total_steps: int, done_steps: int) -> Any:
    """The learning-rate schedule, stepped once per batch; None for a constant rate.

    A cosine schedule decays from ``lr`` to 0 over the run's planned steps. Its state is
    a function of the step count, so a resumed run recreates it at ``done_steps`` (from
    the configured ``lr``, not the decayed rate the optimizer was saved with); resuming
    with a larger ``--epochs`` re-plans the decay over the new total from that step."""
    from .optim.lr_scheduler import CosineAnnealingLR

    if name == "constant":
        return None
    if name != "cosine":
        raise UserError(f"--schedule {name}: unknown; choose cosine or constant")
    for group in optimizer.param_groups:
        group["initial_lr"] = lr
    scheduler = CosineAnnealingLR(optimizer, T_max=max(total_steps, 1))
    scheduler.load_state_dict({"last_epoch": done_steps})
    return scheduler


def get_rng_state() -> dict[str, Any]:
    """The random-number state of every backend in use (for an exact resume)."""
    from .backends import loaded_backends

    states: dict[str, Any] = {}
    for device, backend in loaded_backends().items():
        getter = getattr(backend, "get_rng_state", None)
        if getter is not None:
            states[str(device)] = getter()
    return states


def set_rng_state(states: dict[str, Any]) -> None:
    from .backends import get_backend
    from .device import as_device

    for name, state in states.items():
        try:
            backend = get_backend(as_device(name))
        except Exception:
            continue  # a checkpoint from a GPU machine resumed on a CPU-only one
        setter = getattr(backend, "set_rng_state", None)
        if setter is not None:
            setter(state)


def save_run_checkpoint(path: Path, model: Any, optimizer: Any, extra: dict[str, Any]) -> None:
    """Model and optimizer tensors plus the run's JSON values, in one safetensors file
    (written atomically by :func:`kernelgrad.serialization.save_checkpoint`)."""
    from .serialization import save_checkpoint

    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(path, model, optimizer, **extra)


def _atomic_copy(source: Path, destination: Path) -> None:
    from .data._files import atomic_writer

    with atomic_writer(destination) as handle, open(source, "rb") as origin:
        shutil.copyfileobj(origin, handle)


def read_run_checkpoint(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any]]:
    """The path of a `kernelgrad train` checkpoint (``path`` may be a run folder) and
    its stored values (configuration, epoch, ...), checked; nothing is loaded yet."""
    from .serialization import CheckpointError, CheckpointMismatchError, load_checkpoint

    path = Path(path).expanduser()
    if path.is_dir():
        candidate = path / CHECKPOINT_NAME
        if not candidate.is_file():
            raise UserError(f"{path} holds no {CHECKPOINT_NAME}; is it a kernelgrad run folder?")
        path = candidate
    if not path.is_file():
        raise UserError(f"{path}: no such checkpoint file")
    try:
        extra = load_checkpoint(path)  # checks the whole file, changes nothing
    except CheckpointMismatchError:
        raise UserError(
            f"{path} is not a kernelgrad checkpoint (a plain tensor file, perhaps); load it "
            "in Python with kg.serialization.load_file"
        ) from None
    except (CheckpointError, OSError) as error:
        raise UserError(f"cannot read the checkpoint: {error}") from None
    if extra.get("kind") != CHECKPOINT_KIND:
        raise UserError(
            f"{path} is not a `kernelgrad train` checkpoint (it has no run configuration); "
            "load it in Python with kg.serialization.load_checkpoint(path, model)"
        )
    _check_stored_run(path, extra)
    return path, extra


def restore_run_checkpoint(path: Path, model: Any, optimizer: Any, model_name: str) -> None:
    from .serialization import CheckpointError, CheckpointMismatchError, load_checkpoint

    try:
        load_checkpoint(path, model, optimizer)
    except CheckpointMismatchError as error:
        raise UserError(
            f"{path} does not fit the '{model_name}' model: {error}. Was it written for "
            "another model or by another version of kernelgrad?"
        ) from None
    except (CheckpointError, OSError) as error:
        raise UserError(f"cannot read the checkpoint: {error}") from None


# --- training and evaluation ----------------------------------------------------------------


@dataclass
class EpochResult:
    loss: float
    accuracy: float
    samples: int
    seconds: float


@dataclass
class History:
    epoch: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    test_loss: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    samples_per_second: list[float] = field(default_factory=list)
    step_epoch: list[float] = field(default_factory=list)
    step_loss: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, list]:
        return {name: list(value) for name, value in self.__dict__.items()}

    @classmethod
    def from_dict(cls, values: dict[str, list]) -> History:
        history = cls()
        for name in history.__dict__:
            setattr(history, name, list(values.get(name, [])))
        return history


def make_train_step(model: Any, optimizer: Any, compiled: bool = False) -> Any:
    """One training step on a batch: forward, cross-entropy, backward and the optimizer's
    update. Returns the loss and the logits (both detached). With ``compiled`` the step
    runs under ``kg.compile``: traced on its second call for a batch shape, then replayed
    as fused kernels."""
    from .nn import functional

    def train_step(images: Any, labels: Any) -> tuple[Any, Any]:
        logits = model(images)
        loss = functional.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach(), logits.detach()

    if not compiled:
        return train_step
    from .compile import compile as compile_function

    return compile_function(train_step)


class _Tally:
    """Losses and correct predictions of the steps since the last :meth:`flush`, kept as
    device tensors and read back together: per step nothing is launched or read (counting
    correct predictions per step took 7 small kernels, ~2% of a LeNet-5 step); per flush
    one concatenation, argmax, comparison and sum, and one read of the losses."""

    def __init__(self) -> None:
        self.losses: list[Any] = []
        self.logits: list[Any] = []
        self.labels: list[Any] = []
        self.loss_total = 0.0  # sum over samples, on the host
        self.correct = 0

    def add(self, loss: Any, logits: Any, labels: Any) -> None:
        self.losses.append(loss)
        self.logits.append(logits)
        self.labels.append(labels)

    def flush(self) -> float | None:
        """Fold the pending steps into the totals; returns their mean loss (None if none)."""
        import kernelgrad as kg

        if not self.losses:
            return None
        losses = kg.stack(self.losses).tolist()
        logits, labels = kg.cat(self.logits), kg.cat(self.labels)
        self.correct += int((logits.argmax(1) == labels).sum().item())
        self.loss_total += sum(
            loss * int(batch.shape[0]) for loss, batch in zip(losses, self.labels)
        )
        self.losses, self.logits, self.labels = [], [], []
        return sum(losses) / len(losses)


def train_one_epoch(
    model: Any,
    optimizer: Any,
    loader: Any,
    progress: Progress,
    history: History,
    epoch: int,
    on_first_step: Any = None,
    scheduler: Any = None,
    step_fn: Any = None,
) -> EpochResult:
    step_fn = step_fn if step_fn is not None else make_train_step(model, optimizer)
    model.train()
    start = time.perf_counter()
    tally = _Tally()
    samples = 0
    last_mean: float | None = None
    steps = len(loader)
    record_every = max(1, steps // 50)  # about 50 points per epoch for the plot
    for step, (images, labels) in enumerate(loader):
        loss, logits = step_fn(images, labels)
        if scheduler is not None:
            scheduler.step()
        if on_first_step is not None and step == 0:
            loss.item()  # wait for the device to finish the step
            on_first_step()
        samples += int(labels.shape[0])
        tally.add(loss, logits, labels)
        if (step + 1) % record_every == 0 or step == steps - 1:
            last_mean = tally.flush()
            history.step_epoch.append(epoch - 1 + (step + 1) / steps)
            history.step_loss.append(last_mean)
        progress.update(samples, last_mean)
    progress.close()
    seconds = time.perf_counter() - start
    if samples == 0:
        return EpochResult(float("nan"), float("nan"), 0, seconds)
    tally.flush()
    return EpochResult(tally.loss_total / samples, tally.correct / samples, samples, seconds)


def evaluate_model(model: Any, loader: Any, classes: int) -> dict[str, Any]:
    """Loss, accuracy and per-class accuracy over a loader."""
    import numpy as np

    from .autograd import no_grad
    from .nn import functional

    model.eval()
    loss_sum = 0.0
    predictions: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    with no_grad():
        for images, labels in loader:
            logits = model(images)
            loss = functional.cross_entropy(logits, labels, reduction="sum")
            loss_sum += loss.item()
            predictions.append(logits.argmax(1).cpu().numpy().copy())
            targets.append(labels.cpu().numpy().copy())
    if not targets:
        return {"loss": float("nan"), "accuracy": float("nan"), "samples": 0, "per_class": []}
    predicted = np.concatenate(predictions)
    target = np.concatenate(targets)
    per_class = []
    for label in range(classes):
        mask = target == label
        count = int(mask.sum())
        hits = int((predicted[mask] == label).sum())
        per_class.append(
            {"class": label, "samples": count, "accuracy": hits / count if count else None}
        )
    return {
        "loss": loss_sum / len(target),
        "accuracy": float((predicted == target).mean()),
        "samples": len(target),
        "per_class": per_class,
    }


def _write_metrics(folder: Path, config: dict[str, Any], history: History, extra: dict) -> None:
    from .data._files import atomic_write_bytes

    document = {"config": config, **extra, "history": history.as_dict()}
    atomic_write_bytes(folder / "metrics.json", json.dumps(document, indent=2).encode())
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = [
        "epoch",
        "train_loss",
        "train_accuracy",
        "test_loss",
        "test_accuracy",
        "seconds",
        "samples_per_second",
    ]
    writer.writerow(columns)
    for row in zip(*(getattr(history, name) for name in columns)):
        writer.writerow([f"{value:.6g}" if isinstance(value, float) else value for value in row])
    atomic_write_bytes(folder / "metrics.csv", buffer.getvalue().encode())


def _default_out(model: str, dataset: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stamp}-{model}-{dataset}"


@dataclass
class RunSetup:
    config: dict[str, Any]
    out: Path
    done_epochs: int = 0
    explicit_dataset: bool = True
    checkpoint_path: Path | None = None
    checkpoint: dict[str, Any] | None = None


def _new_config(args: argparse.Namespace) -> RunSetup:
    config: dict[str, Any] = {
        "model": args.model or "lenet",
        "dataset": _canonical(args.dataset or DEFAULT_DATASET),
        "epochs": args.epochs if args.epochs is not None else DEFAULT_EPOCHS,
        "data_dir": str(Path(args.data).expanduser().resolve()) if args.data else None,
    }
    for name in _RESUME_FIXED:
        value = getattr(args, name)
        config[name] = _TRAIN_DEFAULTS.get(name) if value is None else value
    out = Path(args.out) if args.out else _default_out(config["model"], config["dataset"])
    return RunSetup(config, out, explicit_dataset=args.dataset is not None)


def _resume_config(args: argparse.Namespace) -> RunSetup:
    """The stored configuration of the run to resume, checked against the options given:
    only --epochs, --device, --data and --out may differ."""
    checkpoint_path, checkpoint = read_run_checkpoint(args.resume)
    config = dict(checkpoint["config"])
    config.setdefault("schedule", "constant")  # runs saved before --schedule existed
    if args.model is not None and args.model != config["model"]:
        raise UserError(
            f"{checkpoint_path} was trained with --model {config['model']}, but --model "
            f"{args.model} was given. Leave --model out to resume it, or start a new run "
            "(without --resume) to train a different model."
        )
    if args.dataset is not None and _canonical(args.dataset) != config["dataset"]:
        raise UserError(
            f"{checkpoint_path} was trained on {config['dataset']}, but --dataset "
            f"{args.dataset} was given; leave --dataset out to resume it"
        )
    changed = [
        f"--{name.replace('_', '-')} {getattr(args, name)} (the run used {config[name]})"
        for name in _RESUME_FIXED
        if getattr(args, name) is not None and getattr(args, name) != config[name]
    ]
    if changed:
        raise UserError(
            f"cannot change {', '.join(changed)} when resuming {checkpoint_path}; leave "
            "these options out to resume, or start a new run"
        )
    if args.epochs is not None:
        config["epochs"] = args.epochs
    if args.data:
        config["data_dir"] = str(Path(args.data).expanduser().resolve())
    done_epochs = int(checkpoint["epoch"])
    if config["epochs"] <= done_epochs:
        raise UserError(
            f"{checkpoint_path} has already trained {done_epochs} of {config['epochs']} "
            f"epochs; pass --epochs N with N > {done_epochs} to train further"
        )
    out = Path(args.out) if args.out else checkpoint_path.parent
    return RunSetup(config, out, done_epochs, True, checkpoint_path, checkpoint)


def command_train(args: argparse.Namespace) -> int:
    import kernelgrad as kg

    from .data import DataLoader
    from .plotting import save_training_plot

    process_age = _process_age()
    entered = time.perf_counter()
    if args.nproc is not None or args.hosts or args.hostfile:  # N processes through mpiexec
        from .distributed.launch import train_with_processes

        return train_with_processes(args, args.argv)
    if args.resume:
        run = _resume_config(args)
    else:
        run = _new_config(args)
    config, out = run.config, run.out
    checkpoint_path, checkpoint_payload = run.checkpoint_path, run.checkpoint
    done_epochs = run.done_epochs
    from .distributed.training import from_environment

    world = from_environment()  # one process, or one rank of a job (--nproc)
    device = world.device(resolve_device(args.device))
    set_threads(args.threads)
    check_out_folder(out)
    data = load_data(
        config["dataset"],
        _data_dir(args.data, config),
        explicit=run.explicit_dataset,
        allow_download=not args.no_download,
        limit_train=config["limit_train"],
        limit_test=config["limit_test"],
    )
    refuse_empty(data, need_train=True)
    config["dataset"] = data.name  # after a fallback to the embedded digits
    if data.name == "digits" and args.epochs is None and not args.resume:
        config["epochs"] = DIGITS_EPOCHS  # 12 steps an epoch: give it enough of them
    kg.manual_seed(config["seed"])
    model = build(config["model"], device)
    optimizer = make_optimizer(
        config["optimizer"], model.parameters(), config["lr"], config["momentum"]
    )
    train_loader = DataLoader(
        data.train,
        batch_size=config["batch_size"],
        shuffle=True,
        seed=config["seed"],
        device=device,
    )
    test_loader = DataLoader(data.test, batch_size=max(config["batch_size"], 256), device=device)
    train_loader, test_loader = world.loaders(train_loader, test_loader)
    history = History()
    if checkpoint_payload is not None:
        restore_run_checkpoint(checkpoint_path, model, optimizer, config["model"])
        train_loader.load_state_dict(checkpoint_payload["loader"])
        try:
            set_rng_state(checkpoint_payload.get("rng", {}))
        except (ValueError, TypeError, KeyError) as error:
            raise UserError(
                f"{checkpoint_path}: its stored random-number state cannot be restored "
                f"({type(error).__name__}: {error}); the file was damaged or written by "
                "other software"
            ) from None
        history = History.from_dict(checkpoint_payload.get("history", {}))
    scheduler = make_scheduler(
        config["schedule"],
        optimizer,
        config["lr"],
        config["epochs"] * len(train_loader),
        done_epochs * len(train_loader),
    )
    if world.is_main:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UserError(f"--out {out}: cannot create the run folder ({error})") from None
    classes = list(data.test.classes)
    print(
        f"kernelgrad train: {config['model']} on {data.name} ({len(data.train)} train / "
        f"{len(data.test)} test samples from {data.source}), device {device}, "
        f"{config['epochs']} epochs, batch {config['batch_size']}, {config['optimizer']} "
        f"lr {config['lr']:g} ({config['schedule']}), run folder {out}",
        flush=True,
    )
    timing: dict[str, Any] = {}

    def first_step() -> None:
        if "first_step_seconds" in timing:
            return
        now = time.perf_counter()
        since_main = now - entered
        timing["first_step_seconds"] = since_main + (process_age or 0.0)
        timing["first_step_seconds_since_main"] = since_main
        _note(
            f"first training step done {timing['first_step_seconds']:.1f} s after the process "
            "started (kernel compilation included; cached kernels make this faster)"
        )

    step_fn = make_train_step(world.wrap(model), optimizer, compiled=args.compile)
    engine = ""
    for epoch in range(done_epochs + 1, config["epochs"] + 1):
        progress = world.progress(Progress(len(data.train), f"epoch {epoch}/{config['epochs']}"))
        result = train_one_epoch(
            model,
            optimizer,
            train_loader,
            progress,
            history,
            epoch,
            on_first_step=first_step if epoch == done_epochs + 1 else None,
            scheduler=scheduler,
            step_fn=step_fn,
        )
        result = world.epoch_result(result)
        evaluation = world.evaluation(
            evaluate_model(model, test_loader, len(classes)), len(classes)
        )
        rate = result.samples / result.seconds if result.seconds > 0 else float("nan")
        history.epoch.append(epoch)
        history.train_loss.append(result.loss)
        history.train_accuracy.append(result.accuracy)
        history.test_loss.append(evaluation["loss"])
        history.test_accuracy.append(evaluation["accuracy"])
        history.seconds.append(result.seconds)
        history.samples_per_second.append(rate)
        print(
            f"epoch {epoch}/{config['epochs']}: train loss {result.loss:.4f} accuracy "
            f"{result.accuracy:.4f} | test loss {evaluation['loss']:.4f} accuracy "
            f"{evaluation['accuracy']:.4f} | {result.seconds:.1f} s, {rate:,.0f} samples/s",
            flush=True,
        )
        stored = {
            "kind": CHECKPOINT_KIND,
            "version": kg.__version__,
            "config": config,
            "epoch": epoch,
            "loader": train_loader.state_dict(),
            "rng": get_rng_state(),
            "history": history.as_dict(),
            "classes": classes,
        }
        if not world.is_main:
            continue
        save_run_checkpoint(out / CHECKPOINT_NAME, model, optimizer, stored)
        save_run_checkpoint(
            out / f"checkpoint-epoch-{epoch:03d}.safetensors", model, optimizer, stored
        )
        extra = {"device": str(device), "data": data.source, **timing, **world.info()}
        _write_metrics(out, config, history, extra)
        engine = save_training_plot(out / "curves.png", history.as_dict())
    print(
        f"done: test accuracy {history.test_accuracy[-1]:.4f}; checkpoint {out / CHECKPOINT_NAME},"
        f" metrics {out / 'metrics.csv'}, plot {out / 'curves.png'} ({engine})",
        flush=True,
    )
    return 0


# Options that a resumed run must keep (they are stored in the checkpoint's config).
_TRAIN_DEFAULTS: dict[str, Any] = {
    "batch_size": 128,
    # Adam at 2e-3 decayed to 0 by a cosine: LeNet-5 reaches ~0.891 test accuracy on
    # Fashion-MNIST in 5 epochs, where a constant 1e-3 gives ~0.886 (PyTorch alike).
    "lr": 2e-3,
    "optimizer": "adam",
    "momentum": 0.9,
    "seed": 0,
    "schedule": "cosine",
}
_RESUME_FIXED = (
    "batch_size",
    "lr",
    "optimizer",
    "momentum",
    "seed",
    "schedule",
    "limit_train",
    "limit_test",
)


def _data_dir(given: str | None, config: dict[str, Any]) -> str | None:
    """--data when given, else the folder the run was trained from (if it still exists)."""
    if given:
        return given
    stored = config.get("data_dir")
    return stored if stored and Path(stored).is_dir() else None


def _canonical(name: str) -> str:
    from .data import get_spec

    try:
        return get_spec(name).name
    except ValueError as error:
        raise UserError(f"--dataset {name}: {error}") from None


def command_evaluate(args: argparse.Namespace) -> int:
    from .data import DataLoader

    checkpoint_path, payload = read_run_checkpoint(args.checkpoint)
    config = payload["config"]
    device = resolve_device(args.device)
    set_threads(args.threads)
    data = load_data(
        config["dataset"],
        _data_dir(args.data, config),
        explicit=True,
        allow_download=not args.no_download,
        limit_test=args.limit_test,
        need_train=False,
    )
    refuse_empty(data, need_train=False)
    model = build(config["model"], device)
    restore_run_checkpoint(checkpoint_path, model, None, config["model"])
    loader = DataLoader(data.test, batch_size=args.batch_size, device=device)
    classes = list(payload.get("classes") or data.test.classes)
    result = evaluate_model(model, loader, len(classes))
    result.update(
        {"checkpoint": str(checkpoint_path), "model": config["model"], "dataset": data.name}
    )
    for entry in result["per_class"]:
        entry["name"] = classes[entry["class"]]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{checkpoint_path}: {config['model']} trained {payload['epoch']} epoch(s) on "
        f"{data.name}; evaluated on {result['samples']} test samples ({data.source}), "
        f"device {device}"
    )
    print(f"test accuracy {result['accuracy']:.4f}  loss {result['loss']:.4f}")
    print("per-class accuracy:")
    numbered = all(name == str(index) for index, name in enumerate(classes))
    width = max(len(name) for name in classes)
    for entry in result["per_class"]:
        accuracy = "-" if entry["accuracy"] is None else f"{entry['accuracy']:.4f}"
        label = f"{entry['class']:>2}" + ("" if numbered else f" {entry['name']:<{width}}")
        print(f"  {label}  {accuracy}  ({entry['samples']} samples)")
    return 0


def command_info(args: argparse.Namespace) -> int:
    from .info import collect, format_report

    report = collect(args.data)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


def command_download(args: argparse.Namespace) -> int:
    from . import data as kgdata

    try:
        spec = kgdata.get_spec(args.dataset)
    except ValueError as error:
        raise UserError(str(error)) from None
    if not spec.downloadable:
        raise UserError(f"{spec.title} cannot be downloaded: {_no_download_reason(spec)}")
    try:
        location = kgdata.download_dataset(spec, args.root, progress=_download_progress())
    except kgdata.DownloadError as error:
        ways = kgdata.how_to_get(spec, include_download=False)
        raise UserError(
            f"{error}\nOther ways to get it:\n" + "\n".join(f"  - {way}" for way in ways)
        ) from None
    print(f"{spec.title} is in {location.folder}")
    return 0


def _no_download_reason(spec: Any) -> str:
    if spec.embedded_dir:
        return "it ships inside kernelgrad, so there is nothing to download"
    return "no download source is known for it"


# --- argument parsing -----------------------------------------------------------------------


# Every check of an option's value is here. argparse applies them to the command line (a
# bad value exits with status 2 naming the option, without a traceback), and the stored
# configuration of a run to resume goes through the same checks (_check_stored_run).
# Checks that need the machine or the files (a device, a folder, --threads against the
# cores) run in the commands, before anything is written.


def _integer(value: Any, expected: str = "an integer") -> int:
    """An integer from the command line (text) or from stored JSON (not a bool)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return int(value)
    raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}")


def _number(value: Any, expected: str = "a number") -> float:
    """A number from the command line (text) or from stored JSON (not a bool)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return float(value)
    raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}")


def _positive_int(value: Any) -> int:
    number = _integer(value, "a positive integer")
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {number}")
    return number


def _positive_float(value: Any) -> float:
    number = _number(value)
    if not (number > 0 and math.isfinite(number)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return number


def _momentum(value: Any) -> float:
    number = _number(value)
    if not 0 <= number < 1:  # also false for nan
        raise argparse.ArgumentTypeError(
            f"expected a number in [0, 1), got {value} (the fraction of the previous update "
            "kept; 1 or more never forgets it, and the update grows without bound)"
        )
    return number


def _seed(value: Any) -> int:
    number = _integer(value)
    if not 0 <= number < 2**64:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 2**64 - 1, got {value}")
    return number


def _one_of(*names: str) -> Any:
    def check(value: Any) -> str:
        if value not in names:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(names)}, got {value!r}")
        return value

    return check


OPTIMIZERS = ("adam", "adamw", "sgd")
SCHEDULES = ("cosine", "constant")
# The values of `kernelgrad train`'s options that a run stores in its checkpoint.
_TRAIN_OPTION_CHECKS: dict[str, Any] = {
    "model": _one_of(*MODELS),
    "epochs": _positive_int,
    "batch_size": _positive_int,
    "lr": _positive_float,
    "optimizer": _one_of(*OPTIMIZERS),
    "momentum": _momentum,
    "seed": _seed,
    "schedule": _one_of(*SCHEDULES),
    "limit_train": _positive_int,
    "limit_test": _positive_int,
}
_NULLABLE = ("limit_train", "limit_test")  # stored as null when not given


def _check_stored_run(path: Path, stored: dict[str, Any]) -> None:
    """The values a `kernelgrad train` checkpoint stores, checked as the command line's
    are; a problem is a UserError naming the file."""
    problems = []
    config = stored.get("config")
    if not isinstance(config, dict):
        problems.append("config is not an object")
        config = {}
    for name, check in _TRAIN_OPTION_CHECKS.items():
        if name == "schedule" and name not in config:
            continue  # a run saved before --schedule existed: constant
        value = config.get(name)
        if value is None and name in _NULLABLE and name in config:
            continue
        try:
            check(value)
        except argparse.ArgumentTypeError as error:
            problems.append(f"--{name.replace('_', '-')}: {error}")
    if not isinstance(config.get("dataset"), str):
        problems.append("the dataset name is missing")
    if not isinstance(config.get("data_dir"), (str, type(None))):
        problems.append("the data folder is not a path")
    epoch = stored.get("epoch")
    if not (type(epoch) is int and epoch >= 1):
        problems.append(f"the finished epoch count {epoch!r} is not an integer >= 1")
    loader = stored.get("loader")
    if not (
        isinstance(loader, dict)
        and type(loader.get("seed")) is int
        and type(loader.get("epoch")) is int
        and loader["seed"] >= 0
        and loader["epoch"] >= 0
    ):
        problems.append("the data loader's state is not {seed, epoch} as integers >= 0")
    if not isinstance(stored.get("rng", {}), dict):
        problems.append("the random-number state is not an object")
    history = stored.get("history", {})
    if not (isinstance(history, dict) and all(isinstance(v, list) for v in history.values())):
        problems.append("the history is not an object of lists")
    classes = stored.get("classes", [])
    if not (isinstance(classes, list) and all(isinstance(name, str) for name in classes)):
        problems.append("the class names are not a list of strings")
    if problems:
        raise UserError(
            f"{path}: its stored run values are invalid (the file was damaged or written by "
            "other software): " + "; ".join(problems)
        )


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="kernelgrad",
        description="Train and evaluate small image classifiers with kernelgrad.",
    )
    parser.add_argument("--version", action="version", version=f"kernelgrad {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    train = commands.add_parser(
        "train",
        help="train a model (default: LeNet-5 on Fashion-MNIST)",
        description="Train a model, with a checkpoint, metrics and a plot in the run folder.",
    )
    train.add_argument("--model", choices=MODELS, help="network (default: lenet)")
    train.add_argument(
        "--dataset",
        help="fashion-mnist (default), mnist or digits (embedded). Without --dataset, a "
        "missing Fashion-MNIST falls back to digits with a note; with it, it is an error",
    )
    train.add_argument("--data", metavar="DIR", help="folder holding the dataset's IDX files")
    train.add_argument(
        "--device", help="cpu, cuda or cuda:N (default: cuda when available, else cpu)"
    )
    train.add_argument("--epochs", type=_positive_int, help="number of epochs (default: 5)")
    train.add_argument("--batch-size", type=_positive_int, help="samples per step (default: 128)")
    train.add_argument("--lr", type=_positive_float, help="learning rate (default: 0.002)")
    train.add_argument("--optimizer", choices=OPTIMIZERS, help="optimizer (default: adam)")
    train.add_argument("--momentum", type=_momentum, help="SGD momentum, in [0, 1) (default: 0.9)")
    train.add_argument(
        "--schedule",
        choices=SCHEDULES,
        help="learning rate over the run: constant, or cosine decay from --lr to 0 across "
        "all steps (default: cosine)",
    )
    train.add_argument(
        "--seed",
        type=_seed,
        help="seed of initialisation and shuffling, 0 to 2**64 - 1 (default: 0)",
    )
    train.add_argument(
        "--out", metavar="DIR", help="run folder (default: runs/<time>-<model>-<dataset>)"
    )
    train.add_argument(
        "--resume",
        metavar="PATH",
        help="continue a run from its folder or checkpoint file (model, optimizer, epoch, "
        "shuffling and random state)",
    )
    train.add_argument("--limit-train", type=_positive_int, metavar="N", help="use N train samples")
    train.add_argument("--limit-test", type=_positive_int, metavar="N", help="use N test samples")
    train.add_argument(
        "--no-download", action="store_true", help="never try to download a missing dataset"
    )
    train.add_argument(
        "--threads",
        type=_positive_int,
        metavar="N",
        help="CPU threads for kernelgrad's compiled kernels (default: all cores; 1 can be "
        "much faster on a machine whose cores are busy with other work)",
    )
    train.add_argument(
        "--compile",
        action="store_true",
        help="run each training step under kg.compile (traced once per batch shape, then "
        "replayed as fused kernels)",
    )
    from .distributed.launch import add_arguments as add_launch_arguments

    add_launch_arguments(train)  # --nproc, --hosts, --hostfile
    train.set_defaults(handler=command_train)

    evaluate = commands.add_parser(
        "evaluate", help="test accuracy, loss and per-class accuracy of a checkpoint"
    )
    evaluate.add_argument("checkpoint", help="a checkpoint file or a run folder")
    evaluate.add_argument("--data", metavar="DIR")
    evaluate.add_argument("--device")
    evaluate.add_argument("--batch-size", type=_positive_int, default=500)
    evaluate.add_argument("--limit-test", type=_positive_int, metavar="N")
    evaluate.add_argument("--no-download", action="store_true")
    evaluate.add_argument("--json", action="store_true", help="print the results as JSON")
    evaluate.add_argument("--threads", type=_positive_int, metavar="N")
    evaluate.set_defaults(handler=command_evaluate)

    info = commands.add_parser("info", help="versions, devices, caches and datasets")
    info.add_argument("--data", metavar="DIR", help="also look for datasets in DIR")
    info.add_argument("--json", action="store_true")
    info.set_defaults(handler=command_info)

    download = commands.add_parser("download", help="download a dataset into the user cache")
    download.add_argument("dataset", help="fashion-mnist or mnist")
    download.add_argument("--root", metavar="DIR", help="download into DIR instead")
    download.set_defaults(handler=command_download)
    parser.command_parsers = dict(commands.choices)  # type: ignore[attr-defined]
    return parser


@contextlib.contextmanager
def _user_errors(command: str) -> Iterator[None]:
    from .data import DatasetError

    try:
        yield
    except (UserError, DatasetError) as error:
        raise _ExitError(2, f"kernelgrad {command}: error: {error}") from None


class _ExitError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kernelgrad`` command; returns the exit status."""
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # reported by the command's parser, so the message names the command
            command_parser = parser.command_parsers.get(args.command, parser)
            command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exit_:  # a bad option value (2, with argparse's message), --help (0)
        return 0 if exit_.code is None else exit_.code if isinstance(exit_.code, int) else 2
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for --nproc's processes
    if args.command is None:
        parser.print_help()
        return 2
    try:
        with _user_errors(args.command):
            return int(args.handler(args) or 0)
    except _ExitError as exit_:
        print(exit_.message, file=sys.stderr)
        return exit_.code
    except KeyboardInterrupt:
        hint = ""
        if args.command == "train":
            hint = " (continue with `kernelgrad train --resume RUN_FOLDER`)"
        print(f"\nkernelgrad {args.command}: interrupted{hint}", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
