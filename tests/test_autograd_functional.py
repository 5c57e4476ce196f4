"""``kg.autograd.functional`` (jacobian, hessian, vjp, jvp, hvp, vhp), ``gradcheck`` /
``gradgradcheck``, anomaly detection and the legacy ``Variable``: against PyTorch on the
CPU, by hand on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.autograd import functional as KF
from tests.helpers import as_numpy


def _flat(result):
    if isinstance(result, (tuple, list)):
        return [array for item in result for array in _flat(item)]
    if isinstance(result, kg.Tensor):
        return [as_numpy(result.detach())]
    return [result.detach().numpy()]


def _two_outputs(x, w):
    return (w @ x).tanh() * x[:2], (x * x).sum()


def _scalar(x):
    return (x.exp() * x).sum() + (x[0] * x[1]) ** 2


@pytest.mark.torch
def test_functional_matches_pytorch():
    import torch
    import torch.autograd.functional as TF

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(3), rng.standard_normal((2, 3))
    v2, v3 = rng.standard_normal(2), rng.standard_normal(3)
    cases = {
        "jacobian": lambda af, t: af.jacobian(_two_outputs, (t(a), t(b))),
        "hessian": lambda af, t: af.hessian(_scalar, t(a)),
        "vjp": lambda af, t: af.vjp(_two_outputs, (t(a), t(b)), (t(v2), t(np.array(1.5)))),
        "jvp": lambda af, t: af.jvp(_two_outputs, (t(a), t(b)), (t(v3), t(b * 0.5))),
        "hvp": lambda af, t: af.hvp(_scalar, t(a), t(v3)),
        "vhp": lambda af, t: af.vhp(_scalar, t(a), t(v3)),
    }
    for name, case in cases.items():
        expected = _flat(case(TF, torch.tensor))
        got = _flat(case(KF, lambda x: kg.tensor(x, dtype=kg.float64)))
        assert [g.shape for g in got] == [e.shape for e in expected], name
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8, err_msg=name)


def test_jacobian_and_hessian_by_hand(device):
    x = kg.tensor([1.0, 3.0], device=device)
    np.testing.assert_allclose(as_numpy(KF.jacobian(lambda x: x**2, x)), [[2, 0], [0, 6]])
    h = KF.hessian(lambda x: (x**3).sum(), x)
    np.testing.assert_allclose(as_numpy(h), [[6, 0], [0, 18]])
    unused = KF.jacobian(lambda x, y: x * 2, (x, kg.ones(3, device=device)))
    np.testing.assert_allclose(as_numpy(unused[1]), np.zeros((2, 3)))
    with pytest.raises(RuntimeError, match="independent of input 1"):
        KF.jacobian(lambda x, y: x * 2, (x, kg.ones(3, device=device)), strict=True)


def test_gradcheck_passes_right_gradients_and_catches_wrong_ones():
    x = kg.tensor([0.5, -1.0, 2.0], dtype=kg.float64, requires_grad=True)
    assert kg.autograd.gradcheck(lambda x: (x.sin() * x).sum(), (x,))
    assert kg.autograd.gradgradcheck(lambda x: x.sin() * x, (x,))

    class WrongCube(kg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x * x  # should be 3 x^2

    with pytest.raises(kg.autograd.GradcheckError, match="output 0 with respect to input 0"):
        kg.autograd.gradcheck(WrongCube.apply, (x,))
    assert kg.autograd.gradcheck(WrongCube.apply, (x,), raise_exception=False) is False
    with pytest.warns(UserWarning, match="not a double precision"):
        kg.autograd.gradcheck(
            lambda x: x * 2, (kg.ones(2, requires_grad=True),), eps=1e-2, atol=1e-2
        )


def test_detect_anomaly_names_the_function_that_returned_nan(device):
    y = kg.tensor([0.0, 1.0], requires_grad=True, device=device)
    (y.sqrt() * 0).sum().backward()  # NaN, silently, as in PyTorch without anomaly mode
    assert np.isnan(as_numpy(y.grad)[0])
    with kg.autograd.detect_anomaly():
        assert kg.autograd.is_anomaly_enabled()
        with pytest.raises(RuntimeError, match="'SqrtBackward0' returned nan values in its 0th"):
            (y.sqrt() * 0).sum().backward()
    assert not kg.autograd.is_anomaly_enabled()


def test_variable_is_the_tensor():
    t = kg.ones(2)
    v = kg.autograd.Variable(t, requires_grad=True)
    assert v is t and v.requires_grad
    assert isinstance(kg.zeros(1), kg.autograd.Variable)
    assert not isinstance(np.zeros(1), kg.autograd.Variable)
