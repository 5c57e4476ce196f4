"""Parallel forms compiled in a worker process while their serial twins run
(``backends/cpu/compile_ahead.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kernelgrad.backends.cpu import compile_ahead
from kernelgrad.codecache import load_module

from ..helpers import ROOT

# A convolution's forward and backward (@kg.kernel, fastmath) and a large elementwise
# op, each run once before the worker has compiled its parallel form and once after.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import kernelgrad as kg
    import kernelgrad.nn.functional as F
    from kernelgrad.backends.cpu import compile_ahead

    rng = np.random.default_rng(0)
    x = kg.tensor(rng.standard_normal((8, 3, 12, 12), dtype=np.float32), requires_grad=True)
    w = kg.tensor(rng.standard_normal((4, 3, 5, 5), dtype=np.float32), requires_grad=True)
    a = kg.tensor(rng.standard_normal((600, 400), dtype=np.float32))

    def run():
        x.grad = None
        w.grad = None
        y = F.conv2d(x, w, padding=2)
        (y * y).sum().backward()
        z = a * 2.0 + a.T.contiguous().T  # a flat kernel over 240,000 elements
        return [t.numpy().copy() for t in (y, x.grad, w.grad, z)]

    def twins():
        found = {}
        for name, module in list(sys.modules.items()):
            for attribute in ("kernel", "flat"):
                form = getattr(module, attribute, None)
                if isinstance(form, compile_ahead.ParallelTwin) and form.job is not None:
                    found[f"{name}.{attribute}"] = form
        return found

    first = run()
    handed = twins()
    before = {name: twin.ready for name, twin in handed.items()}
    compile_ahead.wait_for_workers(600)
    second = run()
    third = run()
    print(json.dumps({
        "handed": sorted(handed),
        "ready_before": before,
        "ready_after": {name: twin.ready for name, twin in handed.items()},
        "loaded": {name: sum(twin.parallel.stats.cache_hits.values())
                   for name, twin in handed.items()},
        "same": [bool(np.array_equal(p, q)) for p, q in zip(first, second)]
                + [bool(np.array_equal(p, q)) for p, q in zip(first, third)],
    }))
    """
)


