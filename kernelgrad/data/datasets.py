"""Image classification datasets stored as IDX files: where to find them, how to
download them, and how to load them.

Known datasets: ``"fashion-mnist"``, ``"mnist"`` and ``"digits"`` (a small real dataset
that ships inside kernelgrad: 1,797 8x8 handwritten digits from the UCI "Optical
Recognition of Handwritten Digits" data, CC BY 4.0; see docs/data.md). :func:`register_dataset` adds
others that use the same four-file layout.

A dataset is looked for, in this order:

1. the folder the caller names (``data_dir=``, ``kernelgrad train --data DIR``);
2. the folder(s) in ``$KERNELGRAD_DATA`` (several separated by ``os.pathsep``);
3. the user cache, ``$XDG_CACHE_HOME/kernelgrad/datasets/<name>`` (default
   ``~/.cache/kernelgrad/datasets/<name>``), where downloads go;
4. the system folder of a distribution package (Debian's ``dataset-fashion-mnist``
   installs ``/usr/share/datasets/fashion-mnist``);
5. for ``"digits"``, the copy inside the package.

In each folder ``F`` the four files may be in ``F``, ``F/<name>`` or
``F/<TorchvisionName>/raw`` (the layout torchvision uses), gzipped or not.

>>> from kernelgrad.data import load_dataset
>>> train = load_dataset("digits", train=True)
>>> len(train), train.image_shape, train.classes[:3]
(1437, (1, 28, 28), ('0', '1', '2'))
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .download import ProgressCallback, download_file, file_digest
from .errors import ChecksumError, DatasetNotFoundError, DownloadError, IDXError
from .idx import read_idx
from .loader import Dataset

__all__ = [
    "DATASETS",
    "DatasetLocation",
    "DatasetSpec",
    "Digits",
    "FashionMNIST",
    "IDXImageDataset",
    "MNIST",
    "dataset_cache_dir",
    "download_dataset",
    "find_dataset",
    "get_spec",
    "load_dataset",
    "register_dataset",
]

ROLES = ("train_images", "train_labels", "test_images", "test_labels")
_STANDARD_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
_PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class DatasetSpec:
    """What kernelgrad knows about a dataset of four IDX files.

    ``files`` maps the roles ``train_images``, ``train_labels``, ``test_images`` and
    ``test_labels`` to file names without ``.gz``; ``checksums`` maps each ``.gz`` file
    name to ``("md5" | "sha256", hex digest)`` as published by the dataset's maintainers;
    ``mirrors`` are base URLs tried in order. ``mean``/``std`` normalise pixel values
    scaled to [0, 1].
    """

    name: str
    title: str
    classes: tuple[str, ...]
    mean: float
    std: float
    homepage: str = ""
    license: str = ""
    files: dict[str, str] = field(default_factory=lambda: dict(_STANDARD_FILES))
    mirrors: tuple[str, ...] = ()
    checksums: dict[str, tuple[str, str]] = field(default_factory=dict)
    system_dirs: tuple[str, ...] = ()
    system_package: str = ""
    torchvision_name: str = ""
    embedded_dir: str = ""
    native_size: int = 28

    @property
    def downloadable(self) -> bool:
        return bool(self.mirrors)

    def file_names(self) -> list[str]:
        return [self.files[role] for role in ROLES]


FASHION_MNIST = DatasetSpec(
    name="fashion-mnist",
    title="Fashion-MNIST",
    classes=(
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ),
    mean=0.2860,
    std=0.3530,
    homepage="https://github.com/zalandoresearch/fashion-mnist",
    license="MIT (Zalando SE)",
    mirrors=(
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
    ),
    # MD5 sums published in the dataset's README.
    checksums={
        "train-images-idx3-ubyte.gz": ("md5", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        "train-labels-idx1-ubyte.gz": ("md5", "25c81989df183df01b3e8a0aad5dffbe"),
        "t10k-images-idx3-ubyte.gz": ("md5", "bef4ecab320f06d8554ea6380940ec79"),
        "t10k-labels-idx1-ubyte.gz": ("md5", "bb300cfdad3c16e7a12a480ee83cd310"),
    },
    system_dirs=("/usr/share/datasets/fashion-mnist",),
    system_package="dataset-fashion-mnist",
    torchvision_name="FashionMNIST",
)

MNIST_SPEC = DatasetSpec(
    name="mnist",
    title="MNIST",
    classes=tuple(str(digit) for digit in range(10)),
    mean=0.1307,
    std=0.3081,
    homepage="http://yann.lecun.com/exdb/mnist/",
    license="see the maintainers' page (Yann LeCun, Corinna Cortes, Christopher J. C. Burges)",
    mirrors=(
        "http://yann.lecun.com/exdb/mnist/",
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
    ),
    checksums={
        "train-images-idx3-ubyte.gz": ("md5", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        "train-labels-idx1-ubyte.gz": ("md5", "d53e105ee54ea40749a09fcbcd1e9432"),
        "t10k-images-idx3-ubyte.gz": ("md5", "9fb629c4189551a2d022fa330f9573f3"),
        "t10k-labels-idx1-ubyte.gz": ("md5", "ec29112dd5afa0611ce80d1b7f02629c"),
    },
    torchvision_name="MNIST",
)

DIGITS = DatasetSpec(
    name="digits",
    title="UCI handwritten digits (8x8, embedded)",
    classes=tuple(str(digit) for digit in range(10)),
    # Statistics of the 28x28 training images that load_dataset produces.
    mean=0.1558,
    std=0.2773,
    homepage="https://archive.ics.uci.edu/ml/datasets/Optical+Recognition+of+Handwritten+Digits",
    license="CC BY 4.0 (E. Alpaydin, C. Kaynak)",
    embedded_dir="digits",
    native_size=8,
)

DATASETS: dict[str, DatasetSpec] = {}


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    """Make ``spec`` known to :func:`find_dataset`, :func:`load_dataset` and the CLI."""
    missing = [role for role in ROLES if role not in spec.files]
    if missing:
        raise ValueError(f"dataset {spec.name!r}: files lacks the roles {missing}")
    DATASETS[spec.name] = spec
    return spec


for _spec in (FASHION_MNIST, MNIST_SPEC, DIGITS):
    register_dataset(_spec)


def get_spec(name: str | DatasetSpec) -> DatasetSpec:
    if isinstance(name, DatasetSpec):
        return name
    key = name.strip().lower().replace("_", "-")
    key = {"fashion": "fashion-mnist", "fashionmnist": "fashion-mnist"}.get(key, key)
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}")
    return DATASETS[key]


def dataset_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/kernelgrad/datasets`` (default ``~/.cache/kernelgrad/datasets``).

    Kept apart from the kernel cache (``$KERNELGRAD_CACHE_DIR``), which is safe to
    delete at any time; a dataset is not cheap to fetch again."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelgrad" / "datasets"


@dataclass(frozen=True)
class DatasetLocation:
    """Where a complete copy of a dataset was found: ``files`` maps each role to a path,
    ``source`` says which search step found it."""

    spec: DatasetSpec
    folder: Path
    files: dict[str, Path]
    source: str

    def __repr__(self) -> str:
        folder = str(self.folder)
        return f"DatasetLocation({self.spec.name!r}, folder={folder!r}, source={self.source!r})"


def _files_in(folder: Path, spec: DatasetSpec) -> tuple[dict[str, Path], list[str]]:
    found: dict[str, Path] = {}
    missing: list[str] = []
    for role in ROLES:
        base = spec.files[role]
        for candidate in (folder / f"{base}.gz", folder / base):
            if candidate.is_file():
                found[role] = candidate
                break
        else:
            missing.append(f"{base}[.gz]")
    return found, missing


def _check_folder(root: Path, spec: DatasetSpec, nested: bool) -> tuple[dict[str, Path], str]:
    """Look in ``root`` (and its ``<name>`` and ``<TorchvisionName>/raw`` sub-folders when
    ``nested``); return the files of a complete copy, or ``{}`` and why not."""
    if not root.is_dir():
        return {}, "no such folder" if not root.exists() else "not a folder"
    candidates = [root]
    if nested:
        candidates.append(root / spec.name)
        if spec.torchvision_name:
            candidates.append(root / spec.torchvision_name / "raw")
    best_reason = "no dataset files"
    for folder in candidates:
        found, missing = _files_in(folder, spec)
        if not missing:
            return found, ""
        if found:
            best_reason = f"incomplete in {folder}: missing {', '.join(missing)}"
    return {}, best_reason


def _search_plan(spec: DatasetSpec, data_dir: str | os.PathLike[str] | None) -> list[tuple]:
    plan: list[tuple[str, Path | None, bool]] = []
    if data_dir is not None:
        plan.append(("the folder given", Path(data_dir).expanduser(), True))
    environment = os.environ.get("KERNELGRAD_DATA", "")
    folders = [part for part in environment.split(os.pathsep) if part]
    if folders:
        for part in folders:
            plan.append(("$KERNELGRAD_DATA", Path(part).expanduser(), True))
    else:
        plan.append(("$KERNELGRAD_DATA", None, True))
    plan.append(("the user cache", dataset_cache_dir() / spec.name, False))
    for folder in spec.system_dirs:
        label = f"package {spec.system_package}" if spec.system_package else "system folder"
        plan.append((label, Path(folder), False))
    if spec.embedded_dir:
        plan.append(("the copy inside kernelgrad", _PACKAGE_DIR / spec.embedded_dir, False))
    return plan


def how_to_get(spec: DatasetSpec, include_download: bool = True) -> list[str]:
    """Ways to obtain a dataset, one sentence each, for error messages."""
    names = ", ".join(f"{name}.gz" for name in spec.file_names())
    ways = []
    if spec.system_package:
        ways.append(
            f"install the Debian/Ubuntu package: sudo apt-get install {spec.system_package}"
        )
    ways.append(
        f"put {names} in a folder and pass --data FOLDER (data_dir=FOLDER in Python) or set "
        "KERNELGRAD_DATA=FOLDER"
    )
    if spec.downloadable and include_download:
        ways.append(
            f"on a machine with internet access, run `kernelgrad download {spec.name}` (or "
            f"let `kernelgrad train` download it) into {dataset_cache_dir() / spec.name}"
        )
    return ways


def find_dataset(
    name: str | DatasetSpec, data_dir: str | os.PathLike[str] | None = None
) -> DatasetLocation:
    """Find a complete copy of a dataset (search order in the module docstring).

    Raises :class:`DatasetNotFoundError` listing every place searched and how to get
    the dataset. Files are not read here; :func:`load_dataset` checks their contents.
    """
    spec = get_spec(name)
    searched: list[str] = []
    for label, folder, nested in _search_plan(spec, data_dir):
        if folder is None:
            searched.append(f"{label}: not set")
            continue
        files, reason = _check_folder(folder, spec, nested)
        if files:
            return DatasetLocation(spec, files[ROLES[0]].parent, files, label)
        searched.append(f"{label} {folder}: {reason}")
    lines = [f"{spec.title} was not found. Searched:"]
    lines += [f"  - {entry}" for entry in searched]
    lines.append("To get it:")
    lines += [f"  - {way}" for way in how_to_get(spec)]
    raise DatasetNotFoundError("\n".join(lines))


def download_dataset(
    name: str | DatasetSpec,
    root: str | os.PathLike[str] | None = None,
    *,
    mirrors: Sequence[str] | None = None,
    timeout: float = 30.0,
    progress: ProgressCallback | None = None,
) -> DatasetLocation:
    """Download a dataset's four ``.gz`` files into ``root`` (default: the user cache,
    ``dataset_cache_dir() / name``), verifying each against its published checksum.

    Files already present with the right checksum are kept. For each file the mirrors
    are tried in order; a mismatch or a failed connection moves on to the next one.
    Raises :class:`ChecksumError` when a mirror served a wrong file and no mirror a
    right one, :class:`DownloadError` when no mirror could be reached.
    """
    spec = get_spec(name)
    bases = tuple(mirrors) if mirrors is not None else spec.mirrors
    if not bases:
        if spec.embedded_dir:
            raise DownloadError(
                f"{spec.title} ships inside kernelgrad; there is nothing to download"
            )
        raise DownloadError(
            f"{spec.title} has no download source; get it another way:\n"
            + "\n".join(f"  - {way}" for way in how_to_get(spec))
        )
    target = Path(root).expanduser() if root is not None else dataset_cache_dir() / spec.name
    files: dict[str, Path] = {}
    for role in ROLES:
        filename = f"{spec.files[role]}.gz"
        algorithm, digest = spec.checksums.get(filename, ("", ""))
        destination = target / filename
        if destination.is_file() and (not digest or file_digest(destination, algorithm) == digest):
            files[role] = destination
            continue
        failures: list[DownloadError] = []
        for base in bases:
            url = base if base.endswith("/") else base + "/"
            try:
                download_file(
                    url + filename,
                    destination,
                    md5=digest if algorithm == "md5" else None,
                    sha256=digest if algorithm == "sha256" else None,
                    timeout=timeout,
                    progress=progress,
                )
            except DownloadError as error:
                failures.append(error)
                continue
            files[role] = destination
            break
        else:
            mismatches = [error for error in failures if isinstance(error, ChecksumError)]
            kind = ChecksumError if mismatches else DownloadError
            details = "\n".join(f"  - {error}" for error in failures)
            raise kind(f"could not download {filename} of {spec.title}:\n{details}")
    return DatasetLocation(spec, target, files, "download")


# --- loading -------------------------------------------------------------------------------


def _resample_matrix(source: int, target: int) -> np.ndarray:
    """Bilinear interpolation weights (target x source), pixel centres aligned."""
    positions = (np.arange(target) + 0.5) * source / target - 0.5
    positions = np.clip(positions, 0, source - 1)
    lower = np.floor(positions).astype(np.int64)
    upper = np.minimum(lower + 1, source - 1)
    weight = positions - lower
    matrix = np.zeros((target, source))
    matrix[np.arange(target), lower] += 1 - weight
    matrix[np.arange(target), upper] += weight
    return matrix


def upsample_digits(images: np.ndarray, size: int = 28) -> np.ndarray:
    """8x8 digit images (values 0..16) -> ``size`` x ``size`` uint8 (0..255), laid out as
    MNIST digits are: the digit resampled bilinearly to the central 20/28 of the frame,
    with an empty margin around it."""
    inner = round(size * 20 / 28)
    margin_before = (size - inner) // 2
    matrix = _resample_matrix(images.shape[-1], inner)
    scaled = np.einsum("ij,njk,lk->nil", matrix, images.astype(np.float64), matrix)
    scaled = np.clip(np.rint(scaled * (255.0 / 16.0)), 0, 255).astype(np.uint8)
    framed = np.zeros((images.shape[0], size, size), dtype=np.uint8)
    framed[:, margin_before : margin_before + inner, margin_before : margin_before + inner] = scaled
    return framed


class IDXImageDataset(Dataset):
    """Grey-scale images (uint8, N x H x W) with integer labels, kept as NumPy arrays.

    ``dataset[i]`` is ``(image, label)``: a float32 tensor of shape (1, H, W),
    normalised as ``(pixel / 255 - mean) / std``, and an ``int``. The DataLoader fetches
    whole batches with :meth:`get_batch` (one NumPy gather, no per-sample loop).
    """

    def __init__(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        classes: Sequence[str],
        mean: float = 0.0,
        std: float = 1.0,
        name: str = "images",
    ) -> None:
        images = np.asarray(images)
        labels = np.asarray(labels)
        if images.ndim != 3:
            raise ValueError(f"{name}: images must be N x H x W, got shape {images.shape}")
        if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
            raise ValueError(
                f"{name}: {images.shape[0]} images but labels of shape {labels.shape}; the "
                "images and labels files do not belong together"
            )
        if labels.size and (labels.min() < 0 or labels.max() >= len(classes)):
            raise ValueError(
                f"{name}: labels range over {labels.min()}..{labels.max()}, but the dataset has "
                f"{len(classes)} classes"
            )
        self.images = np.ascontiguousarray(images, dtype=np.uint8)
        self.labels = labels.astype(np.int64)
        self.classes = tuple(classes)
        self.mean = float(mean)
        self.std = float(std)
        self.name = name
        # One lookup table turns uint8 pixels into normalised float32 in a single gather.
        self._table = ((np.arange(256, dtype=np.float64) / 255.0 - mean) / std).astype(np.float32)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (1, int(self.images.shape[1]), int(self.images.shape[2]))

    def get_batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        indices = np.asarray(indices, dtype=np.int64)
        pixels = np.take(self._table, self.images[indices])  # 2-3x faster than table[...]
        return pixels[:, None, :, :], self.labels[indices]

    def __getitem__(self, index: int) -> tuple[Any, int]:
        from ..ops.creation import tensor

        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {self.name} of {len(self)} items")
        pixels, labels = self.get_batch(np.array([index]))
        return tensor(pixels[0]), int(labels[0])

    def __repr__(self) -> str:
        return (
            f"IDXImageDataset({self.name}: {len(self)} images of {self.image_shape}, "
            f"{len(self.classes)} classes)"
        )


def _read_pair(images_path: Path, labels_path: Path, spec: DatasetSpec) -> tuple:
    images = read_idx(images_path)
    labels = read_idx(labels_path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise IDXError(
            f"{images_path}: expected uint8 images of 3 dimensions (N x H x W), found "
            f"{images.dtype} data of shape {images.shape}"
        )
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise IDXError(
            f"{labels_path}: expected a 1-dimensional array of integer labels, found "
            f"{labels.dtype} data of shape {labels.shape}"
        )
    if labels.shape[0] != images.shape[0]:
        raise IDXError(
            f"{labels_path} has {labels.shape[0]} labels but {images_path} has "
            f"{images.shape[0]} images; the two files do not belong together"
        )
    if labels.size and not 0 <= int(labels.min()) <= int(labels.max()) < len(spec.classes):
        wrong = int(labels.min()) if labels.min() < 0 else int(labels.max())
        raise IDXError(
            f"{labels_path}: label {wrong} is out of range for {spec.title} "
            f"({len(spec.classes)} classes, labels 0 to {len(spec.classes) - 1})"
        )
    return images, labels


def load_dataset(
    name: str | DatasetSpec,
    train: bool = True,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    download: bool = False,
    location: DatasetLocation | None = None,
    image_size: int | None = None,
) -> IDXImageDataset:
    """Load the training (``train=True``) or test split of a dataset.

    The dataset is found with :func:`find_dataset` (or taken from ``location``); with
    ``download=True`` a missing downloadable dataset is fetched into the user cache
    first. ``image_size`` applies to ``"digits"`` only: 28 (default) gives MNIST-sized
    images, 8 the original ones.
    """
    spec = get_spec(name)
    if location is None:
        try:
            location = find_dataset(spec, data_dir)
        except DatasetNotFoundError:
            if not (download and spec.downloadable):
                raise
            location = download_dataset(spec)
    prefix = "train" if train else "test"
    images, labels = _read_pair(
        location.files[f"{prefix}_images"], location.files[f"{prefix}_labels"], spec
    )
    native = (spec.native_size, spec.native_size)
    if images.shape[1:] != native:
        raise IDXError(
            f"{location.files[f'{prefix}_images']}: expected {native[0]}x{native[1]} images "
            f"for {spec.title}, found {images.shape[1]}x{images.shape[2]}"
        )
    if spec.name == "digits":
        size = 28 if image_size is None else image_size
        if size != spec.native_size:
            images = upsample_digits(images, size)
    elif image_size not in (None, spec.native_size):
        raise ValueError(
            f"image_size={image_size} is not available for {spec.title} "
            f"(its images are {native[0]}x{native[1]})"
        )
    return IDXImageDataset(
        images,
        labels,
        spec.classes,
        mean=spec.mean,
        std=spec.std,
        name=f"{spec.title} ({'train' if train else 'test'})",
    )


class _NamedDataset(IDXImageDataset):
    spec: DatasetSpec

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        train: bool = True,
        download: bool = False,
    ) -> None:
        loaded = load_dataset(self.spec, train=train, data_dir=root, download=download)
        super().__init__(
            loaded.images, loaded.labels, loaded.classes, loaded.mean, loaded.std, loaded.name
        )


class FashionMNIST(_NamedDataset):
    """Fashion-MNIST (60,000 + 10,000 28x28 images of clothing, 10 classes):
    ``FashionMNIST(root=None, train=True, download=False)``."""

    spec = FASHION_MNIST


class MNIST(_NamedDataset):
    """MNIST handwritten digits (60,000 + 10,000 28x28 images):
    ``MNIST(root=None, train=True, download=False)``."""

    spec = MNIST_SPEC


class Digits(_NamedDataset):
    """The embedded UCI handwritten digits (1,437 train + 360 test), upsampled to 28x28:
    ``Digits(train=True)``."""

    spec = DIGITS


def available_datasets(data_dir: str | os.PathLike[str] | None = None) -> Iterable[tuple]:
    """``(name, location or None, reason)`` for each registered dataset (for ``info``)."""
    for spec in DATASETS.values():
        try:
            yield spec.name, find_dataset(spec, data_dir), ""
        except DatasetNotFoundError as error:
            yield spec.name, None, str(error)
