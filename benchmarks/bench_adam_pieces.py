"""Adam on CPU in cache-sized pieces (engine.optim._adam_in_pieces) against one pass over each whole
tensor, side by side in one process: the same trainer, rounds interleaved, results compared bit for bit.

    OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/bench_adam_pieces.py --repeats 4 \
        --out benchmarks/results/adam_pieces.json

Workload: bench_engine.py's (FedAvg, 10 clients x 500 Fashion-MNIST images, Adam lr 1e-3, batch 64,
1 local epoch per round, no evaluation), per model and backend. "whole" sets
engine.optim.ADAM_PIECE above every tensor's size (the update as it was before the pieces); "pieces"
uses the shipped ADAM_PIECE. Each repeat times one round in each mode, alternating which goes first;
after the timing, one extra round from the same start in each mode checks that the parameters are
bitwise equal. Reports the median round time per mode, the per-repeat ratios, the CPU and its flags.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from machine import cpu_line, loadavg, machine  # noqa: E402


def trainer(model: str, backend: str, precision: str = "fp32", model_kwargs=None):
    """A FederatedTrainer on bench_engine.py's workload (FedAvg, 10 clients x 500 Fashion-MNIST images,
    Adam lr 1e-3, batch 64, one local epoch, one round per run(), 10 test images); bench_backends.py uses
    it too."""
    import numpy as np
    import torch

    import bench_engine as be
    from fedpaper.algorithms import get_method
    from fedpaper.engine import FederatedTrainer, Federation, Pools, TrainConfig

    args = argparse.Namespace(model=model, seed=0, clients=10, samples=500, threads=torch.get_num_threads())
    ds, rows, _, _ = be._setup(args)
    fed = Federation(rows, np.arange(10), seed=0)
    cfg = TrainConfig(model=model, model_kwargs=dict(be.MODELS[model], **(model_kwargs or {})), optimizer="adam",
                      lr=1e-3, batch_size=64, local_epochs=1, rounds=1, backend=backend, precision=precision)
    return FederatedTrainer(get_method("FedAvg"), cfg, Pools.from_dataset(ds), [fed], progress=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["privlabels_cnn", "lenet"])
    ap.add_argument("--backends", nargs="+", default=["grouped", "loop"])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--out", default=None, help="write the measurements (json) here")
    a = ap.parse_args(argv)
    import torch

    from fedpaper.engine import optim

    shipped = optim.ADAM_PIECE
    modes = {"whole": 1 << 62, "pieces": shipped}
    m = machine(frameworks=False)
    print(f"# CPU: {cpu_line(m)}; torch {m['torch']}, {torch.get_num_threads()} thread(s); ADAM_PIECE {shipped}")
    out = {"machine": m, "adam_piece": shipped, "cells": []}
    for model in a.models:
        for backend in a.backends:
            tr = trainer(model, backend)
            tr.run()  # warm-up
            times = {k: [] for k in modes}
            load0 = loadavg()
            for rep in range(a.repeats):
                order = list(modes) if rep % 2 == 0 else list(modes)[::-1]
                for k in order:
                    optim.ADAM_PIECE = modes[k]
                    t = time.perf_counter()
                    tr.run()
                    times[k].append(time.perf_counter() - t)
            finals = {}
            for k in modes:  # one more round from the same start in each mode: the same bits?
                tr2 = trainer(model, backend)
                optim.ADAM_PIECE = modes[k]
                tr2.run()
                finals[k] = [v.clone() for v in tr2.global_params.values()]
            optim.ADAM_PIECE = shipped
            same = all(torch.equal(x, y) for x, y in zip(finals["whole"], finals["pieces"]))
            med = {k: statistics.median(v) for k, v in times.items()}
            ratios = [w / p for w, p in zip(times["whole"], times["pieces"])]
            cell = {"model": model, "backend": backend, "round_s": times, "median_round_s": med,
                    "samples_per_s": {k: round(5000 / v) for k, v in med.items()},
                    "speedup_per_repeat": [round(r, 3) for r in ratios], "bitwise_equal": same,
                    "load_before": load0, "load_after": loadavg()}
            out["cells"].append(cell)
            print(f"{model:15s} {backend:8s} whole {med['whole']:.3f} s/round ({cell['samples_per_s']['whole']:,}/s)  "
                  f"pieces {med['pieces']:.3f} s/round ({cell['samples_per_s']['pieces']:,}/s)  "
                  f"whole/pieces {statistics.median(ratios):.2f}x (per repeat {', '.join(f'{r:.2f}' for r in ratios)})  "
                  f"bitwise equal: {same}  load {load0[0]:.2f} -> {cell['load_after'][0]:.2f}", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
