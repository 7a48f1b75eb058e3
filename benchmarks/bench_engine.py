"""Samples per second of FedAvg rounds: fedpaper's engines against a plain PyTorch loop and Flower.

    flock /tmp/fedpaper-quick.lock .venv/bin/python benchmarks/bench_engine.py

Workload (issue "Engine"): 10 clients x 2,000 real Fashion-MNIST training samples (privlabels'
private_label_partition with L = 10), FedAvg, Adam lr 1e-3 (privlabels Table 2), batch 64, one
local epoch per round, for two networks:
- privlabels_cnn: the privlabels CNN as fedpaper defines it (widths 32-32-64-64, hidden 512,
  dropout 0.5, 28x28x1 input): about 20 MFLOP-MACs per sample forward, compute-bound;
- lenet: the LeNet-size CNN (conv 1->6->12, FC 192-120-84-10): the "about 12-13k samples/s"
  network of the issue's and the developers' guide's figures.

Contenders (each in its own fresh Python process, so that no allocator, thread-pool or Ray state
carries over from one to the next; all launched by this one invocation, one after another):
- plain: the papers' way (benchmarks/plain_loop.py): per-sample-normalising Dataset,
  DataLoader(batch 64, shuffle=True), deepcopy of the global model per client, fresh torch.optim.Adam,
  model.train(), cross-entropy, weighted state_dict averaging; default NCHW layout;
- plain_cl (reference only): the same loop with model and batches in channels_last;
- plain_malloc (reference only): the plain loop after the same malloc setting the engine makes
  (fedpaper.engine._tune_cpu_allocator), to show how much of the gap that setting alone closes;
- sequential: fedpaper.engine.sequential.train_sequential (one client at a time, nn.Module, torch Adam);
- batched-auto / batched-vmap / batched-loop / batched-grouped: fedpaper.engine with that backend
  ("auto" times the candidates at start-up; the one it picked is reported);
- flower-1cpu / flower-2cpu: Flower's Ray simulation (benchmarks/flower_sim.py) with
  client_resources num_cpus 1 (two actors, one thread each) and 2 (one actor, two threads).

Every contender runs `--warmup` rounds (not timed into the round figure) and then `--rounds` timed
rounds; a round is local training of all clients plus aggregation (no evaluation: the batched
engine is given a 10-sample test split, which costs about a millisecond). Reports the median
seconds per round, samples per second (20,000 samples per round / median), and ratios against the
plain loop and against the faster Flower configuration. Start-up (model/actor creation,
calibration, Ray) is reported apart. Writes benchmarks/results/engine.md and engine.json.
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
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from machine import cpu_line, loadavg, machine  # noqa: E402  (benchmarks/machine.py)

MODELS = {
    "privlabels_cnn": dict(in_channels=1, image_size=28),
    "lenet": dict(in_channels=1, image_size=28),
}
MODEL_TEXT = {
    "privlabels_cnn": "privlabels CNN as defined in fedpaper (conv 32-32-pool-64-64-pool, FC 3136-512, dropout 0.5, 10 classes)",
    "lenet": "LeNet-size CNN (conv 1-6 5x5, pool, conv 6-12 5x5, pool, FC 192-120-84-10)",
}
FOREIGN_MAX = 0.25  # a timed round counts as undisturbed when other processes used < this many cores
CONTENDERS = ["plain", "plain_cl", "plain_malloc", "sequential", "batched-auto", "batched-vmap", "batched-loop",
              "batched-grouped", "flower-1cpu", "flower-2cpu"]
LABEL = {
    "plain": "plain PyTorch loop (papers' way)",
    "plain_cl": "plain loop + channels_last (reference)",
    "plain_malloc": "plain loop + engine's malloc setting (reference)",
    "sequential": "fedpaper sequential",
    "batched-auto": "fedpaper batched, backend auto",
    "batched-vmap": "fedpaper batched, backend vmap",
    "batched-loop": "fedpaper batched, backend loop",
    "batched-grouped": "fedpaper batched, backend grouped",
    "flower-1cpu": "Flower simulation (Ray), num_cpus=1 per client",
    "flower-2cpu": "Flower simulation (Ray), num_cpus=2 per client",
}


# ----------------------------------------------------------------------------- workers
def _setup(args):
    import numpy as np
    import torch

    from fedpaper.data import load_dataset
    from flower_sim import client_rows

    torch.set_num_threads(args.threads)
    ds = load_dataset("fashion-mnist")
    rows = client_rows(ds, args.clients, args.samples, args.seed)
    assert all(len(r) == args.samples for r in rows)
    return ds, rows, np, torch


def _rounds(fn, args) -> dict:
    """Warm-up calls, then timed calls until `rounds` of them ran on an otherwise idle machine
    (other processes below FOREIGN_MAX cores), at most rounds + extra timed calls."""
    import cpu_meter

    warm = []
    for _ in range(args.warmup):
        a = cpu_meter.snapshot()
        fn()
        warm.append(cpu_meter.snapshot()[0] - a[0])
    wall, own, foreign = [], [], []
    while len(wall) < args.rounds + args.extra:
        a = cpu_meter.snapshot()
        fn()
        b = cpu_meter.snapshot()
        wall.append(b[0] - a[0])
        own.append(cpu_meter.own_cores(a, b))
        foreign.append(cpu_meter.foreign_cores(a, b))
        if len(wall) >= args.rounds and sum(f < FOREIGN_MAX for f in foreign) >= args.rounds:
            break
    return {"warmup_s": warm, "round_s": wall, "own_cores": own, "foreign_cores": foreign}


def worker(args) -> dict:
    c, n_total = args.worker, args.warmup + args.rounds
    info: dict = {"contender": c, "model": args.model}
    t_start = time.perf_counter()
    if c.startswith("flower"):
        import flower_sim

        cpus = 1 if c == "flower-1cpu" else 2
        r = flower_sim.run(args.model, args.clients, args.samples, args.batch, args.lr, args.seed,
                           n_total + args.extra, cpus)  # the number of rounds is fixed in advance
        w = args.warmup
        info.update(startup_s=r["startup_s"], warmup_s=r["round_s"][:w], round_s=r["round_s"][w:],
                    own_cores=r["own_cores"][w:], foreign_cores=r["foreign_cores"][w:], flwr=r["flwr"],
                    failures=r["failures"], results=r["results"], total_s=r["total_s"])
        import ray

        info["ray"] = ray.__version__
        return info

    ds, rows, np, torch = _setup(args)
    kw = MODELS[args.model]
    if c.startswith("plain"):
        import plain_loop
        from fedpaper.models import build_model

        if c == "plain_malloc":
            from fedpaper.engine import _tune_cpu_allocator

            _tune_cpu_allocator()
        torch.manual_seed(args.seed)
        g = build_model(args.model, **kw)
        loaders = [plain_loop.client_loader(ds, r, args.batch, args.seed + i) for i, r in enumerate(rows)]
        if c == "plain_cl":
            g = g.to(memory_format=torch.channels_last)
            loaders = [_ChannelsLast(ld) for ld in loaders]
        info["startup_s"] = time.perf_counter() - t_start
        times = _rounds(lambda: plain_loop.fedavg_round(g, loaders, args.lr, 1), args)
    else:
        from fedpaper.algorithms import get_method
        from fedpaper.engine import FederatedTrainer, Federation, Pools, TrainConfig

        pools = Pools.from_dataset(ds)
        fed = Federation(rows, np.arange(10), seed=args.seed)  # 10 test samples: evaluation ~free
        backend = c.split("-")[1] if c.startswith("batched") else "loop"
        cfg = TrainConfig(model=args.model, model_kwargs=kw, optimizer="adam", lr=args.lr, batch_size=args.batch,
                          local_epochs=1, rounds=1, backend=backend)
        method = get_method("FedAvg")
        if c == "sequential":
            from fedpaper.engine.sequential import train_sequential

            info["startup_s"] = time.perf_counter() - t_start
            times = _rounds(lambda: train_sequential(method, cfg, pools, fed), args)
        else:
            t0 = time.perf_counter()
            tr = FederatedTrainer(method, cfg, pools, [fed], progress=False)
            info["trainer_init_s"] = time.perf_counter() - t0
            info["startup_s"] = time.perf_counter() - t_start
            info["backend"] = tr.backend
            info["calibration_samples_per_s"] = tr.calibration
            times = _rounds(tr.run, args)
    info.update(times, threads=torch.get_num_threads())
    return info


class _ChannelsLast:
    """Wrap a DataLoader so that its image batches come out in channels_last layout."""

    def __init__(self, loader):
        self.loader, self.dataset = loader, loader.dataset

    def __iter__(self):
        import torch

        for x, y in self.loader:
            yield x.contiguous(memory_format=torch.channels_last), y

    def __len__(self):
        return len(self.loader)


# ----------------------------------------------------------------------------- orchestration
def run_contender(args, model: str, contender: str) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", contender, "--model", model,
           "--rounds", str(args.rounds), "--warmup", str(args.warmup), "--extra", str(args.extra), "--clients", str(args.clients),
           "--samples", str(args.samples), "--batch", str(args.batch), "--lr", str(args.lr),
           "--seed", str(args.seed), "--threads", str(args.threads)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BENCH), str(REPO), os.environ.get("PYTHONPATH", "")]),
               FLWR_TELEMETRY_ENABLED="0", RAY_DEDUP_LOGS="0", PYTHONUNBUFFERED="1")
    load = loadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        tail = (proc.stdout[-1500:] + "\n" + proc.stderr[-3000:]).strip()
        return {"contender": contender, "model": model, "error": f"exit {proc.returncode}: {tail}",
                "load_before": load}
    res = json.loads(lines[-1][len("RESULT "):])
    res["load_before"] = load
    res["process_s"] = time.perf_counter() - t0
    return res


def summarise(res: dict, samples_per_round: int, rounds: int) -> dict:
    """Median over the timed rounds that ran with other processes below FOREIGN_MAX cores (all
    timed rounds, flagged as disturbed, when fewer than `rounds` of them did)."""
    if "error" in res or not res.get("round_s"):
        return res
    clean = [i for i, f in enumerate(res["foreign_cores"]) if f < FOREIGN_MAX]
    res["disturbed"] = len(clean) < rounds
    used = list(range(len(res["round_s"]))) if res["disturbed"] else clean
    res["rounds_used"] = used
    med = statistics.median(res["round_s"][i] for i in used)
    res["median_s"] = med
    res["samples_per_s"] = samples_per_round / med
    res["own_cores_median"] = statistics.median(res["own_cores"][i] for i in used)
    res["foreign_cores_median"] = statistics.median(res["foreign_cores"][i] for i in used)
    return res


def fmt(x, nd=2):
    return "–" if x is None else f"{x:.{nd}f}"


def write_markdown(path: Path, meta: dict, results: list, args) -> None:
    spr = args.clients * args.samples
    L = []
    m = meta["machine"]
    L += ["# Engine benchmark: FedAvg samples per second", "",
          f"Generated by `benchmarks/bench_engine.py` on {meta['finished']} (UTC). Raw measurements: "
          f"[`engine.json`](engine.json). All numbers below come from that one invocation:", "",
          f"    {meta['command']}", "",
          "## Machine", "",
          f"- CPU: {cpu_line(m)}",
          f"- GPU: {m['gpu']}",
          f"- Python {m['python']}, torch {m['torch']}, {args.threads} torch threads per process "
          f"({'; '.join(m['torch_parallel'])})",
          f"- flwr {m.get('flwr')}, ray {m.get('ray', '–')}; kernel {m['kernel']}",
          f"- Load average (1, 5, 15 min) before the run: {meta['load_before']}; after: {meta['load_after']}. "
          "The machine is shared: the run held `/tmp/fedpaper-quick.lock` (which other engineers' long runs "
          "also take) and measured, for every timed round, how many cores other processes kept busy "
          f"(`/proc/stat` minus the contender's own process tree). Rounds during which other processes used "
          f"{FOREIGN_MAX} cores or more are listed but left out of the median and replaced by up to "
          f"{args.extra} extra rounds.", "",
          "## Workload", "",
          f"FedAvg, {args.clients} clients x {args.samples} real Fashion-MNIST training samples "
          f"(private_label_partition, L=10, seed {args.seed}), Adam lr {args.lr}, batch {args.batch}, 1 local "
          f"epoch per round: {spr} samples per round. {args.warmup} warm-up round(s), then {args.rounds} timed "
          "rounds per contender; the table gives the median. A round = local training of every client + "
          "aggregation; no evaluation. Every contender runs in its own fresh Python process, one after another.", ""]
    for model in args.models:
        rows = [r for r in results if r["model"] == model]
        by = {r["contender"]: r for r in rows}
        plain = by.get("plain", {}).get("samples_per_s")
        flowers = [by[c] for c in ("flower-1cpu", "flower-2cpu") if by.get(c, {}).get("samples_per_s")]
        best_flower = max(flowers, key=lambda r: r["samples_per_s"]) if flowers else None
        fl = best_flower["samples_per_s"] if best_flower else None
        L += [f"## {model}: {MODEL_TEXT[model]}", "",
              "| contender | s / round (median) | samples / s | vs plain loop | vs Flower (best) | start-up s | "
              "own CPU (cores) | other processes (cores) | notes |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for c in CONTENDERS:
            r = by.get(c)
            if r is None:
                continue
            if "error" in r:
                L.append(f"| {LABEL[c]} | failed | | | | | | | {r['error'][:300].replace(chr(10), ' ')} |")
                continue
            note = []
            if r.get("backend"):
                note.append(f"backend used: **{r['backend']}**")
            if r.get("calibration_samples_per_s"):
                cal = ", ".join(f"{k} {v:.0f}" for k, v in r["calibration_samples_per_s"].items())
                note.append(f"calibration (gradient samples/s): {cal}")
            if c.startswith("flower"):
                note.append(f"warm-up round {fmt(r['warmup_s'][0] if r['warmup_s'] else None, 1)} s "
                            "(actors import torch, load data)")
            note.append("timed rounds (s) " + ", ".join(
                f"{t:.2f}" + ("" if i in r["rounds_used"] else " (disturbed, not used)")
                for i, t in enumerate(r["round_s"])))
            if r.get("disturbed"):
                note.append("**fewer than the required undisturbed rounds: median over all rounds**")
            sps = r["samples_per_s"]
            L.append(f"| {LABEL[c]} | {fmt(r['median_s'])} | {sps:,.0f} | "
                     f"{fmt(sps / plain if plain else None)}x | {fmt(sps / fl if fl else None)}x | "
                     f"{fmt(r.get('startup_s'), 1)} | {fmt(r.get('own_cores_median'), 2)} | "
                     f"{fmt(r.get('foreign_cores_median'), 2)} | "
                     f"{'; '.join(note)} |")
        auto = by.get("batched-auto", {}).get("samples_per_s")
        L.append("")
        if auto and plain:
            ok1 = auto / plain >= 1.5
            ok2 = (auto / fl >= 2.0) if fl else None
            L.append(f"Targets (2-core CPU): batched >= 1.5x plain loop: **{auto / plain:.2f}x, "
                     f"{'met' if ok1 else 'NOT met'}**; batched >= 2x Flower: "
                     + (f"**{auto / fl:.2f}x, {'met' if ok2 else 'NOT met'}**" if fl else "**Flower not measured**")
                     + ".")
            L.append("")
    L += ["The privlabels CNN's ceiling on this CPU (fp32 work per sample, matmul speed, best plain "
          "training throughput of one model): [roofline.md](roofline.md), from `benchmarks/roofline.py`.", ""]
    L += ["## GPU targets", "",
          "Not measured: no GPU in this session (batched >= 20x the plain loop on one H100; the whole "
          "privlabels paper-profile sweep projected under 15 minutes). No CPU-based projection is given.", ""]
    L += meta.get("notes_md", [])
    path.write_text("\n".join(L) + "\n")


NOTES = """## Notes

