"""The grouped backend against the loop backend on CPU, by CNN width: the measurement behind
engine.backends.GROUPED_MAX_CONV (the `auto` rule), side by side in one process.

    OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/bench_backends.py --repeats 3 \
        --precisions fp32 bf16 --out benchmarks/results/engine_backends.md

Workload: bench_engine.py's (FedAvg, 10 clients x 500 Fashion-MNIST images at 28x28x1, Adam lr 1e-3,
batch 64, 1 local epoch per round, no evaluation) for the privlabels CNN at several widths (conv
widths w-w-2w-2w, hidden 16w; 32-32-64-64/512 is the paper's, 8-8-16-16/128 the quick profile's) and
the FedPALS LeNet. Per model, both backends' trainers are built once, warmed up by one round, then
timed round by round, interleaved (the order alternates per repeat); the rate is training samples per
CPU second of this one-thread process (median over repeats) and the ratio is taken per repeat.
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

NETS = {
    "privlabels CNN 8-8-16-16/128": ("privlabels_cnn", dict(widths=(8, 8, 16, 16), hidden=128)),
    "privlabels CNN 16-16-32-32/256": ("privlabels_cnn", dict(widths=(16, 16, 32, 32), hidden=256)),
    "privlabels CNN 24-24-48-48/384": ("privlabels_cnn", dict(widths=(24, 24, 48, 48), hidden=384)),
    "privlabels CNN 32-32-64-64/512": ("privlabels_cnn", dict(widths=(32, 32, 64, 64), hidden=512)),
    "LeNet (FedPALS)": ("lenet", {}),
}
BACKENDS = ("grouped", "loop")



def trainer(model: str, backend: str, precision: str = "fp32", model_kwargs=None):
    """A FederatedTrainer on bench_engine.py's workload (FedAvg, 10 clients x 500 Fashion-MNIST images,
    Adam lr 1e-3, batch 64, one local epoch, one round per run(), 10 test images)."""
    import numpy as np
    import torch

    import bench_engine as be
    from fedpaper.algorithms import get_method
    from fedpaper.driver import FederatedTrainer
    from fedpaper.engine import Federation, Pools, TrainConfig

    args = argparse.Namespace(model=model, seed=0, clients=10, samples=500, threads=torch.get_num_threads())
    ds, rows, _, _ = be._setup(args)
    fed = Federation(rows, np.arange(10), seed=0)
    cfg = TrainConfig(model=model, model_kwargs=dict(be.MODELS[model], **(model_kwargs or {})), optimizer="adam",
                      lr=1e-3, batch_size=64, local_epochs=1, rounds=1, backend=backend, precision=precision)
    return FederatedTrainer(get_method("FedAvg"), cfg, Pools.from_dataset(ds), [fed], progress=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nets", nargs="+", default=list(NETS), choices=list(NETS))
    ap.add_argument("--precisions", nargs="+", default=["fp32"], choices=["fp32", "bf16"],
                    help="TrainConfig.precision of both backends (bf16: where native, else it trains in fp32)")
    ap.add_argument("--out", default=None, help="write a markdown table here (and its .json beside it)")
    a = ap.parse_args(argv)
    import torch

    from fedpaper.engine.backends import GROUPED_MAX_CONV, choose_backend, widest_conv

    m = machine(frameworks=False)
    started, load0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), loadavg()
    cells = []
    for name, prec in [(n, q) for q in a.precisions for n in a.nets]:
        model, kw = NETS[name]
        trs = {b: trainer(model, b, prec, kw) for b in BACKENDS}
        for tr in trs.values():
            tr.run()  # warm-up
        ts = {b: [] for b in BACKENDS}
        for rep in range(a.repeats):
            for b in (BACKENDS if rep % 2 == 0 else BACKENDS[::-1]):
                t = time.process_time()
                trs[b].run()
                ts[b].append(time.process_time() - t)
        width = widest_conv(trs["grouped"].template)
        auto = choose_backend("auto", torch.device("cpu"), False, True, model, width, prec)[0]
        ratios = [lo / gr for gr, lo in zip(ts["grouped"], ts["loop"])]
        cell = {"net": name, "precision": prec, "widest_conv": width, "auto": auto,
                "samples_per_cpu_s": {b: round(5000 / statistics.median(v)) for b, v in ts.items()},
                "grouped_over_loop_per_repeat": [round(r, 3) for r in ratios], "round_cpu_s": ts}
        cells.append(cell)
        print(f"{name:32s} {prec} widest conv {width:3d}  grouped {cell['samples_per_cpu_s']['grouped']:6,}  "
              f"loop {cell['samples_per_cpu_s']['loop']:6,}  grouped/loop {statistics.median(ratios):.2f}x "
              f"({', '.join(f'{r:.2f}' for r in ratios)})  auto -> {auto}", flush=True)
    if not a.out:
        return
    out = Path(a.out)
    load1 = loadavg()
    lines = ["# The grouped and the loop backend by CNN width (the CPU `auto` rule)", "",
             f"Generated by `benchmarks/bench_backends.py` on {started} (UTC); raw numbers in "
             f"[`{out.with_suffix('.json').name}`]({out.with_suffix('.json').name}):", "",
             f"    OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/bench_backends.py --repeats {a.repeats} "
             f"--precisions {' '.join(a.precisions)} --out {out}", "",
             f"CPU: {cpu_line(m)}; torch {m['torch']}, {torch.get_num_threads()} thread; load average "
             f"(1 min) {load0[0]:.2f} before, {load1[0]:.2f} after. Workload: FedAvg, 10 clients x 500 "
             "Fashion-MNIST images, Adam, batch 64, one local epoch per round, no evaluation; training samples "
             f"per CPU second, median of {a.repeats} interleaved rounds per backend; the ratio per repeat.", "",
             "| model | precision | widest conv | grouped | loop | grouped / loop (median, per repeat) | auto picks |",
             "|---|---|---:|---:|---:|---|---|"]
    for c in cells:
        r = c["grouped_over_loop_per_repeat"]
        lines.append(f"| {c['net']} | {c['precision']} | {c['widest_conv']} | {c['samples_per_cpu_s']['grouped']:,} | "
                     f"{c['samples_per_cpu_s']['loop']:,} | {statistics.median(r):.2f}x ({', '.join(f'{x:.2f}' for x in r)}) "
                     f"| {c['auto']} |")
    lines += ["", f"The rule (engine.backends.GROUPED_MAX_CONV = {GROUPED_MAX_CONV}): on CPU, `auto` trains a "
              "grouped-capable CNN in the grouped backend unless a convolution has at least that many output "
              "channels for the precision; a fixed rule on the model and the precision (results are bit-identical "
              "run to run), not a timing."]
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"machine": m, "started": started, "load": [load0, load1],
                                                    "cells": cells}, indent=1, default=str))


if __name__ == "__main__":
    main()
