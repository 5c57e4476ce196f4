"""kg.nn.functional against NumPy references (forward values, and gradients by central
differences of the reference), against PyTorch where it is installed, and against
central differences of kernelgrad itself."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ShapeError
from kernelgrad.nn.functional import convolution
from tests.helpers import as_numpy, assert_close, check_grad, numerical_grad
from tests.nn import reference as ref
from tests.nn.reference import compare

RNG = np.random.default_rng(1234)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def torch_module():
    return pytest.importorskip("torch")


# --- convolution --------------------------------------------------------------------------
@pytest.fixture(params=["patch-matrix", "direct"])
def conv_algorithm(request, monkeypatch, device):
    """Run a convolution test with each algorithm: im2col + matrix product, and the direct
    kernels (which the CPU uses for stride 1 and few taps per filter; other convolutions
    and other devices use the patch matrix)."""
    if request.param == "direct" and device != "cpu":
        pytest.skip("the direct convolution kernels run on the CPU only")
    monkeypatch.setattr(
        convolution, "DIRECT_MAX_TAPS", 0 if request.param == "patch-matrix" else 10**9
    )
    return request.param


# (N, C, H, W, out, kernel, stride, padding, dilation, groups, bias)
CONV_CASES = [
    (2, 3, 7, 6, 4, 3, 1, 1, 1, 1, True),
    (2, 1, 8, 8, 6, 5, 1, 2, 1, 1, True),  # LeNet's first layer, smaller
    (2, 4, 9, 9, 6, 3, 2, 1, 1, 2, True),  # stride 2, groups
    (1, 2, 7, 7, 2, 3, 1, 2, 2, 1, False),  # dilation, no bias
    (2, 3, 6, 5, 4, (2, 3), (2, 1), (1, 0), 1, 1, True),  # rectangular everything
    (1, 4, 5, 5, 4, 3, 1, "same", 1, 4, True),  # depthwise, 'same'
    (2, 2, 5, 6, 3, (1, 2), 1, "valid", (1, 2), 1, True),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_references(case, device, conv_algorithm, reference):
    n, c, h, w, out, kernel, stride, padding, dilation, groups, bias = case
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    arrays = [randn(n, c, h, w), randn(out, c // groups, kh, kw)]
    if bias:
        arrays.append(randn(out))
    options = (stride, padding, dilation, groups)
    compare(
        reference,
        lambda x, weight, b=None: F.conv2d(x, weight, b, *options),
        lambda x, weight, b=None: ref.conv2d(x, weight, b, *options),
        lambda torch, x, weight, b=None: torch.nn.functional.conv2d(x, weight, b, *options),
        arrays,
        device,
    )


def test_conv2d_gradients_by_central_differences(device, conv_algorithm):
    check_grad(
        lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=1, dilation=(2, 1)),
        randn(1, 2, 5, 5, dtype=np.float64),
        randn(3, 2, 2, 3, dtype=np.float64),
        randn(3, dtype=np.float64),
        device=device,
    )


def test_conv2d_accepts_unbatched_and_non_contiguous_input(device, reference):
    # (H, W, C) values permuted to (C, H, W): not contiguous, and no batch dim
    compare(
        reference,
        lambda x, weight: F.conv2d(x.permute(2, 0, 1), weight, padding=1),
        lambda x, weight: ref.conv2d(x.transpose(2, 0, 1), weight, padding=1),
        lambda torch, x, weight: torch.nn.functional.conv2d(x.permute(2, 0, 1), weight, padding=1),
        [randn(5, 6, 3), randn(2, 3, 3, 3)],
        device,
    )


@pytest.mark.parametrize("options", [(1, 1, 1, 1), (2, 0, 2, 2), (1, "same", 1, 1)])
def test_conv1d_matches_references(options, device, reference):
    groups = options[3]
    compare(
        reference,
        lambda x, w, b: F.conv1d(x, w, b, *options),
        lambda x, w, b: ref.conv1d(x, w, b, *options),
        lambda torch, x, w, b: torch.nn.functional.conv1d(x, w, b, *options),
        [randn(2, 4, 9), randn(6, 4 // groups, 3), randn(6)],
        device,
    )


def test_conv2d_errors_name_the_problem(device):
    x = kg.zeros(1, 3, 5, 5, device=device)
    with pytest.raises(ShapeError, match="3 channels"):
        F.conv2d(x, kg.zeros(2, 2, 3, 3, device=device))
    with pytest.raises(ShapeError, match="larger than the padded input"):
        F.conv2d(x, kg.zeros(2, 3, 7, 7, device=device))
    with pytest.raises(ShapeError, match="groups=2"):
        F.conv2d(x, kg.zeros(2, 1, 3, 3, device=device), groups=2)
    with pytest.raises(TypeError, match="float64"):
        F.conv2d(x, kg.zeros(2, 3, 3, 3, dtype=kg.float64, device=device))
    with pytest.raises(ValueError, match="same"):
        F.conv2d(x, kg.zeros(2, 3, 3, 3, device=device), stride=2, padding="same")


def test_second_order_gradients_through_conv_and_pooling(device):
    # Under create_graph their VJPs are recorded (tests/nn/test_conv_pool_grad2.py
    # compares them with PyTorch): the first-order gradient is the kernels' one.
    x = kg.tensor(randn(1, 1, 4, 4), device=device, requires_grad=True)
    w = kg.tensor(randn(1, 1, 3, 3), device=device, requires_grad=True)
    for out in (F.conv2d(x, w), F.max_pool2d(x, 2), F.avg_pool2d(x, 2)):
        (expected,) = kg.autograd.grad(out.sum(), x, retain_graph=True)
        (got,) = kg.autograd.grad(out.sum(), x, create_graph=True)
        assert_close(got.detach(), expected.cpu().numpy())


# --- pooling --------------------------------------------------------------------------------
# (kernel, stride, padding, dilation, ceil_mode)
POOL_CASES = [
    (2, None, 0, 1, False),
    (3, 2, 1, 1, False),
    (3, 2, 1, 1, True),
    (2, 1, 0, 1, False),
    (3, 3, 0, 2, False),
    ((2, 3), (1, 2), (1, 0), 1, True),
    (4, 2, 1, 1, False),  # 16 taps: the largest fused window
    (5, 2, 2, 1, False),  # 25 taps: a reduction over an unfold view instead
]


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool2d_matches_references(case, device, reference):
    options = case  # kernel, stride, padding, dilation, ceil_mode
    compare(
        reference,
        lambda x: F.max_pool2d(x, *options),
        lambda x: ref.max_pool2d(x, *options),
        lambda torch, x: torch.nn.functional.max_pool2d(x, *options),
        [randn(2, 3, 7, 8)],
        device,
    )


@pytest.mark.parametrize("case", [case for case in POOL_CASES if case[3] == 1])  # no dilation
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_matches_references(case, count_include_pad, device, reference):
    kernel, stride, padding, _, ceil_mode = case
    options = (kernel, stride, padding, ceil_mode, count_include_pad)
    compare(
        reference,
        lambda x: F.avg_pool2d(x, *options),
        lambda x: ref.avg_pool2d(x, *options),
        lambda torch, x: torch.nn.functional.avg_pool2d(x, *options),
        [randn(2, 3, 7, 8)],
        device,
    )


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("kernel, stride, padding", [(2, 2, 0), (3, 2, 1)])
def test_pooling_channel_major_input_matches_references(
    pool, kernel, stride, padding, device, reference
):
    # Convolution outputs are stored channel-major: (C, N, H, W) memory seen as (N, C, H, W).
    compare(
        reference,
        lambda x: getattr(F, f"{pool}_pool2d")(x.permute(1, 0, 2, 3), kernel, stride, padding),
        lambda x: getattr(ref, f"{pool}_pool2d")(x.transpose(1, 0, 2, 3), kernel, stride, padding),
        lambda torch, x: getattr(torch.nn.functional, f"{pool}_pool2d")(
            x.permute(1, 0, 2, 3), kernel, stride, padding
        ),
        [randn(3, 2, 6, 7)],
        device,
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("stride", [1, 2])
def test_convolution_then_pooling_matches_references(
    pool, stride, device, conv_algorithm, reference
):
    # The pooling gradient is handed to the convolution in the convolution's own layout.
    compare(
        reference,
        lambda x, w, b: getattr(F, f"{pool}_pool2d")(F.conv2d(x, w, b, stride, 1), 2),
        lambda x, w, b: getattr(ref, f"{pool}_pool2d")(ref.conv2d(x, w, b, stride, 1), 2),
        lambda torch, x, w, b: getattr(torch.nn.functional, f"{pool}_pool2d")(
            torch.nn.functional.conv2d(x, w, b, stride, 1), 2
        ),
        [randn(2, 3, 8, 9), randn(4, 3, 3, 3), randn(4)],
        device,
    )


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("layout", ["contiguous", "conv output"])
def test_max_pool2d_relu_equals_relu_of_max_pool2d(case, layout, device):
    kernel, stride, padding, dilation, ceil_mode = case
    values = randn(2, 3, 7, 8)
    values[0, 0, 1, 1] = np.nan
    values[1, 2, :4, :4] = -np.abs(values[1, 2, :4, :4])  # windows with no positive value
    results = []
    for fused in (True, False):
        x = kg.tensor(values, device=device, requires_grad=True)
        source = x
        if layout == "conv output":  # stored batch innermost, as conv2d returns it
            source = F.conv2d(x, kg.ones(3, 1, 1, 1, device=device), groups=3)
        if fused:
            out = F.max_pool2d_relu(source, kernel, stride, padding, dilation, ceil_mode)
        else:
            out = F.relu(F.max_pool2d(source, kernel, stride, padding, dilation, ceil_mode))
        upstream = np.arange(out.numel(), dtype=np.float32).reshape(out.shape) + 1.0
        out.backward(kg.tensor(upstream, device=device))
        results.append((as_numpy(out), as_numpy(x.grad)))
    (fused_out, fused_grad), (out, grad) = results
    np.testing.assert_array_equal(fused_out, out)
    np.testing.assert_array_equal(fused_grad, grad)
    assert (fused_out[~np.isnan(fused_out)] >= 0).all()


def test_sequential_runs_max_pool_then_relu_as_one_kernel(device):
    from kernelgrad.compile import count_launches

    x = kg.tensor(randn(2, 3, 8, 8), device=device)
    pair = kg.nn.Sequential(kg.nn.MaxPool2d(2), kg.nn.ReLU())
    with count_launches() as fused:
        out = pair(x)
    with count_launches() as separate:
        expected = kg.nn.ReLU()(kg.nn.MaxPool2d(2)(x))
    assert fused.count == separate.count - 1
    np.testing.assert_array_equal(as_numpy(out), as_numpy(expected))


def test_pooling_matches_numpy_windows(device):
    x = randn(2, 3, 6, 8)
    windows = x.reshape(2, 3, 3, 2, 4, 2)
    assert_close(F.max_pool2d(kg.tensor(x, device=device), 2), windows.max(axis=(3, 5)))
    assert_close(F.avg_pool2d(kg.tensor(x, device=device), 2), windows.mean(axis=(3, 5)), rtol=1e-5)


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("stride", [1, 2])
def test_pooling_with_a_one_element_window_selects_and_routes_the_gradient(pool, stride, device):
    # kernel_size=1 used to fail to compile: its one-output gradient kernel returned a tuple.
    values = randn(2, 3, 5, 4)
    x = kg.tensor(values, device=device, requires_grad=True)
    out = getattr(F, f"{pool}_pool2d")(x, 1, stride)
    np.testing.assert_array_equal(as_numpy(out), values[:, :, ::stride, ::stride])
    out.backward(kg.ones(*out.shape, device=device) * 3.0)
    expected = np.zeros_like(values)
    expected[:, :, ::stride, ::stride] = 3.0
    np.testing.assert_array_equal(as_numpy(x.grad), expected)


def test_max_pool2d_gives_a_tied_window_gradient_to_its_first_maximum(device):
    x = kg.ones(1, 1, 2, 4, device=device, requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    assert as_numpy(x.grad).tolist() == [[[[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]]


def test_max_pool2d_propagates_nan_and_routes_its_gradient_to_a_nan(device):
    x = kg.tensor([[[[1.0, float("nan")], [3.0, float("nan")]]]], device=device, requires_grad=True)
    out = F.max_pool2d(x, 2)
    assert np.isnan(out.item())
    out.backward(kg.tensor([[[[float("inf")]]]], device=device))
    # the first NaN of the window (PyTorch picks the last one; see _max_grad_fn)
    assert as_numpy(x.grad).tolist() == [[[[0.0, float("inf")], [0.0, 0.0]]]]


def test_pooling_gradients_by_central_differences(device):
    # Distinct values keep the maximum away from ties (where max is not differentiable).
    values = np.arange(2 * 5 * 6, dtype=np.float64).reshape(1, 2, 5, 6)
    values = RNG.permutation(values.reshape(-1)).reshape(values.shape) * 0.1
    check_grad(lambda x: F.max_pool2d(x, 3, 2, padding=1), values, device=device)
    check_grad(lambda x: F.avg_pool2d(x, 2, 1, ceil_mode=True), values, device=device)


@pytest.mark.parametrize("size", [1, (2, 3), (3, 2), (None, 4), 4])
def test_adaptive_avg_pool2d_matches_references(size, device, reference):
    compare(
        reference,
        lambda x: F.adaptive_avg_pool2d(x, size),
        lambda x: ref.adaptive_avg_pool2d(x, size),
        lambda torch, x: torch.nn.functional.adaptive_avg_pool2d(x, size),
        [randn(2, 3, 8, 7)],
        device,
    )


@pytest.mark.parametrize("pool, options", [("max", (3, 2, 1)), ("avg", (2,))])
def test_pool1d_matches_references(pool, options, device, reference):
    compare(
        reference,
        lambda x: getattr(F, f"{pool}_pool1d")(x, *options),
        lambda x: getattr(ref, f"{pool}_pool1d")(x, *options),
        lambda torch, x: getattr(torch.nn.functional, f"{pool}_pool1d")(x, *options),
        [randn(2, 3, 9)],
        device,
    )


def test_pooling_errors(device):
    x = kg.zeros(1, 1, 4, 4, device=device)
    with pytest.raises(ValueError, match="half the kernel"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ShapeError, match="does not fit"):
        F.max_pool2d(x, 5)
    with pytest.raises(TypeError, match="floating point"):
        F.max_pool2d(kg.zeros(1, 1, 4, 4, dtype=kg.int64, device=device), 2)


# --- linear, activations ---------------------------------------------------------------------
def test_linear_gradients_by_central_differences(device):
    check_grad(
        F.linear,
        randn(3, 4, dtype=np.float64),
        randn(2, 4, dtype=np.float64),
        randn(2, dtype=np.float64),
        device=device,
    )
    check_grad(
        F.linear, randn(2, 3, 4, dtype=np.float64), randn(2, 4, dtype=np.float64), device=device
    )


def test_linear_second_derivatives(device, reference):
    # d/d(x, w) of |d/dx sum(linear(x, w)**2)|**2, where d/dx sum(linear(x, w)**2) = 2 x w^T w
    x_values, w_values = randn(3, 4, dtype=np.float64), randn(2, 4, dtype=np.float64)
    x = kg.tensor(x_values, device=device, requires_grad=True)
    w = kg.tensor(w_values, device=device, requires_grad=True)
    F.linear(x, w).pow(2).sum().backward(create_graph=True)
    first = x.grad
    x.grad = w.grad = None
    (first * first).sum().backward()
    if reference == "torch":
        torch = torch_module()
        tx = torch.tensor(x_values, requires_grad=True)
        tw = torch.tensor(w_values, requires_grad=True)
        (grad,) = torch.autograd.grad(
            torch.nn.functional.linear(tx, tw).pow(2).sum(), tx, create_graph=True
        )
        (grad * grad).sum().backward()
        assert_close(x.grad, tx.grad.numpy(), rtol=1e-10)
        assert_close(w.grad, tw.grad.numpy(), rtol=1e-10)
        return
    expected = numerical_grad(
        lambda a, b: float(((2 * a @ b.T @ b) ** 2).sum()), [x_values.copy(), w_values.copy()]
    )
    assert_close(x.grad, expected[0], rtol=1e-6, atol=1e-6)
    assert_close(w.grad, expected[1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_references(bias, device, reference):
    # without a bias: extra leading dims
    arrays = [randn(4, 3), randn(5, 3), randn(5)] if bias else [randn(2, 4, 3), randn(5, 3)]
    compare(
        reference,
        F.linear,
        ref.linear,
        lambda torch, *tensors: torch.nn.functional.linear(*tensors),
        arrays,
        device,
    )


ACTIVATIONS = [  # (name, keyword arguments): the same name in F, the reference and PyTorch's F
    ("relu", {}),
    ("gelu", {}),
    ("gelu", {"approximate": "tanh"}),
    ("sigmoid", {}),
    ("tanh", {}),
    ("silu", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("softplus", {"beta": 2.0, "threshold": 3.0}),
    ("softmax", {"dim": 1}),
    ("log_softmax", {"dim": 0}),
]
_NUMPY_ACTIVATIONS = {"tanh": np.tanh}


@pytest.mark.parametrize("name, options", ACTIVATIONS)
def test_activations_match_references(name, options, device, reference):
    numpy_fn = _NUMPY_ACTIVATIONS.get(name) or getattr(ref, name)
    compare(
        reference,
        lambda x: getattr(F, name)(x, **options),
        lambda x: numpy_fn(x, **options),
        lambda torch, x: getattr(torch.nn.functional, name)(x, **options),
        [randn(4, 5) * 3],
        device,
    )


# --- dropout, normalisation, embedding, padding -------------------------------------------
def test_dropout_zeroes_a_fraction_p_and_scales_the_rest(device):
    kg.manual_seed(0)
    x = kg.ones(4000, device=device, requires_grad=True)
    out = F.dropout(x, p=0.25)
    values = as_numpy(out)
    zero_fraction = (values == 0).mean()
    assert 0.2 < zero_fraction < 0.3
    np.testing.assert_allclose(values[values != 0], 1 / 0.75, rtol=1e-6)
    out.sum().backward()
    np.testing.assert_array_equal(as_numpy(x.grad), values)  # same mask, same scale
    assert F.dropout(x, 0.5, training=False) is x
    assert (as_numpy(F.dropout(x, 1.0)) == 0).all()
    with pytest.raises(ValueError):
        F.dropout(x, 1.5)


def test_batch_norm_matches_references_in_training_and_eval(device, reference):
    x, weight, bias = randn(6, 3, 4, 2), randn(3), randn(3)
    mine_mean, mine_var = kg.zeros(3, device=device), kg.ones(3, device=device)
    if reference == "torch":
        torch = torch_module()
        their_mean, their_var = torch.zeros(3), torch.ones(3)
    compare(
        reference,
        lambda x, w, b: F.batch_norm(x, mine_mean, mine_var, w, b, True, 0.3, 1e-3),
        lambda x, w, b: ref.batch_norm_training(x, w, b, eps=1e-3),
        lambda torch, x, w, b: torch.nn.functional.batch_norm(
            x, their_mean, their_var, w, b, True, 0.3, 1e-3
        ),
        [x, weight, bias],
        device,
    )
    if reference == "torch":
        expected_mean, expected_var = their_mean.numpy(), their_var.numpy()
    else:
        expected_mean, expected_var = ref.running_statistics([x.astype(np.float64)], 0.3, 3)
    assert_close(mine_mean, expected_mean, rtol=1e-5)
    assert_close(mine_var, expected_var, rtol=1e-5)
    compare(
        reference,
        lambda x, w, b: F.batch_norm(x, mine_mean, mine_var, w, b, False),
        lambda x, w, b: ref.batch_norm(x, expected_mean, expected_var, w, b),
        lambda torch, x, w, b: torch.nn.functional.batch_norm(
            x, their_mean, their_var, w, b, False
        ),
        [randn(2, 3, 4, 2), weight, bias],
        device,
    )


def test_layer_norm_matches_references(device, reference):
    compare(
        reference,
        lambda x, w, b: F.layer_norm(x, (3, 4), w, b),
        lambda x, w, b: ref.layer_norm(x, (3, 4), w, b),
        lambda torch, x, w, b: torch.nn.functional.layer_norm(x, (3, 4), w, b),
        [randn(2, 3, 4), randn(3, 4), randn(3, 4)],
        device,
    )


def test_normalisation_gradients_by_central_differences(device):
    x = randn(4, 3, dtype=np.float64)
    check_grad(lambda x: F.layer_norm(x, (3,)), x, device=device)
    check_grad(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        x,
        randn(3, dtype=np.float64),
        randn(3, dtype=np.float64),
        device=device,
    )


def test_embedding_matches_references_and_padding_rows_get_no_gradient(device, reference):
    table = randn(6, 3)
    index = np.array([[0, 2, 5], [2, 2, 1]])
    mine = kg.tensor(table, device=device, requires_grad=True)
    out = F.embedding(kg.tensor(index, device=device), mine, padding_idx=2)
    seed = randn(2, 3, 3)
    out.backward(kg.tensor(seed, device=device))
    if reference == "torch":
        torch = torch_module()
        theirs = torch.tensor(table, requires_grad=True)
        expected = torch.nn.functional.embedding(torch.tensor(index), theirs, padding_idx=2)
        expected.backward(torch.tensor(seed))
        expected_out, expected_grad = expected.detach().numpy(), theirs.grad.numpy()
    else:
        expected_out = table[index]
        expected_grad = ref.embedding_grad(index, 6, seed.astype(np.float64), padding_idx=2)
    assert_close(out, expected_out)
    assert_close(mine.grad, expected_grad, rtol=1e-5)
    assert as_numpy(mine.grad)[2].tolist() == [0.0, 0.0, 0.0]
    # CUDA reports embedding's range check at the next read, after embedding has returned
    with pytest.raises(IndexError, match="6 rows"):
        F.embedding(kg.tensor([7], device=device), mine).cpu()
    with pytest.raises(TypeError, match="integer"):
        F.embedding(kg.tensor([1.0], device=device), mine)


def test_one_hot_and_pad(device):
    assert as_numpy(F.one_hot(kg.tensor([1, 0], device=device), 3)).tolist() == [
        [0, 1, 0],
        [1, 0, 0],
    ]
    padded = F.pad(kg.ones(1, 2, device=device), (1, 2, 1, 0), value=5.0)
    assert as_numpy(padded).tolist() == [[5, 5, 5, 5, 5], [5, 1, 1, 5, 5]]
    reflected = F.pad(kg.tensor([1.0, 2.0], device=device), (1, 1), mode="reflect")
    assert as_numpy(reflected).tolist() == [2.0, 1.0, 2.0, 1.0]  # more in test_functional_extra
    with pytest.raises(ValueError, match="pad: mode must be"):
        F.pad(kg.ones(2, device=device), (1, 1), mode="mirror")


# --- losses -------------------------------------------------------------------------------
CROSS_ENTROPY_OPTIONS = [
    {},
    {"label_smoothing": 0.1},
    {"reduction": "sum"},
    {"reduction": "none"},
    {"weight": True},
    {"weight": True, "label_smoothing": 0.2},
    {"ignore_index": 3},
    {"weight": True, "ignore_index": 1, "reduction": "sum", "label_smoothing": 0.05},
]


def _with_weight(options: dict, make_tensor) -> dict:
    """``options`` with ``"weight": True`` replaced by the class weights as ``make_tensor``
    gives them (a kernelgrad tensor, a torch tensor or the NumPy array itself)."""
    kwargs = dict(options)
    if kwargs.get("weight") is True:
        kwargs["weight"] = make_tensor(CLASS_WEIGHT)
    return kwargs


CLASS_WEIGHT = RNG.random(5).astype(np.float32)


@pytest.mark.parametrize("options", CROSS_ENTROPY_OPTIONS)
def test_cross_entropy_matches_references(options, device, reference):
    target = np.array([0, 4, 2, options.get("ignore_index", -100), 1, 3])
    compare(
        reference,
        lambda x: F.cross_entropy(
            x,
            kg.tensor(target, device=device),
            **_with_weight(options, lambda w: kg.tensor(w, device=device)),
        ),
        lambda x: ref.cross_entropy(
            x, target, **_with_weight(options, lambda w: w.astype(np.float64))
        ),
        lambda torch, x: torch.nn.functional.cross_entropy(
            x, torch.tensor(target), **_with_weight(options, torch.tensor)
        ),
        [randn(6, 5) * 2],
        device,
    )


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_with_spatial_and_probability_targets(reduction, device, reference):
    target = RNG.integers(0, 4, (2, 3, 2))
    compare(
        reference,
        lambda x: F.cross_entropy(x, kg.tensor(target, device=device), reduction=reduction),
        lambda x: ref.cross_entropy(x, target, reduction=reduction),
        lambda torch, x: torch.nn.functional.cross_entropy(
            x, torch.tensor(target), reduction=reduction
        ),
        [randn(2, 4, 3, 2)],
        device,
    )
    probabilities = RNG.dirichlet(np.ones(4), size=3).astype(np.float32)
    compare(
        reference,
        lambda x: F.cross_entropy(
            x, kg.tensor(probabilities, device=device), reduction=reduction, label_smoothing=0.1
        ),
        lambda x: ref.cross_entropy(
            x, probabilities.astype(np.float64), reduction=reduction, label_smoothing=0.1
        ),
        lambda torch, x: torch.nn.functional.cross_entropy(
            x, torch.tensor(probabilities), reduction=reduction, label_smoothing=0.1
        ),
        [randn(3, 4)],
        device,
    )
    compare(  # unbatched
        reference,
        lambda x: F.cross_entropy(x, kg.tensor(2, device=device)),
        lambda x: ref.cross_entropy(x, np.array(2)),
        lambda torch, x: torch.nn.functional.cross_entropy(x, torch.tensor(2)),
        [randn(4)],
        device,
    )


def test_cross_entropy_is_stable_for_huge_logits_and_matches_numpy(device):
    logits = np.array([[1000.0, 0.0, -1000.0], [0.5, 0.25, 0.0]], dtype=np.float32)
    target = np.array([1, 0])
    x64 = logits.astype(np.float64)
    peak = x64.max(axis=1, keepdims=True)
    log_probs = x64 - peak - np.log(np.exp(x64 - peak).sum(axis=1, keepdims=True))
    expected = -log_probs[np.arange(2), target].mean()
    x = kg.tensor(logits, device=device, requires_grad=True)
    loss = F.cross_entropy(x, kg.tensor(target, device=device))
    assert np.isfinite(loss.item())
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-5)
    loss.backward()
    probs = np.exp(log_probs)
    probs[np.arange(2), target] -= 1
    assert_close(x.grad, probs / 2, atol=1e-6)


def test_cross_entropy_gradients_by_central_differences(device):
    target = kg.tensor([2, 0, 1], device=device)
    check_grad(
        lambda x: F.cross_entropy(x, target, label_smoothing=0.1, reduction="none"),
        randn(3, 4, dtype=np.float64),
        device=device,
    )


def test_cross_entropy_second_derivative(device):
    # The hand-written VJP stays differentiable: d/dx of sum(dL/dx ** 2).
    x = kg.tensor(randn(2, 3, dtype=np.float64), device=device, requires_grad=True)
    target = kg.tensor([0, 2], device=device)
    loss = F.cross_entropy(x, target)
    loss.backward(create_graph=True)
    first = x.grad
    x.grad = None
    (first * first).sum().backward()

    def reference(values):
        logits = kg.tensor(values, device=device, requires_grad=True)
        loss = -(logits.log_softmax(1) * F.one_hot(target, 3).double()).sum() / 2
        loss.backward(create_graph=True)
        return logits, logits.grad

    logits, grad = reference(as_numpy(x))
    logits.grad = None
    (grad * grad).sum().backward()
    assert_close(x.grad, as_numpy(logits.grad), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("options", CROSS_ENTROPY_OPTIONS)
def test_cross_entropy_fused_and_differentiable_gradients_agree(options, device):
    # backward() runs the fused gradient kernel; backward(create_graph=True) the
    # differentiable tensor-op formula. Both must give the same gradient.
    target = kg.tensor([0, 4, 2, options.get("ignore_index", -100), 1, 3], device=device)
    kwargs = dict(options)
    if kwargs.get("weight"):
        kwargs["weight"] = kg.tensor(RNG.random(5), device=device)
    values = randn(6, 5, dtype=np.float64) * 3
    upstream = RNG.random(6 if options.get("reduction") == "none" else ())
    grads = []
    for create_graph in (False, True):
        x = kg.tensor(values, device=device, requires_grad=True)
        loss = F.cross_entropy(x, target, **kwargs)
        loss.backward(kg.tensor(upstream, device=device), create_graph=create_graph)
        grads.append(as_numpy(x.grad))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)


def test_cross_entropy_errors(device):
    x = kg.zeros(2, 3, device=device)
    with pytest.raises(IndexError, match="3 classes"):
        F.cross_entropy(x, kg.tensor([0, 3], device=device)).item()  # CUDA: at the read
    with pytest.raises(ShapeError, match="target must have shape"):
        F.cross_entropy(x, kg.tensor([0, 1, 2], device=device))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, kg.tensor([0, 1], device=device), reduction="avg")


@pytest.mark.parametrize(
    "options",
    [{}, {"reduction": "sum"}, {"reduction": "none"}, {"ignore_index": 0}, {"weight": True}],
)
def test_nll_loss_matches_references(options, device, reference):
    target = np.array([1, 0, 3, 4])
    compare(
        reference,
        lambda x: F.nll_loss(
            x,
            kg.tensor(target, device=device),
            **_with_weight(options, lambda w: kg.tensor(w, device=device)),
        ),
        lambda x: ref.nll_loss(x, target, **_with_weight(options, lambda w: w.astype(np.float64))),
        lambda torch, x: torch.nn.functional.nll_loss(
            x, torch.tensor(target), **_with_weight(options, torch.tensor)
        ),
        [randn(4, 5)],
        device,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss"])
def test_regression_losses_match_references(loss, reduction, device, reference):
    compare(
        reference,
        lambda x, y: getattr(F, loss)(x, y, reduction=reduction),
        lambda x, y: getattr(ref, loss)(x, y, reduction=reduction),
        lambda torch, x, y: getattr(torch.nn.functional, loss)(x, y, reduction=reduction),
        [randn(3, 4), randn(3, 4)],
        device,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "loss, options",
    [
        ("binary_cross_entropy", ("target", "weight")),
        ("binary_cross_entropy_with_logits", ("target", "pos_weight")),
    ],
)
def test_binary_losses_match_references(loss, options, reduction, device, reference):
    """The same function name in F, the reference and PyTorch; probabilities in (0, 1)
    for the first, logits up to +-100 for the second."""
    values = {
        "target": RNG.random((3, 4)).astype(np.float32),
        "weight": RNG.random((3, 4)).astype(np.float32),
        "pos_weight": RNG.random(4).astype(np.float32) + 0.5,
    }
    if loss == "binary_cross_entropy":
        inputs = RNG.uniform(0.05, 0.95, (3, 4)).astype(np.float32)
    else:
        inputs = randn(3, 4) * 30

    def keywords(make_tensor):
        return {name: make_tensor(values[name]) for name in options}

    compare(
        reference,
        lambda x: getattr(F, loss)(
            x, reduction=reduction, **keywords(lambda v: kg.tensor(v, device=device))
        ),
        lambda x: getattr(ref, loss)(
            x, reduction=reduction, **keywords(lambda v: v.astype(np.float64))
        ),
        lambda torch, x: getattr(torch.nn.functional, loss)(
            x, reduction=reduction, **keywords(torch.tensor)
        ),
        [inputs],
        device,
    )


def test_binary_cross_entropy_with_logits_is_stable(device):
    x = kg.tensor([1000.0, -1000.0], device=device)
    loss = F.binary_cross_entropy_with_logits(
        x, kg.tensor([0.0, 1.0], device=device), reduction="none"
    )
    assert as_numpy(loss).tolist() == [1000.0, 1000.0]


def test_mse_loss_warns_about_broadcasting(device):
    with pytest.warns(UserWarning, match="broadcast"):
        F.mse_loss(kg.zeros(3, 1, device=device), kg.zeros(3, device=device))