def test_serial_twins_run_until_the_worker_compiled_the_parallel_forms(tmp_path):
    env = dict(os.environ, KERNELGRAD_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["KG_COMPILE_WORKERS"] = "1"
    script = tmp_path / "conv.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    handed = result["handed"]
    # the three convolution kernels and the flat add were handed to the worker
    assert sum("conv_" in name for name in handed) == 3, handed
    assert any(name.endswith(".flat") for name in handed), handed
    assert not any(result["ready_before"].values())  # the serial forms ran first
    assert all(result["ready_after"].values())
    # the parallel forms came from the disk cache the worker wrote, not from a compile
    assert all(hits >= 1 for hits in result["loaded"].values()), result["loaded"]
    # and they compute exactly what the serial forms computed
    assert all(result["same"]), result["same"]


SOURCE = textwrap.dedent(
    """
    from numba import njit, prange

    @njit(parallel=True, cache=True)
    def kernel(out, x):
        for i in prange(x.shape[0]):
            out[i] = x[i] + 1.0

    @njit(cache=True)
    def kernel_serial(out, x):
        for i in range(x.shape[0]):
            out[i] = x[i] + 1.0
    """
)


def test_no_workers_leaves_the_module_as_it_was(monkeypatch):
    monkeypatch.setenv("KG_COMPILE_WORKERS", "0")
    module = load_module(SOURCE + "# no workers\n", "test_compile_ahead")
    compile_ahead.install_twins(module)
    assert not isinstance(module.kernel, compile_ahead.ParallelTwin)


def test_a_twin_switches_to_the_parallel_form(monkeypatch):
    monkeypatch.setenv("KG_COMPILE_WORKERS", "1")
    module = compile_ahead.install_twins(load_module(SOURCE, "test_compile_ahead"))
    twin = module.kernel
    assert isinstance(twin, compile_ahead.ParallelTwin)
    x = np.arange(5, dtype=np.float64)
    out = np.zeros_like(x)
    twin(out, x)
    np.testing.assert_array_equal(out, x + 1.0)
    if twin.job is not None:  # not compiled by an earlier run of the suite
        assert twin.wait(600)
    twin(out, x)  # notices the worker finished
    assert twin.ready
    out[:] = 0
    twin(out, x)
    np.testing.assert_array_equal(out, x + 1.0)
    assert twin.signatures  # the parallel form's, now that it runs


def test_a_failed_worker_compile_is_reported_and_the_caller_compiles():
    module = load_module(SOURCE + "# failing\n", "test_compile_ahead")
    job = compile_ahead._pool().submit(module, "no_such_function", ())
    with pytest.raises(RuntimeError, match="AttributeError"):
        job.result(timeout=600)
    # a twin whose job failed falls back to compiling the parallel form itself
    twin = compile_ahead.ParallelTwin(module, "kernel", "kernel_serial")
    twin.job = job
    x = np.ones(3)
    out = np.zeros(3)
    twin(out, x)
    assert twin.ready
    np.testing.assert_array_equal(out, 2.0)


def test_a_dead_worker_fails_its_jobs_with_a_message():
    worker = compile_ahead._Worker()
    worker.stop()
    worker.process.wait(timeout=60)
    with pytest.raises(RuntimeError, match="the compile worker process ended"):
        worker.compile(("m", "/nonexistent.py", "f", ()))


# --- serial forms compiled ahead (prefetch) ---------------------------------------------------
PREFETCH_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import kernelgrad as kg
    import kernelgrad.nn.functional as F
    from kernelgrad.backends.cpu import compile_ahead

    rng = np.random.default_rng(1)
    x = kg.tensor(rng.standard_normal((4, 3, 12, 12), dtype=np.float32), requires_grad=True)
    w = kg.tensor(rng.standard_normal((4, 3, 5, 5), dtype=np.float32), requires_grad=True)
    fc = kg.tensor(rng.standard_normal((64, 5), dtype=np.float32), requires_grad=True)
    labels = kg.tensor(rng.integers(0, 5, 4))
    optimizer = kg.optim.Adam([w, fc], lr=0.01)  # asks for its update kernel ahead

    loss = F.cross_entropy(F.max_pool2d_relu(F.conv2d(x, w), 2).flatten(1) @ fc, labels)
    compile_ahead.wait_for_workers(600)  # every form asked for ahead is compiled now
    loss.backward()
    grads = [t.grad.numpy().ravel().tolist() for t in (x, w, fc)]
    optimizer.step()

    forms = {}
    for name, module in list(sys.modules.items()):
        for attribute in ("kernel_serial", "rows_serial", "strided_serial", "foreach"):
            form = getattr(module, attribute, None)
            if isinstance(form, compile_ahead.WorkerCompiled):
                forms[f"{name}.{attribute}"] = [
                    form.job is None, sum(form.dispatcher.stats.cache_hits.values()),
                    sum(form.dispatcher.stats.cache_misses.values()),
                ]
    for program in (kg.nn._conv_kernels.conv_weight_grad_direct,
                    kg.nn._conv_kernels.conv_input_grad_direct):
        for form in program._forms.values():
            for parallel, serial in form.launchers.values():
                if isinstance(serial, compile_ahead.WorkerCompiled):
                    forms[f"{program.info.name}.kernel_serial"] = [
                        serial.job is None, sum(serial.dispatcher.stats.cache_hits.values()),
                        sum(serial.dispatcher.stats.cache_misses.values()),
                    ]
    stepped = [t.numpy().ravel().tolist() for t in (w, fc)]
    print(json.dumps({"forms": forms, "grads": grads, "stepped": stepped}))
    """
)


def _run_prefetch_script(tmp_path, workers: str) -> dict:
    cache = tmp_path / f"cache-{workers}"
    env = dict(os.environ, KERNELGRAD_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["KG_COMPILE_WORKERS"] = workers
    script = tmp_path / "prefetch.py"
    script.write_text(PREFETCH_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_forward_pass_has_its_gradient_kernels_compiled_ahead(tmp_path):
    """With an empty cache, the convolution's and the max-pool's gradient kernels and
    Adam's update are compiled by the worker during the forward pass; the backward pass
    and the step load them from the disk cache (no compile of their own) and give
    PyTorch's gradients and parameters."""
    ahead = _run_prefetch_script(tmp_path, "1")
    forms = ahead["forms"]
    assert any("conv_weight_grad_direct" in name for name in forms), forms
    assert any("conv_input_grad_direct" in name for name in forms), forms
    assert any("max_window_relu_grad" in name for name in forms), forms
    assert any("foreach_adam_update" in name for name in forms), forms
    for name, (waited, hits, misses) in forms.items():
        if "max_window_relu_grad" in name and hits == 0 and misses == 0:
            continue  # a layout this model's backward pass did not use
        assert waited and hits >= 1 and misses == 0, (name, forms)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.standard_normal((4, 3, 12, 12), dtype=np.float32), requires_grad=True)
    w = torch.tensor(rng.standard_normal((4, 3, 5, 5), dtype=np.float32), requires_grad=True)
    fc = torch.tensor(rng.standard_normal((64, 5), dtype=np.float32), requires_grad=True)
    labels = torch.tensor(rng.integers(0, 5, 4))
    pooled = torch.nn.functional.max_pool2d(torch.nn.functional.conv2d(x, w), 2).relu()
    torch.nn.functional.cross_entropy(pooled.flatten(1) @ fc, labels).backward()
    for ours, theirs in zip(ahead["grads"], (x, w, fc)):
        np.testing.assert_allclose(ours, theirs.grad.numpy().ravel(), rtol=1e-4, atol=1e-5)
    torch.optim.Adam([w, fc], lr=0.01).step()
    for ours, theirs in zip(ahead["stepped"], (w, fc)):
        np.testing.assert_allclose(ours, theirs.detach().numpy().ravel(), rtol=1e-5, atol=1e-6)