- Which network is which. The issue's "privlabels CNN" figures (plain loop 13.0k samples/s, Flower
  11.1k) match the LeNet-size network, not the privlabels CNN as fedpaper defines it
  (32-32-64-64 channels, 512 hidden), which is compute-bound near 1k samples/s on this CPU. Both are
  measured here, and each table names its network.
- What "batched" changes on a CPU. The `grouped` backend runs all clients' steps as one forward and
  backward pass: the clients' images are stacked along the channel axis of one channels_last tensor
  and every convolution is one grouped convolution (groups = clients), the linear layers are batched
  matmuls. `loop` runs one client at a time through torch.func.grad with channels_last weights and
  images. `vmap` is torch.func.vmap over clients (the GPU path). `auto` times the three on a few
  steps at start-up and keeps the fastest (its start-up includes this calibration).
- The engine raises glibc malloc's trim and mmap thresholds once per process on CPU: without it each
  step hands its activation buffers back to the kernel and page-faults them in again. The
  `plain loop + engine's malloc setting` row applies the same call to the plain loop, to show how
  much of the gap is that setting alone; the `plain` row is the loop as the papers write it.
- The plain loop normalises one sample at a time in `Dataset.__getitem__` and collates batches in a
  DataLoader, as the papers' code does; fedpaper standardises the pool once and gathers rows.
