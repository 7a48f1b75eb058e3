"""The vmap backend against the loop backend for BatchNorm models on the CPU, side by side in one
process: the measurement behind engine.backends.choose_backend's CPU rule for BatchNorm models.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_bn_backends.py --repeats 3 \
        --out benchmarks/results/bn_backends_cpu.md

Workload per model: FedAvg, one round of local training (SGD, momentum 0.9, one local epoch, no
evaluation) over synthetic 3x32x32 images, clients of unequal size (so the last batches are
padded and some slots idle in the last steps), the model's FedMT batch size. Per model, both
backends' trainers are built once and warmed up by one round, then timed round by round,
interleaved (the order alternates per repeat); the rate is training samples per CPU second of this
process (median over repeats), and vmap / loop is the ratio per repeat. The two backends train the
same function (tests/engine/test_batchnorm_batched.py); the check column is the relative
difference of their parameters after the timed rounds, ||p_vmap - p_loop|| / ||p_loop|| over all
parameters (float rounding, grown over the rounds).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from machine import cpu_line, loadavg, machine  # noqa: E402

# name: (model, kwargs, batch size, clients, samples per client of the largest client)
NETS = {
    "BatchNorm convnet 16/64 (FedMT quick/long)": ("bn_convnet", dict(width=16, dim=64), 32, 10, 96),
    "small ResNet 16-32-64": ("small_resnet", dict(widths=(16, 32, 64)), 32, 10, 96),
    "ResNet-18 (FedMT Table 5), 32 px": ("resnet18_fedmt", {}, 10, 4, 20),
}
BACKENDS = ("loop", "vmap")


def trainer(model: str, kwargs: dict, batch: int, clients: int, largest: int, backend: str):
    """A FederatedTrainer on the workload above (one round per run())."""
    import numpy as np

    from fedpaper.algorithms import get_method
    from fedpaper.blocks.data import synthetic_images
    from fedpaper.driver import FederatedTrainer
    from fedpaper.engine import Federation, Pools, TrainConfig

    sizes = [largest - (i * largest) // (2 * clients) for i in range(clients)]  # largest down to about half
    ds = synthetic_images(num_classes=10, n_train=sum(sizes), n_test=10, shape=(3, 32, 32), seed=0)
    starts = np.cumsum([0] + sizes[:-1])
    fed = Federation([np.arange(s, s + n) for s, n in zip(starts, sizes)], np.arange(10), seed=0)
    cfg = TrainConfig(model=model, model_kwargs=dict(num_classes=10, **kwargs), optimizer="sgd", lr=0.01,
                      momentum=0.9, batch_size=batch, local_epochs=1, rounds=1, eval_every=10**6, backend=backend)
    return FederatedTrainer(get_method("FedAvg"), cfg, Pools.from_dataset(ds), [fed], progress=False), sum(sizes)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nets", nargs="+", default=list(NETS), choices=list(NETS))
    ap.add_argument("--out", default=None, help="write a markdown table here (and its .json beside it)")
    a = ap.parse_args(argv)
    import torch

    from fedpaper.engine.backends import choose_backend

    m = machine(frameworks=False)
    started, load0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), loadavg()
    cells = []
    for name in a.nets:
        model, kw, batch, clients, largest = NETS[name]
        built = {b: trainer(model, kw, batch, clients, largest, b) for b in BACKENDS}
        trs, samples = {b: t for b, (t, _) in built.items()}, built["loop"][1]
        for tr in trs.values():
            tr.run()  # warm-up
        ts = {b: [] for b in BACKENDS}
        res = {}
        for rep in range(a.repeats):
            for b in (BACKENDS if rep % 2 == 0 else BACKENDS[::-1]):
                t = time.process_time()
                res[b] = trs[b].run()
                ts[b].append(time.process_time() - t)
        lp, vp = res["loop"].final_params, res["vmap"].final_params
        diff = float(torch.cat([(vp[k] - v).flatten() for k, v in lp.items()]).norm() /
                     torch.cat([v.flatten() for v in lp.values()]).norm())
        auto = choose_backend("auto", torch.device("cpu"), True, False, model)[0]
        ratios = [lo / vm for lo, vm in zip(ts["loop"], ts["vmap"])]
        cell = {"net": name, "model": model, "kwargs": kw, "batch": batch, "clients": clients, "samples": samples,
                "auto_cpu": auto, "samples_per_cpu_s": {b: round(samples / statistics.median(v)) for b, v in ts.items()},
                "vmap_over_loop_per_repeat": [round(r, 3) for r in ratios], "round_cpu_s": ts,
                "relative_param_diff": diff}
        cells.append(cell)
        print(f"{name:44s} loop {cell['samples_per_cpu_s']['loop']:6,}  vmap {cell['samples_per_cpu_s']['vmap']:6,}  "
              f"vmap/loop {statistics.median(ratios):.2f}x ({', '.join(f'{r:.2f}' for r in ratios)})  "
              f"relative param diff {diff:.1e}  auto -> {auto}", flush=True)
    if not a.out:
        return
    out = Path(a.out)
    load1 = loadavg()
    lines = ["# BatchNorm models: the vmap and the loop backend on the CPU", "",
             f"Generated by `benchmarks/bench_bn_backends.py` on {started} (UTC); raw numbers in "
             f"[`{out.with_suffix('.json').name}`]({out.with_suffix('.json').name}):", "",
             f"    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_bn_backends.py --repeats {a.repeats} "
             f"--out {out}", "",
             f"CPU: {cpu_line(m)}; torch {m['torch']}, {torch.get_num_threads()} thread; load average "
             f"(1 min) {load0[0]:.2f} before, {load1[0]:.2f} after. Workload: FedAvg, one round, SGD "
             "(momentum 0.9), one local epoch, no evaluation, synthetic 3x32x32 images, clients of unequal "
             "size; training samples per CPU second of the process, median of "
             f"{a.repeats} interleaved rounds per backend; the ratio per repeat.", "",
             "| model | batch | clients | samples/round | loop | vmap | vmap / loop (median, per repeat) | "
             "relative param diff | auto on CPU |",
             "|---|---:|---:|---:|---:|---:|---|---:|---|"]
    for c in cells:
        r = c["vmap_over_loop_per_repeat"]
        lines.append(f"| {c['net']} | {c['batch']} | {c['clients']} | {c['samples']} | "
                     f"{c['samples_per_cpu_s']['loop']:,} | {c['samples_per_cpu_s']['vmap']:,} | "
                     f"{statistics.median(r):.2f}x ({', '.join(f'{x:.2f}' for x in r)}) | "
                     f"{c['relative_param_diff']:.1e} | {c['auto_cpu']} |")
    lines += ["", "The rule (engine.backends.choose_backend): a BatchNorm model trains with `vmap` when asked and "
              "under `auto` on CUDA; under `auto` on the CPU with `loop`. A fixed rule on the model and the device, "
              "not a timing."]
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"machine": m, "started": started, "load": [load0, load1],
                                                    "cells": cells}, indent=1, default=str))


if __name__ == "__main__":
    main()
