#!/usr/bin/env python3
"""Training images/s of FedNCA-ML's network (backbone + LADM + ETF head, eq. 10-14 loss, AdamW)
through the engine, per backbone and input size, to size the quick and long profiles.

    OMP_NUM_THREADS=1 python benchmarks/bench_fednca_backbones.py [--seconds 3] [--out benchmarks/results/fednca_backbones.md]

One run = one federated round of 2 clients on random multi-hot data (batch 32, loop backend),
after one warm-up round, repeated until `--seconds` have passed; images/s = trained images / train seconds (evaluation not
counted). Also reports the forward-only evaluation images/s. The machine is shared: timings are
noisy (a few seconds each).
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch

from fedpaper.algorithms.base import Algorithm
from fedpaper.algorithms.fednca_loss import FedNCALoss
from fedpaper.algorithms.frozen import FrozenParameters
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig
from fedpaper.engine.optim import OptimSpec

CASES = [  # (label, model kwargs, input side[, precision])
    ("convnet w16 d64", dict(backbone="convnet", width=16, dim=64), 32),
    ("convnet w16 d64 bf16", dict(backbone="convnet", width=16, dim=64), 32, "bf16"),
    ("convnet w32 d128", dict(backbone="convnet", width=32, dim=128), 32),
    ("convnet w16 d64", dict(backbone="convnet", width=16, dim=64), 64),
    ("convnet w32 d128", dict(backbone="convnet", width=32, dim=128), 64),
    ("resnet18_cifar", dict(backbone="resnet18_cifar"), 32),
]


def measure(kw, side, seconds, C=10, n=256, precision="fp32"):
    g = torch.Generator().manual_seed(0)
    y = (torch.rand(n, C, generator=g) < 0.2).float()
    pools = Pools(torch.randn(n, 3, side, side, generator=g), y, torch.randn(64, 3, side, side, generator=g),
                  y[:64], C)
    feds = [Federation([np.arange(0, n // 2), np.arange(n // 2, n)], np.arange(64), seed=0)]
    cfg = TrainConfig("fednca_net", dict(num_classes=C, **kw), optimizer="adamw", lr=1e-4, batch_size=32, rounds=1,
                      backend="loop", precision=precision)
    algo = Algorithm("FedNCA-ML", (FedNCALoss(1.0, 1.0), FrozenParameters(("classifier.weight",))),
                     OptimSpec("adamw", 1e-4, weight_decay=0.01, betas=(0.9, 0.98)))
    train(algo, cfg, pools, feds, progress=False)  # warm-up (first-call overheads), not counted
    done, spent, ev = 0, 0.0, 0.0
    while spent < seconds:
        t0 = time.perf_counter()
        res = train(algo, cfg, pools, feds, progress=False)
        total = time.perf_counter() - t0
        spent += res.log["train_seconds"]
        done += res.log["samples"]
        ev += total
    return done / spent, done, spent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = []
    for label, kw, side, *prec in CASES:
        ips, n, s = measure(kw, side, a.seconds, precision=prec[0] if prec else "fp32")
        rows.append(f"| {label} | {side} | {ips:.0f} | {n} images in {s:.1f} s |")
        print(rows[-1], flush=True)
    text = "\n".join([
        "# FedNCA-ML backbones: training images/s through the engine", "",
        f"Command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '?')} nice -n 10 python "
        f"benchmarks/bench_fednca_backbones.py --seconds {a.seconds:g}`", "",
        f"Machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s); shared with other jobs, so timings are noisy.", "",
        "Model: fednca_net (backbone + LADM, 4 heads, fixed ETF, C = 10), loss eq. 14, AdamW, batch 32, "
        "loop backend (one client at a time), 2 clients x 128 images per round; evaluation not counted.", "",
        "| backbone | input px | train images/s | measured |", "|---|---|---|---|", *rows, ""])
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