def test_a_form_asked_for_ahead_loads_the_workers_result(monkeypatch):
    monkeypatch.setenv("KG_COMPILE_WORKERS", "1")
    module = load_module(SOURCE + "# ahead\n", "test_compile_ahead")
    x = np.arange(4, dtype=np.float64)
    out = np.zeros_like(x)
    waiting = compile_ahead.prefetch(module, "kernel_serial", (out, x))
    if waiting is None:  # compiled into this cache by an earlier run of the suite
        assert module.kernel_serial._cache.load_overload(
            (module.kernel_serial.typeof_pyval(out),) * 2, module.kernel_serial.targetctx
        )
        return
    assert isinstance(waiting, compile_ahead.WorkerCompiled)
    assert waiting.job.result(timeout=600) >= 0
    waiting(out, x)
    np.testing.assert_array_equal(out, x + 1.0)
    assert waiting.job is None
    assert sum(waiting.dispatcher.stats.cache_hits.values()) == 1  # loaded, not compiled
    # compiled now: asking again does nothing
    assert compile_ahead.prefetch(module, "kernel_serial", (out, x)) is None


def test_a_request_still_queued_is_withdrawn_and_the_caller_compiles():
    module = load_module(SOURCE + "# queued\n", "test_compile_ahead")
    job: compile_ahead.concurrent.futures.Future = compile_ahead.concurrent.futures.Future()
    waiting = compile_ahead.WorkerCompiled(module.kernel_serial, job, "test.kernel_serial")
    x = np.ones(3)
    out = np.zeros(3)
    waiting(out, x)
    assert job.cancelled()  # a worker taking it from the queue now skips it
    np.testing.assert_array_equal(out, 2.0)
    assert repr(waiting) == "<WorkerCompiled test.kernel_serial>"
    assert waiting.signatures  # attributes are the form's


def test_forms_asked_for_ahead_go_before_parallel_forms_in_the_queue():
    pool = compile_ahead._Pool(1)
    pool.workers.append(object())  # as if started: no worker takes jobs from the queue
    module = load_module(SOURCE + "# order\n", "test_compile_ahead")
    later = pool.submit(module, "kernel", (), priority=compile_ahead.LATER)
    first = pool.submit(module, "kernel_serial", (), priority=compile_ahead.URGENT)
    second = pool.submit(module, "kernel_serial", (1,), priority=compile_ahead.URGENT)
    order = [pool.jobs.get()[2][0] for _ in range(3)]
    assert order == [first, second, later]


def test_a_repeated_forward_pass_asks_for_nothing_again(monkeypatch):
    """Asking ahead is for the first pass: later passes of the same layers neither ask
    the backend again nor look in the disk cache (each disk lookup loads the code)."""
    import kernelgrad as kg
    import kernelgrad.nn._fused as fused
    import kernelgrad.nn.functional as F

    monkeypatch.setenv("KG_COMPILE_WORKERS", "1")
    monkeypatch.setattr(fused, "_ASKED", set())  # forget earlier tests' requests
    requests, lookups = [], []
    ask, look = compile_ahead.prefetch, compile_ahead._on_disk
    monkeypatch.setattr(compile_ahead, "prefetch", lambda *a: requests.append(a) or ask(*a))
    monkeypatch.setattr(compile_ahead, "_on_disk", lambda *a: lookups.append(a) or look(*a))
    rng = np.random.default_rng(2)
    x = kg.tensor(rng.standard_normal((2, 3, 8, 8), dtype=np.float32))
    w = kg.tensor(rng.standard_normal((4, 3, 3, 3), dtype=np.float32), requires_grad=True)
    labels = kg.tensor([1, 0])

    def step():
        pooled = F.max_pool2d_relu(F.conv2d(x, w), 2)
        F.cross_entropy(pooled.flatten(1)[:, :5], labels).backward()

    step()
    assert requests  # the first pass asked (for what is not compiled yet)
    compile_ahead.wait_for_workers(600)
    asked, looked = len(requests), len(lookups)
    step()
    step()
    assert (len(requests), len(lookups)) == (asked, looked)