- Flower: flwr's legacy `start_simulation` with Ray; the clients load their data inside the Ray
  actor (cached per actor process) and train with exactly the plain loop's `local_train`, so
  Flower's rows differ from the plain loop only by Flower's and Ray's own overhead and by how the
  two cores are shared (num_cpus=1: two actors with one thread each; num_cpus=2: one actor with two
  threads). Start-up is from the `start_simulation` call to the first round; the warm-up round
  (actors importing torch and loading data) is listed in the notes column and not counted.
- Timings on a shared 2-core VM move by 10-20% from run to run (compare the `auto` and the explicit
  `grouped` rows, which run the same code). `own CPU` is the contender's process tree CPU seconds
  per wall second (2 = both cores; OpenMP threads that spin-wait count as busy); `other processes`
  is the median over the used rounds of the cores that other processes kept busy.
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="privlabels_cnn,lenet")
    ap.add_argument("--contenders", default=",".join(CONTENDERS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--extra", type=int, default=3,
                    help="extra timed rounds allowed to replace rounds disturbed by other processes")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per contender process")
    ap.add_argument("--out", default=str(BENCH / "results" / "engine.md"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(args)), flush=True)
        return
    args.models = args.models.split(",")
    contenders = args.contenders.split(",")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"command": " ".join(["flock /tmp/fedpaper-quick.lock .venv/bin/python benchmarks/bench_engine.py",
                                 *sys.argv[1:]]),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "load_before": loadavg(), "machine": machine(),
            "settings": {k: v for k, v in vars(args).items() if k not in ("worker", "model")}}
    results = []
    for model in args.models:
        for c in contenders:
            print(f"[{datetime.now().strftime('%H:%M:%S')}] {model} {c} (load {loadavg()[0]})", flush=True)
            r = summarise(run_contender(args, model, c), args.clients * args.samples, args.rounds)
            results.append(r)
            print("   ", {k: r.get(k) for k in ("median_s", "samples_per_s", "startup_s", "backend", "own_cores_median",
                                             "foreign_cores_median", "disturbed", "error")}, flush=True)
            json_path = out.with_suffix(".json")
            json_path.write_text(json.dumps({**meta, "results": results}, indent=1))
    meta["load_after"] = loadavg()
    meta["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    meta["notes_md"] = NOTES.splitlines()
    out.with_suffix(".json").write_text(json.dumps({**{k: v for k, v in meta.items() if k != "notes_md"},
                                                    "results": results}, indent=1))
    write_markdown(out, meta, results, args)
    print(out.read_text())


if __name__ == "__main__":
    main()
