"""Images per second of FedMT's candidate backbones in the engine (training, loop backend: BatchNorm),
on CIFAR-100-sized inputs (3x32x32, 100 classes), one client, batch 32, a few seconds each.

    OMP_NUM_THREADS=1 python benchmarks/fedmt_backbones.py [--seconds 6] [--out benchmarks/results/fedmt_backbones.md]

Training images/s counts every image of a forward+backward+SGD step; FedMT's client step runs three
such images per confident row (weak, strong, mix), so its rows/s is about a third of this.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch

from fedpaper.algorithms.methods import Method
from fedpaper.engine import Federation, Pools, TrainConfig, train

BACKBONES = {
    "lenet (no BatchNorm, grouped backend)": ("lenet", {"in_channels": 3, "image_size": 32}),
    "small_resnet w(8,16,32)": ("small_resnet", {"widths": (8, 16, 32)}),
    "small_resnet w(16,32,64)": ("small_resnet", {"widths": (16, 32, 64)}),
    "resnet18_fedmt (Table 5)": ("resnet18_fedmt", {}),
}


def measure(model, kw, seconds, bf16=False):
    n = 512
    x = torch.randn(n, 3, 32, 32)
    y = torch.randint(0, 100, (n,))
    pools = Pools(x, y, x[:64], y[:64], 100)
    fed = Federation([np.arange(n)], np.arange(64), seed=0)
    rounds, imgs, t = 1, 0, 0.0
    while t < seconds:
        cfg = TrainConfig(model=model, model_kwargs={"num_classes": 100, **kw}, lr=0.03, momentum=0.9,
                          batch_size=32, rounds=rounds, precision="bf16" if bf16 else "fp32")
        res = train(Method("FedAvg"), cfg, pools, [fed], progress=False)
        t, imgs = res.log["train_seconds"], res.log["samples"]
        rounds *= 2
    return imgs / t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    lines = ["# FedMT backbones: training images/s in the engine (CPU)", "",
             f"Command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '?')} python benchmarks/fedmt_backbones.py "
             f"--seconds {a.seconds:g}` on {platform.machine()}, torch {torch.__version__}, "
             f"{torch.get_num_threads()} thread(s). The machine is shared (2 cores, other jobs running): numbers are "
             "noisy, read them as an order of magnitude.", "",
             "| backbone | params | train images/s (fp32) | train images/s (bf16) |", "|---|---|---|---|"]
    from fedpaper.models import build_model

    for name, (model, kw) in BACKBONES.items():
        p = sum(v.numel() for v in build_model(model, num_classes=100, **kw).parameters())
        fp = measure(model, kw, a.seconds)
        bf = measure(model, kw, a.seconds, bf16=True)
        lines.append(f"| {name} | {p / 1e6:.2f} M | {fp:.0f} | {bf:.0f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if a.out:
        from fedpaper.store import atomic_write_text

        atomic_write_text(a.out, text)
    print(text)


if __name__ == "__main__":
    main()
