"""Finding, downloading and loading dataset files (never the real home folder)."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from kernelgrad.codecache import cache_dir
from kernelgrad.data import (
    DATASETS,
    ChecksumError,
    DatasetNotFoundError,
    DatasetSpec,
    DownloadError,
    IDXError,
    dataset_cache_dir,
    download_dataset,
    download_file,
    find_dataset,
    load_dataset,
    register_dataset,
    write_idx,
)

FILES = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
]


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path, monkeypatch):
    """No real KERNELGRAD_DATA and a cache folder inside tmp_path."""
    # The kernel cache stays where it is (it would follow XDG_CACHE_HOME otherwise).
    monkeypatch.setenv("KERNELGRAD_CACHE_DIR", str(cache_dir()))
    monkeypatch.delenv("KERNELGRAD_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def make_idx_dataset(folder: Path, train: int = 12, test: int = 6, seed: int = 0) -> Path:
    """Four small gzipped IDX files of 28x28 images with labels 0..9."""
    rng = np.random.default_rng(seed)
    for prefix, count in (("train", train), ("t10k", test)):
        write_idx(
            folder / f"{prefix}-images-idx3-ubyte.gz",
            rng.integers(0, 256, (count, 28, 28), dtype=np.uint8),
        )
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", np.arange(count, dtype=np.uint8) % 10)
    return folder


@pytest.fixture
def fake_spec(tmp_path, monkeypatch):
    """A registered dataset whose system folder lies in tmp_path."""
    spec = DatasetSpec(
        name="toy-mnist",
        title="Toy-MNIST",
        classes=tuple("abcdefghij"),
        mean=0.5,
        std=0.25,
        system_dirs=(str(tmp_path / "system" / "toy-mnist"),),
        system_package="dataset-toy-mnist",
        torchvision_name="ToyMNIST",
    )
    monkeypatch.setitem(DATASETS, spec.name, spec)
    return spec


def test_search_order(tmp_path, monkeypatch, fake_spec):
    named = make_idx_dataset(tmp_path / "named", seed=1)
    environment = make_idx_dataset(tmp_path / "env" / "toy-mnist", seed=2)  # a <name> sub-folder
    cache = make_idx_dataset(dataset_cache_dir() / "toy-mnist", seed=3)
    system = make_idx_dataset(Path(fake_spec.system_dirs[0]), seed=4)
    assert cache.is_relative_to(tmp_path)
    monkeypatch.setenv("KERNELGRAD_DATA", str(tmp_path / "env"))

    found = find_dataset("toy-mnist", data_dir=named)
    assert (found.folder, found.source) == (named, "the folder given")
    found = find_dataset("toy-mnist")
    assert (found.folder, found.source) == (environment, "$KERNELGRAD_DATA")
    monkeypatch.delenv("KERNELGRAD_DATA")
    found = find_dataset("toy-mnist")
    assert (found.folder, found.source) == (cache, "the user cache")
    shutil.rmtree(cache)
    found = find_dataset("toy-mnist")
    assert (found.folder, found.source) == (system, "package dataset-toy-mnist")
    shutil.rmtree(system)
    with pytest.raises(DatasetNotFoundError) as info:
        find_dataset("toy-mnist", data_dir=tmp_path / "nowhere")
    message = str(info.value)
    assert "Toy-MNIST was not found" in message
    assert f"{tmp_path / 'nowhere'}: no such folder" in message
    assert "$KERNELGRAD_DATA: not set" in message
    assert "sudo apt-get install dataset-toy-mnist" in message
    assert "--data FOLDER" in message and "KERNELGRAD_DATA=FOLDER" in message


def test_xdg_cache_home_and_home_fallback(tmp_path, monkeypatch):
    assert dataset_cache_dir() == tmp_path / "xdg-cache" / "kernelgrad" / "datasets"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert dataset_cache_dir() == tmp_path / "home" / ".cache" / "kernelgrad" / "datasets"


def test_torchvision_layout_uncompressed_files_and_path_lists(tmp_path, monkeypatch, fake_spec):
    raw = make_idx_dataset(tmp_path / "root" / "ToyMNIST" / "raw")
    for name in FILES:  # uncompressed copies are found as well
        gz = raw / f"{name}.gz"
        (raw / name).write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()
    monkeypatch.setenv("KERNELGRAD_DATA", f"{tmp_path / 'empty'}:{tmp_path / 'root'}")
    found = find_dataset("toy-mnist")
    assert found.folder == raw and found.files["test_labels"].name == "t10k-labels-idx1-ubyte"
    assert len(load_dataset("toy-mnist", train=False)) == 6


def test_incomplete_folder_is_reported(tmp_path, fake_spec):
    folder = make_idx_dataset(tmp_path / "partial")
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"missing t10k-labels-idx1-ubyte\[\.gz\]"):
        find_dataset("toy-mnist", data_dir=folder)


def test_load_checks_contents(tmp_path, fake_spec):
    folder = make_idx_dataset(tmp_path / "data", train=12)
    train = load_dataset("toy-mnist", data_dir=folder)
    assert len(train) == 12 and train.classes == tuple("abcdefghij")
    write_idx(folder / "train-labels-idx1-ubyte.gz", np.zeros(11, dtype=np.uint8))
    with pytest.raises(IDXError, match=r"has 11 labels but .* has 12 images"):
        load_dataset("toy-mnist", data_dir=folder)
    labels = folder / "train-labels-idx1-ubyte.gz"
    labels.write_bytes(labels.read_bytes()[:20])
    with pytest.raises(IDXError, match="truncated gzip stream"):
        load_dataset("toy-mnist", data_dir=folder)


def test_negative_labels_are_an_idx_error(tmp_path, fake_spec):
    """int8 labels below zero are out of range like labels above the class count."""
    folder = make_idx_dataset(tmp_path / "data", train=12)
    labels = np.arange(12, dtype=np.int8) % 10
    labels[5] = -3
    write_idx(folder / "train-labels-idx1-ubyte.gz", labels)
    with pytest.raises(IDXError, match=r"label -3 is out of range for Toy-MNIST \(10 classes"):
        load_dataset("toy-mnist", data_dir=folder)


def test_unknown_dataset_name():
    with pytest.raises(ValueError, match=r"unknown dataset 'cifar'.*fashion-mnist"):
        find_dataset("cifar")


def test_embedded_digits_are_always_found():
    location = find_dataset("digits")
    assert location.source == "the copy inside kernelgrad"
    train, test = load_dataset("digits", train=True), load_dataset("digits", train=False)
    assert (len(train), len(test)) == (1437, 360)
    assert set(np.unique(train.labels)) == set(range(10))
    native = load_dataset("digits", image_size=8)
    assert native.images.shape == (1437, 8, 8) and native.images.max() == 16


# --- downloading --------------------------------------------------------------------------


@pytest.fixture
def http_server(tmp_path):
    """A loopback HTTP server serving tmp_path/served."""
    root = tmp_path / "served"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _spec_for(folder: Path, mirrors: tuple[str, ...], algorithm: str = "md5") -> DatasetSpec:
    checksums = {
        f"{name}.gz": (
            algorithm,
            hashlib.new(algorithm, (folder / f"{name}.gz").read_bytes()).hexdigest(),
        )
        for name in FILES
    }
    return register_dataset(
        DatasetSpec(
            name="served-mnist",
            title="Served-MNIST",
            classes=tuple(str(i) for i in range(10)),
            mean=0.5,
            std=0.25,
            mirrors=mirrors,
            checksums=checksums,
        )
    )


@pytest.fixture
def cleanup_registry():
    yield
    DATASETS.pop("served-mnist", None)


def test_download_from_local_http_server(tmp_path, http_server, cleanup_registry):
    served, url = http_server
    make_idx_dataset(served)
    spec = _spec_for(served, ("http://127.0.0.1:9/unreachable/", url))  # first mirror fails
    seen = []
    location = download_dataset(spec, progress=lambda u, done, total: seen.append((u, done, total)))
    assert location.folder == dataset_cache_dir() / "served-mnist"
    for name in FILES:
        assert (location.folder / f"{name}.gz").read_bytes() == (served / f"{name}.gz").read_bytes()
    assert seen and seen[-1][0].startswith(url) and seen[-1][1] == seen[-1][2]
    assert find_dataset("served-mnist").source == "the user cache"
    assert len(load_dataset("served-mnist", train=True)) == 12
    assert sorted(p.name for p in location.folder.iterdir()) == sorted(f"{n}.gz" for n in FILES)


def test_download_with_file_urls_and_sha256(tmp_path, cleanup_registry):
    source = make_idx_dataset(tmp_path / "source")
    spec = _spec_for(source, (source.as_uri() + "/",), algorithm="sha256")
    location = download_dataset(spec, root=tmp_path / "target")
    assert location.folder == tmp_path / "target"
    assert len(load_dataset(spec, location=location, train=False)) == 6


def test_checksum_mismatch_is_rejected_and_leaves_no_file(tmp_path, http_server, cleanup_registry):
    served, url = http_server
    make_idx_dataset(served)
    spec = _spec_for(served, (url,))
    make_idx_dataset(served, seed=99)  # the server now serves other bytes
    target = tmp_path / "target"
    with pytest.raises(ChecksumError, match="md5 checksum mismatch") as info:
        download_dataset(spec, root=target)
    assert "train-images-idx3-ubyte.gz" in str(info.value)
    assert list(target.iterdir()) == []  # no partial or temporary file


def test_download_file_checksum_mismatch_single_file(tmp_path):
    source = tmp_path / "payload.bin"
    source.write_bytes(b"x" * 5000)
    destination = tmp_path / "out" / "payload.bin"
    with pytest.raises(ChecksumError, match="sha256 checksum mismatch"):
        download_file(source.as_uri(), destination, sha256="0" * 64)
    assert not destination.exists() and list(destination.parent.iterdir()) == []
    good = hashlib.sha256(b"x" * 5000).hexdigest()
    assert download_file(source.as_uri(), destination, sha256=good).read_bytes() == b"x" * 5000


def test_unreachable_mirror_is_a_download_error(tmp_path, cleanup_registry):
    source = make_idx_dataset(tmp_path / "source")
    spec = _spec_for(source, ("http://127.0.0.1:9/",))
    with pytest.raises(DownloadError, match="could not download train-images") as info:
        download_dataset(spec, root=tmp_path / "target", timeout=5)
    assert not isinstance(info.value, ChecksumError)
    assert not list((tmp_path / "target").glob("*"))


def test_files_already_present_are_not_downloaded_again(tmp_path, cleanup_registry):
    source = make_idx_dataset(tmp_path / "source")
    spec = _spec_for(source, ("http://127.0.0.1:9/",))  # unreachable: must not be needed
    target = tmp_path / "target"
    shutil.copytree(source, target)
    assert download_dataset(spec, root=target).folder == target


def test_dataset_without_mirrors_cannot_be_downloaded(fake_spec):
    with pytest.raises(DownloadError, match="ships inside kernelgrad"):
        download_dataset("digits")
    with pytest.raises(DownloadError, match="Toy-MNIST has no download source") as info:
        download_dataset("toy-mnist")
    assert "sudo apt-get install dataset-toy-mnist" in str(info.value)
