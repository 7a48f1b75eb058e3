"""Does the GPU get faster per sample when one engine call trains more runs? (issue 30, item 5)

benchmarks/results/gpu.md found the engine's LeNet calls launch-bound on an H200 (about 54,000
training samples/s against 6 M/s for evaluation) and guessed that larger groups would buy it back;
a FedPALS Table 1 sweep groups only 2-3 runs per engine call (runs of one method and setting, in
chunks of 16 pending runs). This measures the guess instead of assuming it:

    PYTHONPATH=. python3 benchmarks/gpu_groups.py --out-json OUT/gpu_groups.json --out-md OUT/gpu_groups.md

For each LeNet input shape of the paper profile (Fashion-MNIST 1x28x28, CIFAR-10 3x32x32; batch 32,
SGD as FedPALS trains it), each backend (vmap, grouped, loop) and each group size R (runs trained by
one engine call, 10 clients each, --batches batches per client per round, random data): the engine
(fedpaper.driver.FederatedTrainer, FedAvg) trains R runs side by side; one warm-up round, then
rounds until --per-cell seconds (at most --rounds), wall time with torch.cuda.synchronize at the
engine's round callbacks; the median round gives training samples/s (a round includes the
aggregation and the evaluation of one test batch per run). Cells whose backend is slower than the
best one by more than --prune x at the previous group size are not run at larger sizes (said in the
table). One torch.profiler pass (one round, vmap, --profile-runs runs) lists the top CUDA kernels
and the CPU-side operator time, to show whether the round waits on the GPU or on the launches.

Without CUDA the script refuses (exit 2) unless --allow-cpu (for testing; tiny sizes).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SHAPES = {"fashion-mnist": (1, 28, 28), "cifar10": (3, 32, 32)}
CLIENTS_PER_RUN = 10
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_throughput import _Enough, _sync, time_rounds  # noqa: E402 - the same round timing as the throughput table


def _key(shape):
    """The paper profile's LeNet key of this input shape (benchmarks/results/paper_models.json)."""
    from fedpaper.runs.model_costs import ModelKey

    keys = json.loads((REPO / "benchmarks" / "results" / "paper_models.json").read_text())["keys"]
    k = next(e["key"] for e in keys if e["key"]["model"] == "lenet" and tuple(e["key"]["input_shape"]) == tuple(shape))
    return ModelKey(**{**k, "input_shape": tuple(k["input_shape"]), "clients": CLIENTS_PER_RUN})


def _setup(shape, runs: int, batches: int, rounds: int, device, backend: str):
    """(a trainer factory, samples per round) of `runs` FedAvg runs of 10 clients each, one engine call."""
    import dataclasses

    from fedpaper.algorithms.methods import Method
    from fedpaper.driver import FederatedTrainer
    from fedpaper.runs.model_costs import timing_federation

    pools, fed, cfg, n = timing_federation(_key(shape), CLIENTS_PER_RUN, batches, rounds=rounds, device=device)
    cfg = dataclasses.replace(cfg, backend=backend, lr=0.01)
    feds = [dataclasses.replace(fed) for _ in range(runs)]
    return (lambda: FederatedTrainer(Method("FedAvg"), cfg, pools, feds, progress=False)), n * runs


def time_cell(shape, runs, backend, device, batches, per_cell, max_rounds) -> dict:
    make, n = _setup(shape, runs, batches, 1 + max_rounds, device, backend)
    trainer, rounds, warmup = time_rounds(make, device, per_cell)
    med = statistics.median(rounds)
    return {"runs": runs, "backend": trainer.backend, "asked": backend, "samples_per_round": n,
            "round_s": rounds, "warmup_s": warmup, "samples_per_s": n / med,
            "steps_per_s": batches / med}


