"""kg.save / kg.load: nested structures in safetensors files, file objects,
map_location, what cannot be saved, and damaged structures."""

from __future__ import annotations

import collections
import io
import json
import math
import struct

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.serialization import CheckpointError, load_file, read_metadata, save_file
from tests.helpers import as_numpy


def nested_object():
    shared = kg.tensor([1.0, 2.0])
    return {
        "tensors": {
            "float32": kg.arange(6.0).reshape(2, 3).T,  # not contiguous
            "float64": kg.tensor(2.5, dtype=kg.float64),  # 0-d
            "int32": kg.tensor([1, -2], dtype=kg.int32),
            "int64": kg.tensor([[3]]),
            "bool": kg.tensor([True, False]),
            "empty": kg.zeros(0, 4),
        },
        "shared": [shared, shared],
        "parameter": kg.nn.Parameter(kg.ones(2)),
        "graph_input": kg.ones(3, requires_grad=True),
        3: ("tuple", None, True, 2**70, -0.5),
        "floats": [math.inf, -math.inf, math.nan],
        "ordered": collections.OrderedDict([("b", 1), ("a", 2)]),
        "set": {1, 2},
        "frozen": frozenset({"x"}),
        "bytes": b"\x00\xffdata",
        "complex": 1 + 2j,
        "dtype": kg.float64,
        "device": kg.device("cpu"),
        "array": np.arange(4, dtype=np.int16),
        "numpy_scalar": np.float64(0.25),
    }


def test_nested_structures_round_trip_through_a_path_and_a_file_object(tmp_path):
    obj = nested_object()
    path = tmp_path / "checkpoint.pt"
    kg.save(obj, path)
    buffer = io.BytesIO()
    kg.save(obj, buffer)
    buffer.seek(0)
    for loaded in (kg.load(path), kg.load(buffer)):
        assert list(loaded) == list(obj)
        for name, value in obj["tensors"].items():
            got = loaded["tensors"][name]
            assert got.dtype is value.dtype and got.shape == value.shape, name
            np.testing.assert_array_equal(as_numpy(got), as_numpy(value))
        first, second = loaded["shared"]
        assert first is second  # one tensor saved once loads as one tensor
        assert isinstance(loaded["parameter"], kg.nn.Parameter)
        assert loaded["parameter"].requires_grad
        assert loaded["graph_input"].requires_grad and loaded["graph_input"].is_leaf
        assert loaded[3] == obj[3] and isinstance(loaded[3], tuple)
        assert loaded["floats"][:2] == [math.inf, -math.inf] and math.isnan(loaded["floats"][2])
        assert type(loaded["ordered"]) is collections.OrderedDict
        assert list(loaded["ordered"].items()) == [("b", 1), ("a", 2)]
        assert loaded["set"] == {1, 2} and loaded["frozen"] == frozenset({"x"})
        assert loaded["bytes"] == obj["bytes"] and loaded["complex"] == 1 + 2j
        assert loaded["dtype"] is kg.float64 and loaded["device"] == kg.device("cpu")
        assert loaded["array"].dtype == np.int16
        np.testing.assert_array_equal(loaded["array"], obj["array"])
        assert loaded["numpy_scalar"] == 0.25


def test_a_state_dict_keeps_its_names_as_safetensors_entries(tmp_path):
    model = kg.nn.Sequential(kg.nn.Linear(3, 4), kg.nn.ReLU(), kg.nn.Linear(4, 2))
    path = tmp_path / "model.pt"
    kg.save(model.state_dict(), path)
    plain = load_file(path)  # any safetensors reader sees the usual names
    assert sorted(plain) == sorted(model.state_dict())
    assert read_metadata(path)["format"] == "kernelgrad.object/1"
    other = kg.nn.Sequential(kg.nn.Linear(3, 4), kg.nn.ReLU(), kg.nn.Linear(4, 2))
    other.load_state_dict(kg.load(path))
    x = kg.randn(5, 3)
    np.testing.assert_array_equal(as_numpy(other(x)), as_numpy(model(x)))


def test_an_optimizer_resumes_from_its_saved_state(tmp_path):
    def make():
        kg.manual_seed(0)
        model = kg.nn.Linear(3, 2)
        return model, kg.optim.Adam(model.parameters(), lr=0.1)

    def step(model, optimizer):
        optimizer.zero_grad()
        model(kg.ones(4, 3)).pow(2).mean().backward()
        optimizer.step()

    model, optimizer = make()
    step(model, optimizer)
    kg.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp_path / "c")
    step(model, optimizer)

    resumed, resumed_optimizer = make()
    checkpoint = kg.load(tmp_path / "c")
    resumed.load_state_dict(checkpoint["model"])
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    step(resumed, resumed_optimizer)
    np.testing.assert_array_equal(as_numpy(resumed.weight), as_numpy(model.weight))


