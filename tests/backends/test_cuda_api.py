"""What a user of CUDA tensors sees: ``kg.cuda``, devices on creation, compute follows data
(mixed-device errors), the scalar-access guard, and autodiff on GPU tensors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.device import as_device
from tests.helpers import assert_close, check_grad


# --- kg.cuda -------------------------------------------------------------------------------
def test_import_kernelgrad_does_not_import_numba_or_cuda():
    code = (
        "import sys, kernelgrad as kg\n"
        "assert 'numba' not in sys.modules, 'numba imported'\n"
        "kg.cuda.memory_stats()\n"
        "assert 'numba' not in sys.modules, 'numba imported by kg.cuda'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cuda_namespace(cuda):
    assert kg.cuda.is_available()
    assert kg.cuda.device_count() >= 1
    if kg.cuda.is_simulated():
        assert kg.cuda.device_count() == 1
        assert kg.cuda.get_device_name() == "CUDA simulator"
    assert kg.cuda.current_device() == 0
    with kg.device("cuda:0"):
        assert kg.cuda.current_device() == 0
    kg.ones(3, device=cuda).sum()
    kg.cuda.synchronize()
    kg.cuda.synchronize("cuda:0")


def test_a_missing_device_is_named(cuda):
    count = kg.cuda.device_count()
    with pytest.raises(RuntimeError, match=rf"cuda:{count} does not exist: {count} CUDA device"):
        kg.zeros(2, device=f"cuda:{count}")


def test_creation_on_cuda_everywhere(cuda):
    creators = [
        lambda d: kg.tensor([1.0, 2.0], device=d),
        lambda d: kg.zeros(2, 3, device=d),
        lambda d: kg.ones(2, device=d),
        lambda d: kg.full((2,), 7, device=d),
        lambda d: kg.arange(5, device=d),
        lambda d: kg.linspace(0, 1, 4, device=d),
        lambda d: kg.eye(3, device=d),
        lambda d: kg.rand(4, device=d),
        lambda d: kg.randn(4, device=d),
        lambda d: kg.randint(0, 3, (4,), device=d),
        lambda d: kg.empty(3, device=d),
    ]
    for make in creators:
        assert make(cuda).device == as_device("cuda:0")
    with kg.device(cuda):
        for make in creators:
            assert make(None).device == as_device("cuda:0")
        like = kg.zeros_like(kg.ones(2, device="cpu"))
        assert like.device == as_device("cpu")  # *_like follows its argument


def test_manual_seed_reproduces_cuda_numbers(cuda):
    kg.cuda.manual_seed(5)
    first = kg.randn(10, device=cuda).cpu().numpy()
    kg.cuda.manual_seed_all(5)
    np.testing.assert_array_equal(first, kg.randn(10, device=cuda).cpu().numpy())
    kg.manual_seed(5)
    np.testing.assert_array_equal(first, kg.randn(10, device=cuda).cpu().numpy())


def test_repr_of_a_cuda_tensor(cuda):
    text = repr(kg.tensor([1.0, 2.0], device=cuda))
    assert "device='cuda:0'" in text and "1." in text


# --- compute follows data -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("add", lambda c, g: c + g),
        ("mul", lambda c, g: g * c),
        ("maximum", lambda c, g: kg.maximum(c, g)),
        ("where", lambda c, g: kg.where(g > 0, c, g)),
        ("matmul", lambda c, g: c.reshape(2, 2) @ g.reshape(2, 2)),
        ("cat", lambda c, g: kg.cat([c, g])),
        ("stack", lambda c, g: kg.stack([g, c])),
        ("add_", lambda c, g: g.add_(c)),
        ("take", lambda c, g: kg.take(g, 0, kg.tensor([0, 1]))),
        ("index_select", lambda c, g: c.index_select(0, kg.tensor([0], device="cuda"))),
        ("index_add", lambda c, g: kg.index_add(g, 0, kg.tensor([0], device="cuda"), c[:1])),
        ("gather", lambda c, g: g.gather(0, kg.tensor([1, 0]))),
    ],
)
def test_mixing_devices_names_the_op_and_both_devices(cuda, name, call):
    on_cpu = kg.tensor([1.0, -2.0, 3.0, 4.0])
    on_gpu = kg.tensor([5.0, 6.0, -7.0, 8.0], device=cuda)
    with pytest.raises(kg.DeviceMismatchError) as info:
        call(on_cpu, on_gpu)
    message = str(info.value)
    assert "cpu" in message and "cuda:0" in message, message
    op = {"stack": "cat", "add_": "add", "index_select": "take", "gather": "gather"}.get(name, name)
    assert op in message, message


def test_zero_dim_cpu_tensors_act_as_numbers(cuda):
    scale = kg.tensor(2.0)
    x = kg.tensor([1.0, 2.0], device=cuda)
    y = x * scale
    assert y.device == as_device("cuda:0")
    assert_close(y, [2.0, 4.0])


def test_backward_gradient_on_another_device_is_refused(cuda):
    x = kg.ones(2, device=cuda, requires_grad=True)
    y = x * 2
    with pytest.raises(kg.BackwardError, match="cpu"):
        y.backward(kg.ones(2))


# --- the scalar-access guard ----------------------------------------------------------------
ACCESSES = {
    "if on an element": lambda t: 1 if t[1] else 0,
    "a read loop": lambda t: sum(float(t[i]) for i in range(3)),
    "the loop from the issue": lambda t: [t.__setitem__(i, 1) for i in range(3) if t[i] > 1],
    "float()": lambda t: float(t[0]),
    "int()": lambda t: int(t[0]),
    "bool()": lambda t: bool(t[0]),
    "index": lambda t: [0, 1, 2][t.long()[0]],
    "setitem": lambda t: t.__setitem__(0, 5.0),
    "setitem 2-d": lambda t: t.reshape(1, 3).__setitem__((0, 2), 5.0),
    "iteration": lambda t: list(t),
    "tolist": lambda t: t.tolist(),
}


@pytest.mark.parametrize("what", list(ACCESSES))
def test_scalar_access_is_refused_with_advice(cuda, what):
    t = kg.tensor([0.5, 2.0, 3.0], device=cuda)
    with pytest.raises(kg.ScalarAccessError) as info:
        ACCESSES[what](t)
    message = str(info.value)
    assert "cuda:0" in message and "round trip" in message
    assert "kg.allow_scalar()" in message and "t.cpu()" in message


@pytest.mark.parametrize("what", list(ACCESSES))
def test_allow_scalar_opts_in(cuda, what):
    t = kg.tensor([0.5, 2.0, 3.0], device=cuda)
    with kg.allow_scalar():
        ACCESSES[what](t)


def test_the_loop_from_the_issue_works_when_allowed(cuda):
    t = kg.tensor([0.5, 2.0, 3.0], device=cuda)
    with kg.allow_scalar():
        for i in range(3):
            v = t[i]
            if v > 1:
                t[i] = 1
    assert_close(t, [0.5, 1.0, 1.0])
    assert_close(kg.where(t > 0.7, 0.7, t), [0.5, 0.7, 0.7])  # the whole-tensor way


def test_bool_int_float_of_a_one_element_result_are_allowed_like_item(cuda):
    # A one-element tensor of its own (a reduction, a comparison, a loss) is one
    # synchronising read, as `.item()` is: `if (x < 0).all():` works as on the CPU.
    for device in ("cpu", cuda):
        x = kg.tensor([0.5, -2.0, 3.0], device=device)
        taken = "yes" if (x < 0).any() else "no"
        assert taken == "yes"
        assert not (x < 0).all()
        assert int((x > 0).sum()) == 2
        assert float(x.sum()) == 1.5
        assert bool(x[1] < 0)  # a fresh one-element result, not an element of x
        assert ["a", "b", "c"][x.argmax()] == "c"  # __index__
        assert float(kg.tensor([7.0], device=device)[0]) == 7.0  # the whole of its base
        with pytest.raises(RuntimeError, match="ambiguous"):
            bool(x > 0)


def test_a_loop_of_implicit_reads_of_device_values_warns_once_per_line(cuda, monkeypatch):
    # `if t[i] > 1:` in a loop is allowed (each comparison is a result of its own) but is
    # a device round trip per element: one line making many such reads gets one warning.
    import importlib
    import warnings

    tensor_module = importlib.import_module("kernelgrad.tensor")
    monkeypatch.setattr(tensor_module, "HOST_READS_BEFORE_WARNING", 5)
    t = kg.tensor([0.5, 2.0, 3.0] * 4, device=cuda)
    with pytest.warns(kg.PerformanceWarning, match="round trip") as record:
        large = [i for i in range(12) if t[i] > 1]
    assert large == [1, 2, 4, 5, 7, 8, 10, 11]
    assert len(record) == 1 and record[0].filename == __file__
    assert "kg.where" in str(record[0].message) and "@kg.kernel" in str(record[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with kg.allow_scalar():  # asked for: not counted
            assert sum(1 for i in range(12) if t[i] > 1) == 8
        for _ in range(4):  # fewer reads than the threshold from this line
            assert not (t < 0).any()


def test_item_and_whole_tensor_reads_stay_allowed(cuda):
    t = kg.tensor([[1.0, 2.0], [3.0, 4.0]], device=cuda)
    assert t.sum().item() == 10.0
    assert t[1, 1].item() == 4.0
    assert f"{t.sum():.1f}" == "10.0"
    assert t.cpu().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert kg.tensor([7.0], device=cuda).tolist() == [7.0]  # one element: like .item()
    assert repr(t)  # printing copies the whole tensor once


# --- autodiff on the GPU ----------------------------------------------------------------------
def test_gradients_match_cpu(cuda):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((4, 2))

    def fn(x, w):
        return ((x @ w).tanh() * x.sum(dim=1, keepdim=True)).log_softmax(1)

    results = {}
    for device in ("cpu", cuda):
        x = kg.tensor(a, device=device, requires_grad=True)
        w = kg.tensor(b, device=device, requires_grad=True)
        fn(x, w).sum().backward()
        results[device] = (x.grad.cpu().numpy(), w.grad.cpu().numpy())
    for got, want in zip(results[cuda], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_central_differences_on_cuda(cuda):
    rng = np.random.default_rng(1)
    check_grad(
        lambda x, y: (x * y).sigmoid().amax(dim=0) + x.abs().mean(),
        rng.standard_normal((2, 3)),
        rng.standard_normal((2, 3)),
        device=cuda,
    )
