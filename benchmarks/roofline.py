"""How fast does this machine train the privlabels CNN, one model at a time? Reference rates for the engine benchmark.

    flock /tmp/fedpaper-quick.lock .venv/bin/python benchmarks/roofline.py

The engine benchmark (bench_engine.py) asks for batched >= 2x Flower on a compute-bound CNN. This
script measures, in one invocation, reference rates for it on this machine:

1. the network's work per training sample: floating-point operations of forward + backward of one
   28x28x1 image, counted by torch.utils.flop_counter (1 multiply-add = 2 FLOP);
2. the machine's fp32 throughput on a large matrix product (2048 x 2048, the best case for the
   CPU's vector units), with all threads and with one thread;
3. the best plain training throughput of the network itself, outside any FL logic: forward,
   backward and torch.optim.Adam step of ONE model on batches of 64 and of 640 images, NCHW and
   channels_last, all threads in one process, and two one-thread processes side by side (how
   Flower's best configuration shares the two cores).

"best single-model rate" (samples/s) = the best row of 3: a measured rate of one model, NOT a
bound: an engine that trains several models in one pass (grouped convolutions, bigger matrix
products) or in bf16 can exceed it, and does (engine.md). "matmul-speed estimate" = fp32 peak
GFLOP/s / FLOP per sample: an estimate of what fp32 arithmetic at large-matmul speed would give,
not a hard bound either (bf16 runs faster than fp32 peak). `--render` rewrites roofline.md from
roofline.json and the current engine.json without measuring again.
Writes benchmarks/results/roofline.md and roofline.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for _p in (str(REPO), str(BENCH)):
    if _p not in sys.path:
        sys.path.insert(0, _p)
OUT = BENCH / "results"

from machine import cpu_line, loadavg, machine  # noqa: E402  (benchmarks/machine.py)


def flops_per_sample() -> float:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from fedpaper.blocks.models import build_model

    model = build_model("privlabels_cnn", in_channels=1, num_classes=10, image_size=28)
    x, y = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))
    with FlopCounterMode(display=False) as fc:
        torch.nn.functional.cross_entropy(model(x), y).backward()
    return fc.get_total_flops() / 8


def matmul_gflops(threads: int, n: int = 2048, reps: int = 10) -> float:
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best / 1e9


def train_throughput(batch: int, channels_last: bool, threads: int, seconds: float = 8.0) -> float:
    """Samples/s of forward + backward + Adam on one privlabels CNN (median of 1-second windows)."""
    import torch

    from fedpaper.blocks.models import build_model

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_model("privlabels_cnn", in_channels=1, num_classes=10, image_size=28)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 1, 28, 28).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    rates, t_end = [], time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t, n = time.perf_counter(), 0
        while time.perf_counter() - t < 1.0:
            step()
            n += batch
        rates.append(n / (time.perf_counter() - t))
    return statistics.median(rates)


def _child(args) -> None:
    print(json.dumps({"rate": train_throughput(args.batch, args.channels_last, args.threads, args.seconds)}))


def _spawn(batch, channels_last, threads, seconds):
    cmd = [sys.executable, __file__, "--child", "--batch", str(batch), "--threads", str(threads),
           "--seconds", str(seconds)] + (["--channels-last"] if channels_last else [])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO)


def _rate(proc) -> float:
    out, _ = proc.communicate()
    return json.loads(out.strip().splitlines()[-1])["rate"]


def measure(seconds: float) -> list[dict]:
    ncpu = os.cpu_count() or 1
    rows = []
    for batch in (64, 640):
        for cl in (False, True):
            rows.append({"config": f"one process, {ncpu} threads", "batch": batch, "channels_last": cl,
                         "samples_per_s": _rate(_spawn(batch, cl, ncpu, seconds))})
            procs = [_spawn(batch, cl, 1, seconds) for _ in range(ncpu)]
            rates = [_rate(p) for p in procs]
            rows.append({"config": f"{ncpu} one-thread processes side by side (sum)", "batch": batch,
                         "channels_last": cl, "samples_per_s": sum(rates)})
            print(rows[-2], rows[-1], flush=True)
    return rows


def write(res: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "roofline.json").write_text(json.dumps(res, indent=1))
    best = max(r["samples_per_s"] for r in res["train"])
    fl = res["flops_per_sample"]
    eng = res.get("engine_md_rates", {})
    lines = [
        "# Roofline of the privlabels CNN on this machine",
        "",
        f"Generated by `benchmarks/roofline.py` on {res['finished']} (UTC); raw numbers in [`roofline.json`](roofline.json).",
        f"Machine: {cpu_line(res['machine'])}; torch {res['machine']['torch']}; load average (1, 5, 15 min) "
        f"before: {res['load_before']}." + (f" Text re-rendered from the same measurements on {res['rendered']} "
                                            "(`benchmarks/roofline.py --render`)." if res.get("rendered") else ""),
        "",
        f"- Work per training sample (forward + backward, one 28x28x1 image, torch.utils.flop_counter): "
        f"**{fl / 1e6:.1f} MFLOP** (the optimizer step adds about 4 x 1.7 M parameter updates per step, "
        "negligible per sample at batch 64).",
        f"- fp32 matrix product 2048 x 2048: **{res['matmul_gflops_all']:.0f} GFLOP/s** with all threads, "
        f"{res['matmul_gflops_1']:.0f} GFLOP/s with one thread -> a matmul-speed estimate of "
        f"**{res['matmul_gflops_all'] * 1e9 / fl:,.0f} samples/s** for this network (convolutions, pooling and "
        "small layers run below matmul speed; bf16 arithmetic runs above fp32 peak, so this is no hard bound).",
        "",
        "Best plain training throughput of one model (forward + backward + Adam, synthetic 28x28 batches, "
        "median of 1-second windows):",
        "",
        "| configuration | batch | channels_last | samples / s |",
        "|---|---:|---|---:|",
    ]
    lines += [f"| {r['config']} | {r['batch']} | {'yes' if r['channels_last'] else 'no'} | {r['samples_per_s']:,.0f} |"
              for r in res["train"]]
    lines += ["", f"**Best measured single-model rate (fp32): {best:,.0f} samples/s** (best row above). This is a "
              "measurement of one model trained alone, not a bound: training several models in one grouped pass "
              "or in bf16 can exceed it."]
    if eng:
        lines += ["", "Against the engine benchmark ([engine.md](engine.md), same network and machine, other "
                  f"invocations; medians over its invocations, {eng['threads']} thread(s) per contender, shared machine):",
                  f"Flower {eng['flower']:,.0f} samples/s, so the target '>= 2x Flower' means "
                  f">= {2 * eng['flower']:,.0f} samples/s = {2 * eng['flower'] / best:.2f}x the best single-model rate; "
                  f"fedpaper batched reached {eng['batched']:,.0f} samples/s fp32 = {eng['batched'] / best:.2f}x it"
                  + (f" and {eng['batched_bf16']:,.0f} samples/s bf16 = {eng['batched_bf16'] / best:.2f}x it"
                     if eng.get("batched_bf16") else "") + ". The engine's thread count may differ from the "
                  "rows above (wall rates on a loaded machine are not comparable across invocations)."]
    (OUT / "roofline.md").write_text("\n".join(lines) + "\n")


def _engine_rates() -> dict:
    """Median samples/s over engine.json's invocations: Flower, batched grouped fp32 and bf16."""
    try:
        e = json.loads((OUT / "engine.json").read_text())
        r = e["results"]
    except (OSError, KeyError, ValueError):
        return {}
    def med(c):
        v = [x["samples_per_s"] for x in r if x.get("model") == "privlabels_cnn" and x.get("contender") == c
             and x.get("samples_per_s")]
        return statistics.median(v) if v else None
    out = {"flower": med("flower"), "batched": med("batched-grouped"), "batched_bf16": med("batched-grouped-bf16"),
           "threads": e.get("settings", {}).get("threads")}
    if out["threads"] != (e.get("machine") or {}).get("nproc"):  # 1-thread engine rates vs 2-thread rows: no ratio
        return {}
    return out if out["flower"] and out["batched"] else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--seconds", type=float, default=8.0, help="measuring time per configuration")
    ap.add_argument("--render", action="store_true", help="rewrite roofline.md from roofline.json, no measuring")
    args = ap.parse_args()
    if args.child:
        return _child(args)
    if args.render:
        res = json.loads((OUT / "roofline.json").read_text())
        res["engine_md_rates"] = _engine_rates()
        res["rendered"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        write(res)
        print((OUT / "roofline.md").read_text())
        return
    res = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "load_before": loadavg(),
           "machine": machine(frameworks=False), "command": "benchmarks/roofline.py " + " ".join(sys.argv[1:])}
    res["flops_per_sample"] = flops_per_sample()
    res["matmul_gflops_all"] = matmul_gflops(os.cpu_count() or 1)
    res["matmul_gflops_1"] = matmul_gflops(1)
    res["train"] = measure(args.seconds)
    res["engine_md_rates"] = _engine_rates()
    res["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    write(res)
    print((OUT / "roofline.md").read_text())


if __name__ == "__main__":
    main()
