"""PyTorch's loss signatures and its deprecated ``size_average`` / ``reduce`` arguments.

* Every loss class of ``torch.nn`` (the names ending in ``Loss``, and ``NLLLoss2d``) and
  every loss function of ``torch.nn.functional`` has kernelgrad's counterpart with the
  same parameters, in the same order, of the same kinds, with the same plain defaults:
  programs written for PyTorch pass arguments positionally (``nn.NLLLoss(w, None, 1)``),
  and a parameter out of place would put a value in the wrong one without an error.
* ``size_average`` / ``reduce`` decide the reduction as in PyTorch (with its warning):
  values and gradients against PyTorch for a set of representative losses, called with
  keywords and positionally.
* ``mse_loss`` / ``l1_loss`` / ``huber_loss`` take PyTorch 2.13's elementwise ``weight``.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import ShapeError
from tests.helpers import as_numpy
from tests.nn import reference as ref
from tests.nn.reference import compare

RNG = np.random.default_rng(1414)

# Deliberate differences from PyTorch's signatures, as {"name": "why"} ("nll_loss",
# "NLLLoss" for __init__, "NLLLoss.forward"); the test fails if an entry is no longer
# needed. (None today: every loss matches.)
ALLOWED_SIGNATURE_DIFFERENCES: dict[str, str] = {}

# torch.nn.functional's loss functions that do not end in "_loss"
_OTHER_LOSS_FUNCTIONS = (
    "cross_entropy",
    "kl_div",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "linear_cross_entropy",
)


def _plain(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _describe(function: object) -> list[tuple[str, str, object]]:
    """(name, kind, default) of each parameter; a default that is not a plain value is
    compared only for being there."""
    described = []
    for parameter in inspect.signature(function).parameters.values():
        default = parameter.default
        if default is inspect.Parameter.empty:
            default = "<required>"
        elif not _plain(default):
            default = "<a default>"
        described.append((parameter.name, parameter.kind.name, default))
    return described


def _signature_mismatches(pairs: dict[str, tuple[object, object]]) -> dict[str, str]:
    mismatches = {}
    for name, (theirs, mine) in pairs.items():
        expected, got = _describe(theirs), _describe(mine)
        if expected != got:
            mismatches[name] = f"PyTorch {expected}\n    kernelgrad {got}"
    return mismatches


def _check(pairs: dict[str, tuple[object, object]]) -> None:
    mismatches = _signature_mismatches(pairs)
    unexpected = {n: m for n, m in mismatches.items() if n not in ALLOWED_SIGNATURE_DIFFERENCES}
    assert not unexpected, "signatures differ from PyTorch's:\n" + "\n".join(
        f"  {name}: {message}" for name, message in unexpected.items()
    )
    stale = [n for n in ALLOWED_SIGNATURE_DIFFERENCES if n in pairs and n not in mismatches]
    assert not stale, f"{stale} now match PyTorch: take them out of the allow-list"


@pytest.mark.torch
def test_loss_modules_take_pytorchs_arguments_in_its_order():
    import torch

    names = [n for n in dir(torch.nn) if n.endswith("Loss") and not n.startswith("_")]
    names.append("NLLLoss2d")
    assert {"CrossEntropyLoss", "NLLLoss", "KLDivLoss", "CTCLoss"} <= set(names)
    missing = [n for n in names if not hasattr(kg.nn, n)]
    assert not missing, f"kernelgrad lacks the loss modules {missing}"
    pairs = {}
    for name in names:
        theirs, mine = getattr(torch.nn, name), getattr(kg.nn, name)
        pairs[name] = (theirs.__init__, mine.__init__)
        pairs[f"{name}.forward"] = (theirs.forward, mine.forward)
    _check(pairs)


@pytest.mark.torch
def test_loss_functions_take_pytorchs_arguments_in_its_order():
    import torch.nn.functional as torch_F

    names = [
        n
        for n in dir(torch_F)
        if (n.endswith("_loss") or n in _OTHER_LOSS_FUNCTIONS) and not n.startswith("_")
    ]
    assert {"nll_loss", "mse_loss", "kl_div", "ctc_loss"} <= set(names)
    missing = [n for n in names if not hasattr(kg.nn.functional, n)]
    assert not missing, f"kernelgrad lacks the loss functions {missing}"
    _check({n: (getattr(torch_F, n), getattr(kg.nn.functional, n)) for n in names})


def test_the_signature_check_notices_a_parameter_out_of_place():
    def theirs(x, target, weight=None, size_average=None, ignore_index=-100):
        pass

    def mine(x, target, weight=None, ignore_index=-100, size_average=None):
        pass

    def other_default(x, target, weight=None, size_average=None, ignore_index=-1):
        pass

    assert _signature_mismatches({"f": (theirs, theirs)}) == {}
    assert "f" in _signature_mismatches({"f": (theirs, mine)})
    assert "f" in _signature_mismatches({"f": (theirs, other_default)})


# --- size_average / reduce: values and gradients against PyTorch ----------------------------
# Each case is (call(lib, legacy, *tensors), arrays, constants): `lib` is kernelgrad or
# torch (the same API), `legacy` the deprecated arguments as a dict of keywords, `tensors`
# the arrays (which get gradients) and then the constants, made by lib.tensor.

LOGITS = RNG.standard_normal((4, 3))
CLASSES = np.array([0, 1, 2, 1])
CLASS_WEIGHT = np.array([0.5, 1.0, 2.0])
X = RNG.standard_normal((2, 3))
Y = RNG.standard_normal((2, 3))
SIGNS = np.array([1.0, -1.0])


def _log_softmax(x):
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


CASES = {
    "F.kl_div": (
        lambda lib, legacy, x, t: lib.nn.functional.kl_div(x, t, **legacy),
        [_log_softmax(X)],
        [np.exp(_log_softmax(Y))],
    ),
    "F.cross_entropy": (
        lambda lib, legacy, x, t, w: lib.nn.functional.cross_entropy(
            x, t, w, ignore_index=2, **legacy
        ),
        [LOGITS],
        [CLASSES, CLASS_WEIGHT],
    ),
    "nn.NLLLoss": (
        lambda lib, legacy, x, t, w: lib.nn.NLLLoss(w, ignore_index=1, **legacy)(x, t),
        [_log_softmax(LOGITS)],
        [CLASSES, CLASS_WEIGHT],
    ),
    "F.mse_loss": (
        lambda lib, legacy, x, y: lib.nn.functional.mse_loss(x, y, **legacy),
        [X, Y],
        [],
    ),
    "nn.BCEWithLogitsLoss": (
        lambda lib, legacy, x, t: lib.nn.BCEWithLogitsLoss(**legacy)(x, t),
        [X],
        [(Y > 0).astype(np.float64)],
    ),
    "nn.SmoothL1Loss": (
        lambda lib, legacy, x, y: lib.nn.SmoothL1Loss(**legacy, beta=0.5)(x, y),
        [X, Y],
        [],
    ),
    "F.margin_ranking_loss": (
        lambda lib, legacy, a, b, t: lib.nn.functional.margin_ranking_loss(a, b, t, 0.2, **legacy),
        [X[:, 0], Y[:, 0]],
        [SIGNS],
    ),
    "nn.MultiMarginLoss": (
        lambda lib, legacy, x, t: lib.nn.MultiMarginLoss(**legacy)(x, t),
        [LOGITS],
        [CLASSES],
    ),
    "nn.PoissonNLLLoss": (
        lambda lib, legacy, x, y: lib.nn.PoissonNLLLoss(**legacy)(x, y),
        [X],
        [np.abs(Y)],
    ),
}
LEGACY = {
    "size_average=False": {"size_average": False},
    "reduce=False": {"reduce": False},
    "both None": {"size_average": None, "reduce": None},
}


def _constants(lib, arrays):
    return [lib.tensor(a) for a in arrays]


@pytest.mark.torch
@pytest.mark.parametrize("legacy", LEGACY, ids=list(LEGACY))
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_size_average_and_reduce_act_as_in_pytorch(case, legacy):
    call, arrays, constants = CASES[case]
    arguments = LEGACY[legacy]
    given = any(v is not None for v in arguments.values())
    mine_constants = _constants(kg, constants)

    def kg_fn(*tensors):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = call(kg, arguments, *tensors, *mine_constants)
        messages = [str(w.message) for w in caught if "size_average and reduce" in str(w.message)]
        assert bool(messages) == given, f"deprecation warnings: {messages}"
        return out

    def torch_fn(torch, *tensors):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return call(torch, arguments, *tensors, *_constants(torch, constants))

    compare("torch", kg_fn, None, torch_fn, arrays, "cpu", rtol=1e-6, atol=1e-9)


# PyTorch programs that pass the deprecated arguments positionally: each call is written
# out as PyTorch's order reads it.
POSITIONAL = {
    # weight, size_average, ignore_index=1
    "NLLLoss(w, None, 1)": (
        lambda lib, x, t, w: lib.nn.NLLLoss(w, None, 1)(x, t),
        lambda lib, x, t, w: lib.nn.NLLLoss(w, ignore_index=1)(x, t),
        _log_softmax(LOGITS),
    ),
    # weight, size_average, ignore_index, reduce=False
    "CrossEntropyLoss(None, None, -100, False)": (
        lambda lib, x, t, w: lib.nn.CrossEntropyLoss(None, None, -100, False)(x, t),
        lambda lib, x, t, w: lib.nn.CrossEntropyLoss(reduction="none")(x, t),
        LOGITS,
    ),
    # weight, size_average=False, ignore_index=2, reduce, reduction, label_smoothing
    "F.cross_entropy(x, t, w, False, 2, None, 'mean', 0.1)": (
        lambda lib, x, t, w: lib.nn.functional.cross_entropy(x, t, w, False, 2, None, "mean", 0.1),
        lambda lib, x, t, w: lib.nn.functional.cross_entropy(
            x, t, w, ignore_index=2, reduction="sum", label_smoothing=0.1
        ),
        LOGITS,
    ),
    # weight, size_average, ignore_index=0, reduce=False
    "F.nll_loss(x, t, w, None, 0, False)": (
        lambda lib, x, t, w: lib.nn.functional.nll_loss(x, t, w, None, 0, False),
        lambda lib, x, t, w: lib.nn.functional.nll_loss(x, t, w, ignore_index=0, reduction="none"),
        _log_softmax(LOGITS),
    ),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", POSITIONAL, ids=list(POSITIONAL))
def test_positional_legacy_arguments_land_where_pytorch_puts_them(case):
    positional, keywords, logits = POSITIONAL[case]

    def kg_fn(x):
        with (
            pytest.warns(UserWarning, match="size_average and reduce")
            if "False" in case
            else (warnings.catch_warnings())
        ):
            out = positional(kg, x, *_constants(kg, [CLASSES, CLASS_WEIGHT]))
        # the keyword spelling gives the same value (so the positional call is not merely
        # matching PyTorch's reading by accident of the data)
        expected = keywords(kg, x.detach(), *_constants(kg, [CLASSES, CLASS_WEIGHT]))
        np.testing.assert_allclose(as_numpy(out.detach()), as_numpy(expected), rtol=1e-12)
        return out

    def torch_fn(torch, x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return positional(torch, x, *_constants(torch, [CLASSES, CLASS_WEIGHT]))

    compare("torch", kg_fn, None, torch_fn, [logits], "cpu", rtol=1e-6, atol=1e-9)


def test_positional_reduce_false_on_every_backend(device, simulated):
    """nn.CrossEntropyLoss(None, None, -100, False): no reduction, against NumPy (the one
    case that runs under the simulator: two samples of three classes)."""
    logits, classes = LOGITS[:2], CLASSES[:2]
    with pytest.warns(UserWarning, match="reduction='none'"):
        loss = kg.nn.CrossEntropyLoss(None, None, -100, False)
    assert loss.reduction == "none"
    compare(
        "numpy",
        lambda x: loss(x, kg.tensor(classes, device=device)),
        lambda x: ref.cross_entropy(x, classes, reduction="none"),
        None,
        [logits],
        device,
        rtol=1e-6,
        atol=1e-8,
    )


def test_kl_div_legacy_mean_does_not_warn_about_batchmean():
    """PyTorch warns about 'mean' only when it is asked for by name."""
    x, t = kg.tensor(_log_softmax(X)), kg.tensor(np.exp(_log_softmax(Y)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kg.nn.functional.kl_div(x, t, reduce=True)
    assert [str(w.message) for w in caught] == [
        "size_average and reduce args will be deprecated, please use reduction='mean' instead."
    ]
    with pytest.warns(UserWarning, match="batchmean"):
        kg.nn.functional.kl_div(x, t, reduction="mean")


# --- the elementwise weight of mse_loss, l1_loss and huber_loss (PyTorch 2.13) ---------------
WEIGHTED = ("mse_loss", "l1_loss", "huber_loss")


@pytest.mark.torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", WEIGHTED)
def test_elementwise_weight_matches_pytorch(name, reduction):
    weight = RNG.random((2, 3)) + 0.25

    def call(lib, x, y, w):
        return getattr(lib.nn.functional, name)(x, y, reduction=reduction, weight=w)

    compare(
        "torch",
        lambda x, y, w: call(kg, x, y, w),
        None,
        lambda torch, x, y, w: call(torch, x, y, w),
        [X * 2, Y, weight],
        "cpu",
        rtol=1e-6,
        atol=1e-9,
    )


@pytest.mark.parametrize("name", WEIGHTED)
def test_elementwise_weight_must_have_the_inputs_shape(name):
    function = getattr(kg.nn.functional, name)
    with pytest.raises(ShapeError, match=r"weight must have the input's shape \(2, 3\)"):
        function(kg.tensor(X), kg.tensor(Y), weight=kg.ones(3))
