"""Host time of advanced-index assignment on the CPU (eager, after warm-up), beside
PyTorch's where it is installed.

    python benchmarks/bench_setitem.py [--number 2000] [--repeat 5]

Cases: ``t[mask] = 0.0`` over 1000 elements (about half selected), ``t[mask] = values``
(a tensor of the selected count), ``t[rows] = values`` writing 100 rows of a (1000, 16)
tensor, and ``t.index_put_((rows,), values, accumulate=True)`` for the same rows.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np


def _best(fn: Callable[[], object], number: int, repeat: int) -> float:
    fn()
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6


def cases(lib: object) -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(0)
    flat = lib.tensor(rng.standard_normal(1000).astype(np.float32))
    mask = flat > 0
    count = int(mask.sum().item())
    masked_values = lib.tensor(rng.standard_normal(count).astype(np.float32))
    table = lib.tensor(rng.standard_normal((1000, 16)).astype(np.float32))
    rows = lib.tensor(rng.permutation(1000)[:100].astype(np.int64))
    row_values = lib.tensor(rng.standard_normal((100, 16)).astype(np.float32))

    def mask_scalar() -> None:
        flat[mask] = 0.0

    def mask_values() -> None:
        flat[mask] = masked_values

    def row_assign() -> None:
        table[rows] = row_values

    def row_accumulate() -> None:
        table.index_put_((rows,), row_values, accumulate=True)

    found = {
        "t[mask] = 0.0 (1000 elements)": mask_scalar,
        "t[mask] = values (1000 elements)": mask_values,
        "t[rows] = values (100 of 1000 x 16)": row_assign,
    }
    if hasattr(table, "index_put_"):  # older kernelgrad versions lack it
        found["index_put_(accumulate=True) (100 rows)"] = row_accumulate
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import kernelgrad as kg

    ours = {name: _best(fn, args.number, args.repeat) for name, fn in cases(kg).items()}
    try:
        import torch

        torch.set_num_threads(1)
        theirs = {name: _best(fn, args.number, args.repeat) for name, fn in cases(torch).items()}
    except ImportError:
        theirs = {}
    print(f"{'case':42s} {'kernelgrad us':>14s} {'PyTorch us':>11s}")
    for name, other in theirs.items() or ((name, None) for name in ours):
        value = ours.get(name)
        mine = "n/a" if value is None else f"{value:.1f}"
        print(f"{name:42s} {mine:>14s} {'' if other is None else f'{other:11.1f}'}")


if __name__ == "__main__":
    main()