def profile_round(shape, runs, device, batches) -> dict:
    """torch.profiler over one round after a warm-up round: top kernels, kernel count, CPU vs CUDA time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from fedpaper.ground.progress import on_rounds

    make, n = _setup(shape, runs, batches, 3, device, "vmap")
    trainer = make()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    state = {"prof": None, "wall": None}

    def mark(rnd, rounds, rr):
        _sync(device)
        if rnd == 1:  # after the warm-up round: start
            state["prof"] = profile(activities=acts)
            state["prof"].__enter__()
            state["t"] = time.perf_counter()
        elif rnd == 2:
            state["wall"] = time.perf_counter() - state["t"]
            state["prof"].__exit__(None, None, None)
            raise _Enough

    try:
        with on_rounds(mark):
            trainer.run()
    except _Enough:
        pass
    prof = state["prof"]
    ka = prof.key_averages()
    dev_attr = "self_device_time_total" if hasattr(ka[0], "self_device_time_total") else "self_cuda_time_total"
    rows = sorted(ka, key=lambda e: getattr(e, dev_attr, 0), reverse=True)
    top_dev = [{"name": e.key[:90], "calls": e.count, "self_device_ms": getattr(e, dev_attr, 0) / 1e3}
               for e in rows[:15]]
    top_cpu = [{"name": e.key[:90], "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1e3}
               for e in sorted(ka, key=lambda e: e.self_cpu_time_total, reverse=True)[:15]]
    kernels = [e for e in prof.events() if getattr(e, "device_type", None) is not None
               and str(e.device_type).endswith("CUDA")]
    dev_total = sum(getattr(e, dev_attr, 0) for e in ka) / 1e3
    del torch
    return {"runs": runs, "shape": list(shape), "round_wall_ms": (state["wall"] or 0) * 1e3,
            "device_busy_ms": dev_total, "device_events": len(kernels), "local_steps": batches,
            "top_device": top_dev, "top_cpu": top_cpu}


def markdown(out: dict) -> str:
    L = [f"# Training samples/s against runs per engine call ({out['card']})", "",
         f"Measured {out['date']} by `benchmarks/gpu_groups.py {out['argv']}`: {out['card']}; torch {out['torch']}, "
         f"Python {out['python']}. Engine FedAvg, LeNet, batch 32, SGD, {CLIENTS_PER_RUN} clients per run, "
         f"{out['batches']} batches per client per round, random data; median round after a warm-up round "
         "(the round includes aggregation and one test batch per run). samples/s = runs x clients x batches x 32 "
         "/ median round.", ""]
    for shape_name, cells in out["cells"].items():
        sizes = sorted({c["runs"] for c in cells if "runs" in c})
        backends = list(dict.fromkeys(c["asked"] for c in cells))
        L += [f"## {shape_name} {tuple(SHAPES[shape_name])}", "",
              "| runs per call | " + " | ".join(f"{b} samples/s" for b in backends) + " | best vs 1 run |",
              "|---|" + "---|" * (len(backends) + 1)]
        base = None
        for r in sizes:
            row = {c["asked"]: c for c in cells if c.get("runs") == r}
            vals = []
            for b in backends:
                c = row.get(b)
                vals.append("not run" if c is None else (f"error: {c['error']}" if "error" in c
                                                         else f"{c['samples_per_s']:,.0f}"))
            best = max((c["samples_per_s"] for c in row.values() if "samples_per_s" in c), default=None)
            if base is None:
                base = best
            L.append(f"| {r} | " + " | ".join(vals) + f" | {best / base:.1f}x |" if best and base else
                     f"| {r} | " + " | ".join(vals) + " | - |")
        L.append("")
    p = out.get("profile")
    if p:
        L += [f"## One round under torch.profiler (vmap, {p['runs']} runs, {tuple(p['shape'])})", "",
              f"Round wall {p['round_wall_ms']:.1f} ms; device busy (sum of self device time) {p['device_busy_ms']:.1f} ms; "
              f"{p['device_events']} device events for {p['local_steps']} local steps.", "",
              "| top device kernels | calls | self device ms |", "|---|---|---|"]
        L += [f"| `{r['name']}` | {r['calls']} | {r['self_device_ms']:.2f} |" for r in p["top_device"]]
        L += ["", "| top CPU operators | calls | self CPU ms |", "|---|---|---|"]
        L += [f"| `{r['name']}` | {r['calls']} | {r['self_cpu_ms']:.2f} |" for r in p["top_cpu"]]
    if out.get("skipped"):
        L += ["", "Not run: " + "; ".join(out["skipped"]) + "."]
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="fashion-mnist,cifar10")
    ap.add_argument("--backends", default="vmap,grouped,loop")
    ap.add_argument("--runs", default="1,3,9,27,81", help="group sizes (runs per engine call)")
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--per-cell", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--prune", type=float, default=3.0)
    ap.add_argument("--max-seconds", type=float, default=240.0)
    ap.add_argument("--profile-runs", type=int, default=9)
    ap.add_argument("--out-json", required=True)
    ap.add_argument("--out-md", required=True)
    ap.add_argument("--allow-cpu", action="store_true")
    a = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available() and not a.allow_cpu:
        print("gpu_groups: no CUDA device (use --allow-cpu to test on the CPU)", file=sys.stderr)
        return 2
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    t0 = time.perf_counter()
    out = {"card": torch.cuda.get_device_name() if device.type == "cuda" else f"CPU ({platform.processor() or 'cpu'})",
           "torch": torch.__version__, "python": platform.python_version(),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "argv": " ".join(sys.argv[1:] if argv is None else argv), "batches": a.batches, "cells": {}, "skipped": []}
    sizes = [int(s) for s in a.runs.split(",")]
    backends = a.backends.split(",")

    def save():
        out["total_s"] = round(time.perf_counter() - t0, 1)
        Path(a.out_json).write_text(json.dumps(out, indent=1) + "\n")
        Path(a.out_md).write_text(markdown(out))

    for shape_name in a.shapes.split(","):
        shape = SHAPES[shape_name]
        cells = out["cells"].setdefault(shape_name, [])
        alive = set(backends)
        for r in sizes:
            got = {}
            for b in backends:
                if b not in alive:
                    out["skipped"].append(f"{shape_name} {b} at {r} runs (over {a.prune:g}x slower than the best before)")
                    continue
                if time.perf_counter() - t0 > a.max_seconds:
                    out["skipped"].append(f"{shape_name} {b} at {r} runs (time budget spent)")
                    continue
                try:
                    c = time_cell(shape, r, b, device, a.batches, a.per_cell, a.rounds)
                except Exception as e:  # noqa: BLE001 - a cell that fails is recorded, the rest go on
                    c = {"runs": r, "asked": b, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
                    alive.discard(b)
                cells.append(c)
                got[b] = c.get("samples_per_s")
                print(f"{shape_name} runs={r} {b}: "
                      f"{c.get('samples_per_s', 0):,.0f} samples/s {c.get('error', '')}", flush=True)
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            best = max((v for v in got.values() if v), default=None)
            for b, v in got.items():
                if best and v and v * a.prune < best:
                    alive.discard(b)
            save()
    if a.profile_runs and time.perf_counter() - t0 < a.max_seconds + 30:
        try:
            out["profile"] = profile_round(SHAPES["fashion-mnist"], a.profile_runs, device, a.batches)
        except Exception as e:  # noqa: BLE001
            out["skipped"].append(f"profile ({type(e).__name__}: {str(e).splitlines()[0][:160]})")
    save()
    print(f"done in {out['total_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
