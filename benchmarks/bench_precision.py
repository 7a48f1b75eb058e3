"""Training samples per second, fp32 against bf16 autocast (TrainConfig.precision), side by side.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/bench_precision.py --repeats 3

Networks (random standardised inputs of the given shape: speed only, 10 classes):
- privlabels CNN, widths 8-8-16-16, hidden 128 (the privlabels quick/long profiles' size), on 32x32x3;
- privlabels CNN, widths 32-32-64-64, hidden 512 (the paper's), on 32x32x3;
- privlabels CNN, widths 16-16-32-32, hidden 256 (a smaller quick-profile size), on 32x32x3;
- the FedPALS LeNet (fedpaper.blocks.models.LeNet, conv 6-16) on 28x28x1 and on 32x32x3.
Contenders, each in fp32 and in bf16:
- grouped: fedpaper's batched engine (FederatedTrainer.train_slots, backend "grouped"), 10 clients
  trained at once, batch 64 each, Adam lr 1e-3 (one step = 640 samples);
- plain: one nn.Module, torch.optim.Adam, batch 64, forward + cross-entropy under the autocast (the
  way a user adds bf16 to a plain loop), default NCHW layout, pre-standardised tensors.
Every repeat times every (network, contender, precision) cell once after a warm-up, cells
interleaved so that load drift on the shared machine hits fp32 and bf16 alike; the table reports
the median samples/s over the repeats, its min-max, and the median of the per-repeat bf16/fp32 ratios,
in wall time and in CPU time of this (one-thread) process, which load on a shared machine inflates less.
Both contenders run in the same process, so they share the engine's malloc setting (cpu.py).
Writes benchmarks/results/precision.json (the markdown table is printed), with the CPU capability
torch runs, ONEDNN_MAX_CPU_ISA and what fedpaper.engine.cpu.bf16_native says. On an AVX-512 CPU,
`ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2` measures what an AVX2-only CPU gets.
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

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from machine import cpu_line, loadavg, machine  # noqa: E402

NETS = {
    "cnn-8-8-16-16/128 @32x32x3": ("privlabels_cnn", dict(widths=(8, 8, 16, 16), hidden=128), (3, 32, 32)),
    "cnn-32-32-64-64/512 @32x32x3": ("privlabels_cnn", dict(widths=(32, 32, 64, 64), hidden=512), (3, 32, 32)),
    "cnn-16-16-32-32/256 @32x32x3": ("privlabels_cnn", dict(widths=(16, 16, 32, 32), hidden=256), (3, 32, 32)),
    "lenet @28x28x1": ("lenet", {}, (1, 28, 28)),
    "lenet @32x32x3": ("lenet", {}, (3, 32, 32)),
}
CLIENTS, BATCH = 10, 64


def _kwargs(kw, shape):
    return dict(kw, in_channels=shape[0], image_size=shape[1], num_classes=10)


class GroupedCell:
    """The batched engine's local training of CLIENTS slots (backend grouped) on random data."""

    def __init__(self, model, kw, shape, precision, steps):
        from fedpaper.algorithms import get_method
        from fedpaper.driver import FederatedTrainer
        from fedpaper.engine import Federation, Pools, TrainConfig

        n = CLIENTS * BATCH * steps
        g = torch.Generator().manual_seed(0)
        pools = Pools(torch.randn(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g),
                      torch.randn(8, *shape), torch.zeros(8, dtype=torch.int64), 10)
        fed = Federation(list(np.split(np.arange(n), CLIENTS)), np.arange(8), seed=0)
        cfg = TrainConfig(model=model, model_kwargs=_kwargs(kw, shape), optimizer="adam", lr=1e-3, batch_size=BATCH,
                          backend="grouped", precision=precision)
        self.tr = FederatedTrainer(get_method("FedAvg"), cfg, pools, [fed], progress=False)
        assert self.tr.backend == "grouped"
        self.rows = fed.client_indices
        self.samples = n

    def __call__(self):
        tr = self.tr
        params = {k: v[np.zeros(CLIENTS, dtype=int)].clone() for k, v in tr.global_params.items()}
        rngs = [np.random.default_rng(i) for i in range(CLIENTS)]
        tr.train_slots(params, self.rows, tr.present[0], rngs, tr.algo, 1)
        return self.samples


