"""kg.profiler (torch.profiler): a profiled training step counts what
kg.compile.count_launches counts, names the operations, and exports a Chrome trace."""

from __future__ import annotations

import json

import pytest

import kernelgrad as kg


def _step(model, optimizer, x, y):
    with kg.profiler.record_function("forward"):
        loss = kg.nn.functional.mse_loss(model(x), y)
    with kg.profiler.record_function("backward"):
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def _setup(device):
    kg.manual_seed(0)
    model = kg.nn.Sequential(kg.nn.Linear(3, 4), kg.nn.ReLU(), kg.nn.Linear(4, 1)).to(device)
    optimizer = kg.optim.SGD(model.parameters(), lr=0.1)
    return model, optimizer, kg.randn(5, 3, device=device), kg.randn(5, 1, device=device)


def test_a_training_step_is_profiled_with_the_launch_count_of_count_launches(device, tmp_path):
    model, optimizer, x, y = _setup(device)
    _step(model, optimizer, x, y)  # first call compiles kernels
    with kg.compile.count_launches() as counter:
        _step(model, optimizer, x, y)
    with kg.profiler.profile(
        activities=[kg.profiler.ProfilerActivity.CPU, kg.profiler.ProfilerActivity.CUDA]
    ) as prof:
        _step(model, optimizer, x, y)
    rows = {row.key: row for row in prof.key_averages()}
    launches = [row for row in rows.values() if row.kind == "launch"]
    assert sum(row.count for row in launches) == counter.count > 5
    assert sorted(counter.names) == sorted(e.name for e in prof.events() if e.kind == "launch")
    assert "matmul" in rows and rows["matmul"].count >= 2
    assert rows["forward"].count == 1 and rows["backward"].kind == "range"
    assert all(row.cpu_time_total > 0 for row in launches)
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=3)
    assert table.splitlines()[0].split()[:3] == ["Name", "Kind", "Calls"]
    assert len(table.splitlines()) == 3 + 4 and f"Kernel launches: {counter.count}" in table
    assert "matmul" in prof.key_averages().table(sort_by="count")
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="flops")

    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    ranges = [e for e in trace if e["cat"] == "user_annotation"]
    assert sorted(e["name"] for e in ranges) == ["backward", "forward"]
    assert all(e["ph"] == "X" and e["dur"] > 0 for e in ranges)
    kernels = [e for e in trace if e["cat"] == "kernel"]
    assert len(kernels) == counter.count
    forward = next(e for e in ranges if e["name"] == "forward")
    inside = [e for e in kernels if forward["ts"] <= e["ts"] <= forward["ts"] + forward["dur"]]
    # (the Linear's product: with its bias where the backend adds it in the product)
    assert any(e["name"] in ("matmul", "matmul_bias") for e in inside)


def test_user_kernels_and_replays_are_counted_like_count_launches():
    @kg.kernel
    def double(x, out):
        i = kg.index()
        out[i] = x[i] * 2

    x, out = kg.ones(4), kg.zeros(4)
    double(x, out, ndrange=4)
    with kg.compile.count_launches() as counter:
        double(x, out, ndrange=4)
    with kg.profiler.profile() as prof:
        double(x, out, ndrange=4)
    rows = {row.key: row for row in prof.key_averages()}
    assert [n for n in counter.names if n.startswith("kernel")] == ["kernel double"]
    assert rows["kernel double"].count == 1 and rows["kernel double"].timed_count == 0


def test_schedule_records_the_active_steps_and_hands_them_over():
    handed = []
    x = kg.ones(3)
    sched = kg.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    with kg.profiler.profile(
        schedule=sched, on_trace_ready=lambda p: handed.append(len(p.events()))
    ) as prof:
        for step in range(6):
            with kg.profiler.record_function(f"step{step}"):
                x = x * 2
            prof.step()
    assert handed == [4]  # steps 2 and 3: one range and one launch each
    assert [e.name for e in prof.events() if e.kind == "range"] == ["step2", "step3"]
    with pytest.warns(UserWarning, match="warmup"):
        kg.profiler.schedule(wait=0, warmup=0, active=1)


@pytest.mark.torch
def test_schedule_matches_pytorchs():
    import torch

    for options in ({"wait": 1, "warmup": 1, "active": 2, "repeat": 2}, {
        "wait": 2, "warmup": 1, "active": 1, "skip_first": 3, "skip_first_wait": 1,
    }):  # fmt: skip
        ours, theirs = kg.profiler.schedule(**options), torch.profiler.schedule(**options)
        assert [ours(s).name for s in range(16)] == [theirs(s).name for s in range(16)]


def test_autograd_profiler_aliases():
    from kernelgrad.torch_alias import aliased

    with aliased():
        import torch

        with (
            torch.autograd.profiler.profile() as prof,
            torch.autograd.profiler.record_function("r"),
        ):
            torch.ones(2) + 1
        with torch.autograd.profiler.profile(enabled=False) as off:
            torch.ones(2) + 1
    assert {row.key for row in prof.key_averages()} >= {"r", "add"}
    assert off.events() == [] and "Kernel launches: 0" in off.table()
