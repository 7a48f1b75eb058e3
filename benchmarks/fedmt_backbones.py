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
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig

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


def fedmt_round_seconds(threshold: float, rounds: int = 2) -> tuple[float, float]:
    """Measured seconds per round of FedMT (E) at the quick profile's split on CIFAR-100 (LeNet), and
    the image-steps per round the workload model counts for it (threshold 0.001: every row confident;
    1.0: none)."""
    from fedpaper.papers import fedmt as F
    from fedpaper.papers.fedmt import runs as R

    p = F._settings("quick")
    p["rounds"] = rounds
    s = R.spec(p, "FedMT (E)", 0)
    s = s.with_(replace_method=R.family_algorithm("FedMT (E)", "fedmt", {
        "estimator": "estimate", "threshold": threshold, "server_epochs": 1}).spec())
    setup = s.build(os.environ.get("FEDPAPER_DATA"))
    from fedpaper.runs.experiment import get_pools

    t0 = time.perf_counter()
    train(setup.method, setup.config, get_pools(setup.pools_key), [setup.federation], progress=False)
    sec = (time.perf_counter() - t0) / rounds
    server, client = 25 * 100, p["num_clients"] * p["samples_per_client"]
    model = server + client / 3 + p["test_cap"] / 3 + (3 * client * 1.5 if threshold < 0.5 else 0)
    return sec, model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    lines = ["# FedMT backbones: training images/s in the engine (CPU)", "",
             f"Command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '?')} python benchmarks/fedmt_backbones.py "
             f"--seconds {a.seconds:g}` on {platform.machine()}, torch {torch.__version__}, "
             f"{torch.get_num_threads()} thread(s). The machine is shared (2 cores, other jobs running): numbers are "
             "noisy, read them as an order of magnitude. Load average (1 min) at the start: "
             f"{os.getloadavg()[0]:.1f}.", "",
             "| backbone | params | train images/s (fp32) | train images/s (bf16) |", "|---|---|---|---|"]
    from fedpaper.blocks.models import build_model

    for name, (model, kw) in BACKBONES.items():
        p = sum(v.numel() for v in build_model(model, num_classes=100, **kw).parameters())
        fp = measure(model, kw, a.seconds)
        if model == "lenet":
            lenet_rate = fp
        if model == "resnet18_fedmt":
            resnet_rate = fp
        bf = measure(model, kw, a.seconds, bf16=True)
        lines.append(f"| {name} | {p / 1e6:.2f} M | {fp:.0f} | {bf:.0f} |")
        print(lines[-1], flush=True)
    lines += ["", "## Profile sizing", "",
              "Training image-steps of every distinct run of the implemented artifacts "
              "(`fedpaper.papers.fedmt.workload`: low = no client row ever passes the threshold, high = every "
              "row does), and the wall time they imply at the LeNet's measured fp32 rate above (one process, "
              f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '?')}). Budgets: quick <= 30 min, long <= 2.5 h.", "",
              "| profile | backbone | runs | image-steps (low - high) | est. wall time (low - high) |", "|---|---|---|---|---|"]
    from fedpaper.papers import fedmt as F
    from fedpaper.papers.fedmt.profiles import SETTINGS

    rate = lenet_rate
    cal = []
    if os.environ.get("FEDPAPER_DATA"):
        for thr, what in ((1.0, "no row confident"), (0.001, "every row confident")):
            sec, model = fedmt_round_seconds(thr)
            cal.append(sec / (model / rate))
            lines.insert(-4, f"- measured FedMT (E) round at the quick split on CIFAR-100 ({what}): {sec:.2f} s; the "
                             f"model's {model:.0f} image-steps at {rate:.0f}/s predict {model / rate:.2f} s "
                             f"(factor {cal[-1]:.2f})")
        lines.insert(-4, "")
    f_lo, f_hi = cal if cal else (1.0, 1.0)
    lines[-2] = ("| profile | backbone | runs | image-steps (low - high) | est. wall time (low - high; calibrated x"
                 f"{f_lo:.2f} / x{f_hi:.2f}) |")
    for prof in ("quick", "long", "paper"):
        w = F.workload(prof)
        r = rate if SETTINGS[prof]["backbone"] == "lenet" else resnet_rate
        lines.append(f"| {prof} | {SETTINGS[prof]['backbone']} | {w['runs']} | {w['image_steps_low'] / 1e6:.2f}M - "
                     f"{w['image_steps_high'] / 1e6:.2f}M | {f_lo * w['image_steps_low'] / r / 60:.0f} - "
                     f"{f_hi * w['image_steps_high'] / r / 60:.0f} min |")
    text = "\n".join(lines) + "\n"
    if a.out:
        from fedpaper.ground.files import atomic_write_text

        atomic_write_text(a.out, text)
    print(text)


if __name__ == "__main__":
    main()