class PlainCell:
    """One nn.Module, torch.optim.Adam, batch 64, pre-standardised tensors."""

    def __init__(self, model, kw, shape, precision, steps):
        from fedpaper.blocks.models import build_model

        torch.manual_seed(0)
        self.net = build_model(model, **_kwargs(kw, shape))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.x = torch.randn(steps, BATCH, *shape)
        self.y = torch.randint(0, 10, (steps, BATCH))
        self.precision = precision

    def __call__(self):
        self.net.train()
        for x, y in zip(self.x, self.y):
            self.opt.zero_grad()
            if self.precision == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = F.cross_entropy(self.net(x), y)
            else:
                loss = F.cross_entropy(self.net(x), y)
            loss.backward()
            self.opt.step()
        return self.x.shape[0] * BATCH


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--grouped-steps", type=int, default=3, help="steps (of 10 x 64 samples) per timed grouped call")
    ap.add_argument("--plain-steps", type=int, default=20, help="steps (of 64 samples) per timed plain call")
    ap.add_argument("--nets", nargs="*", default=list(NETS))
    ap.add_argument("--out", default=str(BENCH / "results" / "precision.json"))
    args = ap.parse_args(argv)
    cells = {}
    for net in args.nets:
        model, kw, shape = NETS[net]
        for kind, cls, steps in (("grouped", GroupedCell, args.grouped_steps), ("plain", PlainCell, args.plain_steps)):
            for prec in ("fp32", "bf16"):
                cells[(net, kind, prec)] = cls(model, kw, shape, prec, steps)
    for c in cells.values():  # warm-up: oneDNN primitives, allocator
        c()
    rates = {k: [] for k in cells}
    cpu_rates = {k: [] for k in cells}  # samples per CPU-second of this process: less sensitive to load
    load = []
    t_start = time.perf_counter()
    for _ in range(args.repeats):
        load.append(loadavg()[0])
        for k, c in cells.items():
            t0, c0 = time.perf_counter(), time.process_time()
            n = c()
            rates[k].append(n / (time.perf_counter() - t0))
            cpu_rates[k].append(n / (time.process_time() - c0))
    wall = time.perf_counter() - t_start
    rows = []
    print(f"| network | contender | fp32 samples/s (min-max) | bf16 samples/s (min-max) | bf16/fp32 wall (median of "
          f"{args.repeats} paired ratios, min-max) | bf16/fp32 per CPU-second (median, min-max) |\n|---|---|---|---|---|---|")
    for net in args.nets:
        for kind in ("grouped", "plain"):
            fp, bf = rates[(net, kind, "fp32")], rates[(net, kind, "bf16")]
            ratios = [b / f for f, b in zip(fp, bf)]
            cpu_ratios = [b / f for f, b in zip(cpu_rates[(net, kind, "fp32")], cpu_rates[(net, kind, "bf16")])]
            row = {"network": net, "contender": kind, "fp32": fp, "bf16": bf, "ratios": ratios,
                   "fp32_cpu": cpu_rates[(net, kind, "fp32")], "bf16_cpu": cpu_rates[(net, kind, "bf16")],
                   "cpu_ratios": cpu_ratios}
            rows.append(row)
            print(f"| {net} | {kind} | {statistics.median(fp):,.0f} ({min(fp):,.0f}-{max(fp):,.0f}) | "
                  f"{statistics.median(bf):,.0f} ({min(bf):,.0f}-{max(bf):,.0f}) | "
                  f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | "
                  f"{statistics.median(cpu_ratios):.2f}x ({min(cpu_ratios):.2f}-{max(cpu_ratios):.2f}) |")
    m = machine(frameworks=False)
    from fedpaper.engine.cpu import bf16_native

    import os

    m.update(cpu_capability=torch.backends.cpu.get_cpu_capability(),
             onednn_max_cpu_isa=os.environ.get("ONEDNN_MAX_CPU_ISA"), bf16_native=list(bf16_native("cpu")))
    print(f"\n{cpu_line(m)}; torch {m['torch']}, {torch.get_num_threads()} thread(s); torch CPU capability "
          f"{m['cpu_capability']}, ONEDNN_MAX_CPU_ISA={m['onednn_max_cpu_isa']}; bf16_native: {m['bf16_native']}; "
          f"timed wall {wall:.0f} s; 1-min load average at each repeat's start {load}")
    out = {"timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": m,
           "threads": torch.get_num_threads(), "repeats": args.repeats, "clients": CLIENTS, "batch": BATCH,
           "grouped_steps": args.grouped_steps, "plain_steps": args.plain_steps, "loadavg": load, "rows": rows,
           "command": " ".join(sys.argv)}
    from fedpaper.ground.files import atomic_write_text

    atomic_write_text(Path(args.out), json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
