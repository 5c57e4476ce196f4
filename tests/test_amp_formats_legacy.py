"""PyTorch idioms of real training programs (tests/compat/programs/unet.py,
seq2seq_translation.py, word2vec_negative_sampling.py): ``torch.autocast`` and
``GradScaler`` (kernelgrad/amp.py), memory formats such as ``channels_last``
(kernelgrad/memory_formats.py) and the legacy constructors ``torch.LongTensor(data)``
(kernelgrad/legacy_types.py), against PyTorch where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg

# --- autocast ---------------------------------------------------------------------------------


def test_autocast_disabled_changes_nothing_and_works_as_a_decorator():
    x = kg.tensor([1.0, 2.0])
    with kg.autocast("cpu", enabled=False):
        y = x * 2
    assert y.dtype == kg.float32

    @kg.autocast("cuda", enabled=False)
    def double(t):
        return t * 2

    np.testing.assert_array_equal(double(x).numpy(), [2.0, 4.0])
    with kg.cuda.amp.autocast(enabled=False):
        assert (x + 1).dtype == kg.float32


def test_autocast_enabled_warns_that_the_block_stays_float32():
    with pytest.warns(UserWarning, match="no float16 or bfloat16"), kg.autocast("cpu"):
        y = kg.tensor([1.0]) * 3
    assert y.dtype == kg.float32


def test_autocast_refuses_what_pytorch_refuses():
    with pytest.raises(ValueError, match="device_type"):
        kg.autocast(kg.device("cpu"), enabled=False)
    with pytest.raises(ValueError, match="unsupported autocast device_type 'mps'"):
        kg.autocast("mps", enabled=False)


# --- GradScaler -------------------------------------------------------------------------------


def _linear_problem(lib, weight):
    w = lib.tensor(weight, requires_grad=True)
    optimizer = lib.optim.SGD([w], lr=0.1)
    return w, optimizer


def test_grad_scaler_disabled_passes_everything_through():
    w, optimizer = _linear_problem(kg, [1.0, 2.0])
    scaler = kg.cuda.amp.GradScaler(enabled=False)
    loss = (w * w).sum()
    assert scaler.scale(loss) is loss
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    np.testing.assert_allclose(w.detach().numpy(), [0.8, 1.6], rtol=1e-6)
    assert scaler.get_scale() == 1.0 and not scaler.is_enabled() and scaler.state_dict() == {}


def test_a_cuda_grad_scaler_disables_itself_without_cuda(monkeypatch):
    monkeypatch.setattr(kg.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling."):
        scaler = kg.amp.GradScaler("cuda")
    assert not scaler.is_enabled()


@pytest.mark.torch
def test_grad_scaler_matches_pytorch_step_by_step():
    """Scaled losses, unscaled gradients, skipped steps (an infinite gradient), the
    backoff and growth of the scale and the state_dict, as torch.amp.GradScaler("cpu")."""
    torch = pytest.importorskip("torch")
    results = {}
    for lib in (torch, kg):
        w, optimizer = _linear_problem(lib, [1.0, -2.0, 3.0])
        b = lib.tensor([0.5], requires_grad=True)
        optimizer.add_param_group({"params": [b]})
        scaler = lib.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
        record = []
        for step in range(5):
            optimizer.zero_grad()
            # step 2: the first group's gradient is finite, the second's infinite
            loss = (w * w).sum() + (b * b * (float("inf") if step == 2 else 1.0)).sum()
            scaled = scaler.scale(loss)
            record.append(scaled.item())
            scaled.backward()
            scaler.unscale_(optimizer)
            record.extend(w.grad.detach().numpy().tolist() + b.grad.detach().numpy().tolist())
            scaler.step(optimizer)
            scaler.update()
            record.append(scaler.get_scale())
            record.extend(w.detach().numpy().tolist() + b.detach().numpy().tolist())
        results[lib.__name__] = (record, scaler.state_dict())
    np.testing.assert_allclose(results["kernelgrad"][0], results["torch"][0], rtol=1e-6)
    assert results["kernelgrad"][1] == results["torch"][1]


def test_grad_scaler_refuses_out_of_order_calls_as_pytorch():
    w, optimizer = _linear_problem(kg, [1.0])
    scaler = kg.amp.GradScaler("cpu")
    with pytest.raises(RuntimeError, match="No inf checks were recorded prior to update"):
        scaler.update()
    scaler.scale((w * w).sum()).backward()
    scaler.unscale_(optimizer)
    with pytest.raises(RuntimeError, match="already been called on this optimizer"):
        scaler.unscale_(optimizer)
    scaler.step(optimizer)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(optimizer)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(optimizer)
    scaler.update()
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(optimizer, closure=lambda: None)
    other = kg.amp.GradScaler("cpu")
    other.load_state_dict(scaler.state_dict())
    assert other.state_dict() == scaler.state_dict()
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        other.load_state_dict({})


def test_grad_scaler_on_the_device(device):
    w = kg.tensor([1.0, 2.0], device=device, requires_grad=True)
    optimizer = kg.optim.SGD([w], lr=0.5)
    scaler = kg.amp.GradScaler("cpu" if device == "cpu" else "cuda", init_scale=8.0)
    scaler.scale((w * w).sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    np.testing.assert_allclose(w.detach().cpu().numpy(), [0.0, 0.0])
    assert scaler.get_scale() == 8.0


# --- memory formats ---------------------------------------------------------------------------


def test_channels_last_has_pytorchs_strides_and_the_same_values(device):
    x = kg.arange(24, dtype=kg.float32, device=device).reshape(1, 3, 2, 4)
    y = x.to(memory_format=kg.channels_last)
    assert y.stride() == (24, 1, 12, 3)
    assert y.is_contiguous(memory_format=kg.channels_last) and not y.is_contiguous()
    np.testing.assert_array_equal(y.cpu().numpy(), x.cpu().numpy())
    np.testing.assert_array_equal((y * 2 + 1).cpu().numpy(), (x * 2 + 1).cpu().numpy())
    assert y.to(memory_format=kg.channels_last) is y
    back = y.contiguous()
    assert back.is_contiguous() and back.stride() == (24, 8, 4, 1)
    assert y.contiguous(memory_format=kg.channels_last) is y
    assert x.to(memory_format=kg.preserve_format) is x
    assert x.contiguous(memory_format=kg.contiguous_format) is x


@pytest.mark.torch
def test_memory_formats_answer_as_pytorch():
    torch = pytest.importorskip("torch")
    data = np.arange(2 * 3 * 4 * 5, dtype="f4").reshape(2, 3, 4, 5)
    for lib in (torch, kg):
        x = lib.tensor(data)
        y = x.to(memory_format=lib.channels_last)
        z = lib.tensor(data[None]).contiguous(memory_format=lib.channels_last_3d)
        answers = (
            tuple(y.stride()),
            tuple(z.stride()),
            x.is_contiguous(memory_format=lib.channels_last),
            y.is_contiguous(memory_format=lib.channels_last),
            z.is_contiguous(memory_format=lib.channels_last_3d),
            repr(lib.channels_last),
        )
        if lib is torch:
            expected = answers
    assert answers == expected
    with pytest.raises(RuntimeError, match="required rank 4"):
        kg.ones(2, 3).to(memory_format=kg.channels_last)


def test_channels_last_is_differentiable_and_modules_accept_it():
    x = kg.tensor(np.arange(8, dtype="f4").reshape(1, 2, 2, 2), requires_grad=True)
    y = x.to(memory_format=kg.channels_last)
    (y * kg.tensor([1.0, 2.0]).view(1, 2, 1, 1)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, :, 0, 0], [1.0, 2.0])
    conv = kg.nn.Conv2d(2, 1, 1)
    expected = conv(x).detach().numpy()
    assert conv.to(memory_format=kg.channels_last) is conv
    assert conv.weight.is_contiguous()  # parameters stay row-major
    np.testing.assert_allclose(conv(y).detach().numpy(), expected, rtol=1e-6)
    with pytest.raises(TypeError, match="memory_format"):
        x.to(memory_format="channels_last")


# --- legacy tensor types ----------------------------------------------------------------------


def test_legacy_constructors_convert_as_pytorch():
    ids = kg.LongTensor(np.array([[1, 2], [3, 4]], dtype=np.int32))
    assert ids.dtype == kg.int64 and ids.tolist() == [[1, 2], [3, 4]]
    assert kg.FloatTensor([1, 2]).dtype == kg.float32
    assert kg.DoubleTensor(kg.tensor([1.5])).dtype == kg.float64
    assert kg.BoolTensor([0, 1]).tolist() == [False, True]
    assert tuple(kg.IntTensor(2, 3).shape) == (2, 3) and kg.IntTensor(2, 3).dtype == kg.int32
    assert tuple(kg.FloatTensor(kg.Size([4])).shape) == (4,)
    assert tuple(kg.FloatTensor().shape) == (0,)
    assert isinstance(kg.ones(2), kg.FloatTensor) and not isinstance(kg.ones(2), kg.LongTensor)
    assert isinstance(kg.arange(3), kg.LongTensor) and not isinstance(np.ones(2), kg.FloatTensor)
    with pytest.raises(TypeError, match="CPU tensors"):
        kg.FloatTensor([1.0], device="cuda")


@pytest.mark.torch
def test_legacy_constructors_match_pytorch():
    torch = pytest.importorskip("torch")
    cases = [
        ("LongTensor", (np.array([1, 2], dtype=np.int32),)),
        ("FloatTensor", ([[1, 2], [3, 4]],)),
        ("DoubleTensor", (np.array([0.5], dtype=np.float32),)),
        ("IntTensor", ([7.0, 8.0],)),
        ("FloatTensor", (2, 3)),
    ]
    for name, args in cases:
        ours, theirs = getattr(kg, name)(*args), getattr(torch, name)(*args)
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert str(ours.dtype).rpartition(".")[2] == str(theirs.dtype).rpartition(".")[2]
        if not isinstance(args[0], int):
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.torch
def test_type_with_a_legacy_type_converts_as_pytorch():
    """``x.type(torch.FloatTensor)`` (eriklindernoren/PyTorch-GAN's ``imgs.type(Tensor)``,
    tests/compat/programs/wgan_gp.py) converts to the type's dtype; a name works too."""
    torch = pytest.importorskip("torch")
    values = np.array([[1, -2], [3, 4]], dtype=np.int64)
    for target in ("FloatTensor", "DoubleTensor", "IntTensor", "LongTensor", "BoolTensor"):
        ours = kg.tensor(values).type(getattr(kg, target))
        theirs = torch.tensor(values).type(getattr(torch, target))
        assert str(ours.dtype).rpartition(".")[2] == str(theirs.dtype).rpartition(".")[2]
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        assert isinstance(ours, getattr(kg, target))
        assert kg.tensor(values).type(f"torch.{target}").dtype == ours.dtype
    x = kg.ones(2, requires_grad=True)
    x.type(kg.DoubleTensor).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_cuda_legacy_types_make_and_convert_to_cuda_tensors(device):
    """``torch.cuda.FloatTensor(array)``, ``isinstance(x, torch.cuda.FloatTensor)`` and
    ``x.type(torch.cuda.FloatTensor)`` (the ``Tensor = torch.cuda.FloatTensor if cuda
    else torch.FloatTensor`` of PyTorch-GAN's scripts) give CUDA tensors; converting to a
    CPU type brings a CUDA tensor back to the CPU, as in PyTorch."""
    if device == "cpu":
        if kg.cuda.is_available():
            pytest.skip("a CUDA device is there; the cuda pass tests it")
        with pytest.raises(RuntimeError, match="cuda"):
            kg.cuda.FloatTensor([1.0])
        assert not isinstance(kg.ones(2), kg.cuda.FloatTensor)
        return
    made = kg.cuda.FloatTensor(np.array([[0.5], [2.0]]))
    assert made.device.type == "cuda" and made.dtype == kg.float32
    assert made.cpu().tolist() == [[0.5], [2.0]]
    assert isinstance(made, kg.cuda.FloatTensor) and not isinstance(made, kg.FloatTensor)
    filled = kg.cuda.FloatTensor(2, 1).fill_(1.0)
    assert filled.device.type == "cuda" and filled.cpu().tolist() == [[1.0], [1.0]]
    moved = kg.tensor([1, 2]).type(kg.cuda.FloatTensor)
    assert moved.device.type == "cuda" and moved.dtype == kg.float32
    assert moved.type() == "kernelgrad.cuda.FloatTensor"  # PyTorch: 'torch.cuda.FloatTensor'
    assert moved.type(moved.type()) is moved  # the type it has: the tensor itself
    assert kg.tensor([1, 2]).type("torch.cuda.DoubleTensor").device.type == "cuda"
    back = moved.type(kg.LongTensor)
    assert back.device.type == "cpu" and back.tolist() == [1, 2]
    with pytest.raises(TypeError, match="CUDA tensors"):
        kg.cuda.FloatTensor([1.0], device="cpu")


# --- set_default_device -----------------------------------------------------------------------


def test_set_default_device_is_what_creation_functions_use(device):
    try:
        kg.set_default_device(device)
        assert kg.get_default_device() == kg.device(device)
        assert kg.zeros(2).device == kg.device(device)
        assert kg.tensor([1.0]).device == kg.device(device)
        with kg.device("cpu"):  # a with block still takes precedence
            assert kg.ones(1).device == kg.device("cpu")
        assert kg.ones(1, device="cpu").device == kg.device("cpu")
    finally:
        kg.set_default_device(None)
    assert kg.get_default_device() == kg.device("cpu") and kg.ones(1).device.type == "cpu"