def test_other_safetensors_files_load_as_a_dict_of_tensors(tmp_path):
    path = tmp_path / "plain.safetensors"
    save_file({"a": kg.ones(2), "b": kg.tensor([1, 2])}, path, metadata={"note": "x"})
    loaded = kg.load(path)
    assert sorted(loaded) == ["a", "b"] and loaded["b"].tolist() == [1, 2]


def test_names_that_collide_get_distinct_entries(tmp_path):
    obj = {"a.b": kg.ones(1), "a": {"b": kg.zeros(1)}, "tensor": [kg.full((1,), 2.0)]}
    kg.save(obj, tmp_path / "f")
    loaded = kg.load(tmp_path / "f")
    assert loaded["a.b"].tolist() == [1.0] and loaded["a"]["b"].tolist() == [0.0]
    assert loaded["tensor"][0].tolist() == [2.0]
    assert kg.load(_saved(kg.ones(2))).tolist() == [1.0, 1.0]  # a bare tensor


def _saved(obj) -> io.BytesIO:
    buffer = io.BytesIO()
    kg.save(obj, buffer)
    buffer.seek(0)
    return buffer


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (kg.nn.Linear(2, 2), r"the Linear at obj\['model'\].*kg.save\(linear.state_dict\(\), f\)"),
        (object(), r"cannot store the object at obj\['model'\]"),
        (lambda: 0, r"cannot store the function"),
        (np.array(["text"]), r"NumPy array at obj\['model'\] has dtype <U4"),
    ],
)
def test_what_cannot_be_saved_is_refused_with_the_place_and_the_fix(tmp_path, value, expected):
    with pytest.raises(TypeError, match=expected):
        kg.save({"model": value}, tmp_path / "f")
    assert not (tmp_path / "f").exists()


def test_map_location(tmp_path):
    path = tmp_path / "cuda.pt"
    # A file as a machine with a GPU writes it: the tensor remembers cuda:0.
    structure = {"dict": [["w", {"tensor": "w", "device": "cuda:0"}]]}
    metadata = {"format": "kernelgrad.object/1", "kernelgrad.structure": json.dumps(structure)}
    save_file({"w": kg.ones(2)}, path, metadata=metadata)
    if not kg.cuda.is_available():
        with pytest.raises(RuntimeError, match=r"saved from cuda:0.*map_location='cpu'"):
            kg.load(path)
    for location in ("cpu", kg.device("cpu"), {"cuda:0": "cpu"}):
        assert kg.load(path, map_location=location)["w"].device == kg.device("cpu")
    seen = []

    def keep_on_host(tensor, location):
        seen.append(location)
        return tensor

    assert kg.load(path, map_location=keep_on_host)["w"].tolist() == [1.0, 1.0]
    assert seen == ["cuda:0"]
    with pytest.raises(TypeError, match="map_location must be"):
        kg.load(path, map_location=3)


@pytest.mark.parametrize(
    ("structure", "expected"),
    [
        ({"tensor": "missing"}, "refers to a tensor 'missing'"),
        ({"dict": [["only a key"]]}, "not a list of \\[key, value\\] pairs"),
        ({"unknown": 1}, "unknown entry kind 'unknown'"),
        ({"float": "not a number"}, "bad float entry"),
        ({}, "unexpected entry"),
    ],
)
def test_a_damaged_structure_raises_checkpoint_error(tmp_path, structure, expected):
    path = tmp_path / "bad.pt"
    metadata = {"format": "kernelgrad.object/1", "kernelgrad.structure": json.dumps(structure)}
    save_file({"w": kg.ones(1)}, path, metadata=metadata)
    with pytest.raises(CheckpointError, match=expected):
        kg.load(path)


def test_damaged_files_raise_checkpoint_error_naming_the_file(tmp_path):
    path = tmp_path / "model.pt"
    kg.save({"w": kg.ones(3)}, path)
    content = path.read_bytes()
    path.write_bytes(content[:-2])
    with pytest.raises(CheckpointError, match=r"model.pt.*truncated"):
        kg.load(path)
    with pytest.raises(CheckpointError, match=r"<BytesIO>.*shorter than the 8-byte header"):
        kg.load(io.BytesIO(b"abc"))
    header_length = struct.unpack("<Q", content[:8])[0]
    with pytest.raises(CheckpointError, match="not valid JSON"):
        kg.load(io.BytesIO(content[:8] + b"[" * header_length + content[8 + header_length :]))


def test_file_objects_must_be_binary(tmp_path):
    with pytest.raises(TypeError, match="binary mode"):
        kg.load(io.StringIO("text"))
    with pytest.raises(TypeError, match="a path or a binary file object"):
        kg.save({}, 3)
