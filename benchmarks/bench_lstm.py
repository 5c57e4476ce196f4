"""Training step of a small LSTM language model: kernelgrad vs PyTorch.

The model of pytorch/examples word_language_model: Embedding(vocab, hidden), a 2-layer
LSTM, Linear(hidden, vocab); cross-entropy over every position, SGD (lr 1) after
``clip_grad_norm_(0.25)``. Random token ids of shape (seq, batch). PyTorch runs in a
fresh process of its own with the same thread count (see ``_timing.py``).

    python benchmarks/bench_lstm.py [--seq 35] [--batch 20] [--hidden 200] [--vocab 1000]
                                    [--steps 5] [--repeats 3] [--threads 2] [--compile]

Prints milliseconds per training step for each and the ratio. kernelgrad runs each LSTM
layer as one autograd node (``kernelgrad/nn/_recurrence.py``): the input projection of
all steps is one matrix product, each time step one matrix product plus one fused cell
kernel forward and again backward, and the weight gradients one matrix product each.
``--compile`` also times the step under ``kg.compile`` (its replay: runs of kernels joined
into native calls, ``backends/cpu/native_replay.py``).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _timing import import_torch, report_to_parent, run_peer, thread_counts, timeit, use_threads


def build(library, vocab: int, hidden: int):
    nn = library.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, hidden)
            self.rnn = nn.LSTM(hidden, hidden, 2)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, tokens):
            output, _ = self.rnn(self.encoder(tokens))
            return self.decoder(output)

    return Model()


def step_function(library, model, tokens, targets, vocab: int, compiled: bool = False):
    optimizer = library.optim.SGD(model.parameters(), lr=1.0)

    def train(tokens, targets):
        optimizer.zero_grad()
        logits = model(tokens)
        loss = library.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets)
        loss.backward()
        library.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        return loss

    run = library.compile(train) if compiled else train

    def step():
        return run(tokens, targets).item()

    step.compiled = run
    return step


WARMUP_REPLAYS = 8


def data(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, args.vocab, (args.seq, args.batch))
    targets = rng.integers(0, args.vocab, args.seq * args.batch)
    return tokens, targets


def per_step(step, args: argparse.Namespace) -> float:
    best, _ = timeit(lambda: [step() for _ in range(args.steps)], args.repeats)
    return best / args.steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=35)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=200)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--compile", action="store_true", help="also time the step compiled with kg.compile"
    )
    parser.add_argument("--peer", action="store_true", help="(internal) the PyTorch process")
    args = parser.parse_args()
    use_threads(args.threads)
    tokens, targets = data(args)
    if args.peer:
        torch = import_torch(args.threads)
        if torch is not None:
            model = build(torch, args.vocab, args.hidden)
            step = step_function(
                torch, model, torch.from_numpy(tokens), torch.from_numpy(targets), args.vocab
            )
            report_to_parent(name=f"PyTorch {torch.__version__}", seconds=per_step(step, args))
        return
    import kernelgrad as kg

    print(thread_counts())
    print(
        f"LSTM language model: seq {args.seq}, batch {args.batch}, hidden {args.hidden}, "
        f"vocab {args.vocab}, 2 layers"
    )
    model = build(kg, args.vocab, args.hidden)
    step = step_function(kg, model, kg.tensor(tokens), kg.tensor(targets), args.vocab)
    ours = per_step(step, args)
    print(f"  kernelgrad {kg.__version__}: {ours * 1e3:8.1f} ms per step")
    if args.compile:
        from kernelgrad.backends.cpu.compile_ahead import wait_for_workers

        kg.manual_seed(0)
        model = build(kg, args.vocab, args.hidden)
        step = step_function(kg, model, kg.tensor(tokens), kg.tensor(targets), args.vocab, True)
        for _ in range(3):  # eager, traced, first replay
            step()
        wait_for_workers()  # the prange forms compiling in worker processes
        for _ in range(WARMUP_REPLAYS):  # the native replay is built once they are
            step()
        compiled = per_step(step, args)
        plan = step.compiled.last_plan
        joined, calls = plan.native
        print(
            f"  kernelgrad, kg.compile: {compiled * 1e3:8.1f} ms per step ({len(plan.steps)} "
            f"kernels, {joined} of them in {calls} native call(s))"
        )
    passed = [a for a in sys.argv[1:] if a != "--peer"]
    for record in run_peer(__file__, passed):
        ratio = ours / record["seconds"]
        line = f"  {record['name']}: {record['seconds'] * 1e3:8.1f} ms per step "
        line += f"(kernelgrad / PyTorch time: {ratio:.2f}x"
        if args.compile:
            line += f", kg.compile: {compiled / record['seconds']:.2f}x"
        print(line + ")")


if __name__ == "__main__":
    main()
