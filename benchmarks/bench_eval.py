"""Evaluation and central tuning over runs: one grouped pass against model by model (issue 14).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/bench_eval.py --repeats 3

What a sweep does after each round, timed both ways on random standardised 32x32x3 inputs:
- evaluation: R runs' global models (or R x M client models) predict their own 2,000 test rows
  (different rows per run): engine.evaluate.predict model by model (the loop/vmap backends) against
  predict_grouped (the grouped backend);
- central tuning (algorithms/tuning.py, privlabels Sec 4.2, "mse"): one server step of R runs with
  M = 10 clients, a 500-row server set, batch 64, 1 tuning epoch: per-run gradients (ctx.backend
  "loop") against one grouped pass ("grouped"); the clients' probabilities on the server set are
  part of it (evaluated as above).
Networks: the privlabels CNN at the quick profile's 16-16-32-32/256 and at 32-32-64-64/512, and the
FedPALS LeNet. fp32. Median seconds of --repeats calls (after one warm-up) and the speed-up.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402

NETS = {
    "cnn-16-16-32-32/256": ("privlabels_cnn", dict(widths=(16, 16, 32, 32), hidden=256)),
    "cnn-32-32-64-64/512": ("privlabels_cnn", dict(widths=(32, 32, 64, 64), hidden=512)),
    "lenet": ("lenet", {}),
}


def trainer(model, kw, runs, clients, n_test, n_server, method="FedAvg"):
    from fedpaper.algorithms import get_method
    from fedpaper.driver import FederatedTrainer
    from fedpaper.engine import Federation, Pools, TrainConfig

    g = torch.Generator().manual_seed(0)
    n_train = clients * 64 + n_server * runs
    pools = Pools(torch.randn(n_train, 3, 32, 32, generator=g), torch.randint(0, 10, (n_train,), generator=g),
                  torch.randn(n_test * 2, 3, 32, 32, generator=g), torch.randint(0, 10, (n_test * 2,), generator=g), 10)
    rng = np.random.default_rng(0)
    feds = [Federation(list(np.split(np.arange(clients * 64), clients)), np.sort(rng.choice(2 * n_test, n_test, False)),
                       server_indices=clients * 64 + n_server * r + np.arange(n_server), seed=r) for r in range(runs)]
    cfg = TrainConfig(model=model, model_kwargs=dict(kw, in_channels=3, image_size=32, num_classes=10),
                      optimizer="adam", lr=1e-3, batch_size=64, backend="grouped")
    return FederatedTrainer(get_method(method), cfg, pools, feds, progress=False)


def timed(fn, repeats):
    fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), min(out), max(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--test", type=int, default=2000)
    ap.add_argument("--server", type=int, default=500)
    ap.add_argument("--nets", nargs="*", default=["cnn-16-16-32-32/256", "lenet"], help=f"of {list(NETS)}")
    args = ap.parse_args(argv)
    from fedpaper.algorithms.tuning import CentralTuning, central_tuning
    from fedpaper.engine import evaluate

    print("| network | work | model by model s (min-max) | grouped s (min-max) | speed-up |\n|---|---|---|---|---|")
    for net in args.nets:
        model, kw = NETS[net]
        tr = trainer(model, kw, args.runs, args.clients, args.test, args.server, "Tuning-MSE")
        rows = [f.test_indices for f in tr.feds]
        glob = tr.global_params
        res = {}
        for backend in ("loop", "grouped"):
            tr.backend = backend
            evaluate.BATCHED_OVER_MODELS = backend == "grouped"  # off by default in the engine
            res[backend] = timed(lambda: tr.predict(glob, tr.pools.x_test, rows), args.repeats)
        _row(net, f"evaluate {args.runs} runs x {args.test} test rows", res)
        slots = np.array([(r, c) for r in range(args.runs) for c in range(args.clients)])
        part = np.tile(np.arange(args.clients), (args.runs, 1))
        new = {k: v[slots[:, 0]].clone() for k, v in glob.items()}
        spec = CentralTuning("mse", epochs=1, optimizer="adam")
        res = {}
        for backend in ("loop", "grouped"):
            tr.backend = backend
            evaluate.BATCHED_OVER_MODELS = backend == "grouped"
            ctx = replace(tr.ctx, backend=backend)
            rngs = [np.random.default_rng(r) for r in range(args.runs)]
            res[backend] = timed(lambda: central_tuning(ctx, glob, new, slots, part, rngs, spec), args.repeats)
        _row(net, f"central tuning, {args.runs} runs x {args.clients} clients, {args.server}-row server set, 1 epoch",
             res)
    print(f"\ntorch {torch.__version__}, {torch.get_num_threads()} thread(s); command: {' '.join(sys.argv)}")


def _row(net, work, res):
    a, b = res["loop"], res["grouped"]
    print(f"| {net} | {work} | {a[0]:.2f} ({a[1]:.2f}-{a[2]:.2f}) | {b[0]:.2f} ({b[1]:.2f}-{b[2]:.2f}) | "
          f"{a[0] / b[0]:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
