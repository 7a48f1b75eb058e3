"""What a Ray task costs: the same sweep of tiny groups through the local and the Ray executor.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_executors.py [--tasks 16] [--rounds 1]

Workload: `--tasks` groups of one run each (max_batch=1): LeNet, FedAvg, 4 clients on 300
synthetic 28x28 images, `--rounds` rounds: about the smallest unit of work, so the difference is
the executor's overhead (planning, submission, leases, store round trip, scheduling), not training.
All in this one invocation, each contender on a fresh result store, `--reps` interleaved
repetitions (medians reported):
- local: run_specs(executor="local") in this process (after a warm-up run, so pools and the
  engine's start-up are not counted);
- ray-serial: RayExecutor(num_cpus=2) on ray.init(num_cpus=2): one task at a time, so
  (ray-serial - local) / tasks is the overhead per task;
- ray-parallel: RayExecutor(num_cpus=1): two tasks at a time (two workers, one thread each).
Every side trains with one thread (OMP_NUM_THREADS=1, inherited by Ray's workers; torch set to
1 here): on a shared 2-core machine two threads per run were up to 13x slower than one (spin-waits
under oversubscription), which would swamp the overhead being measured.
Ray's start-up (ray.init) and the workers' cold start (first task per worker: importing torch and
fedpaper, building the data pool) are timed apart, after the warm-up. Writes
benchmarks/results/executors.json and executors.md (atomically) and prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch: the same one thread here and in every worker

import numpy as np

from fedpaper.algorithms import get_method
from fedpaper.engine import Federation, TrainConfig
from fedpaper.runs.executors import RayExecutor, run_specs
from fedpaper.runs.experiment import RunSetup, get_pools, pools_key
from fedpaper.blocks.partition import sparsity_partition
from fedpaper.ground.files import atomic_write_text
from fedpaper.runs.store import ResultStore

POOL = pools_key("synthetic-images", device="cpu", num_classes=10, n_train=300, n_test=100, seed=0)
RESULTS = Path(__file__).resolve().parent / "results"


def build(spec: dict) -> RunSetup:
    y = get_pools(POOL).y_train.numpy()
    part = sparsity_partition(y, 4, 3, seed=spec["seed"])
    fed = Federation([np.asarray(ix) for ix in part.client_indices], np.arange(100), seed=spec["seed"])
    cfg = TrainConfig("lenet", dict(in_channels=1, image_size=28), optimizer="sgd", lr=0.05, batch_size=32,
                      rounds=spec["rounds"])
    return RunSetup(get_method("FedAvg"), cfg, POOL, fed)


def sweep(executor, seeds, rounds, tmp: Path, name: str) -> float:
    specs = [{"seed": s, "rounds": rounds, "bench": name} for s in seeds]
    t0 = time.perf_counter()
    run_specs(specs, build, max_batch=1, progress=False, store=ResultStore(tmp / name, code="bench"),
              executor=executor)
    return time.perf_counter() - t0


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions; medians are reported")
    ap.add_argument("--no-write", action="store_true", help="print only")
    a = ap.parse_args(argv)
    import ray

    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    os.environ["FEDPAPER_PROGRESS"] = "0"
    seeds = list(range(100, 100 + a.tasks))
    with tempfile.TemporaryDirectory(prefix="bench-executors-") as d:
        tmp = Path(d)
        sweep("local", [0], a.rounds, tmp, "warmup-local")
        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray_init = time.perf_counter() - t0
        times: dict = {"local": [], "ray_serial": [], "ray_parallel": []}
        try:
            cold = sweep(RayExecutor(num_cpus=1), [1, 2], a.rounds, tmp, "warmup-ray")  # one task per worker
            for rep in range(a.reps):  # interleaved, so that a burst of load on a shared machine hits all
                times["local"].append(sweep("local", seeds, a.rounds, tmp, f"local-{rep}"))
                times["ray_serial"].append(sweep(RayExecutor(num_cpus=2), seeds, a.rounds, tmp, f"serial-{rep}"))
                times["ray_parallel"].append(sweep(RayExecutor(num_cpus=1), seeds, a.rounds, tmp, f"par-{rep}"))
        finally:
            ray.shutdown()
    local, serial, parallel = (statistics.median(times[k]) for k in ("local", "ray_serial", "ray_parallel"))
    out = {"tasks": a.tasks, "rounds": a.rounds, "ray_version": ray.__version__, "nproc": os.cpu_count(), "threads_per_run": torch.get_num_threads(),
           "loadavg_1min_at_end": os.getloadavg()[0],
           "reps": a.reps, "all_seconds": times,
           "seconds": {"local": local, "ray_serial": serial, "ray_parallel": parallel, "ray_init": ray_init,
                       "ray_cold_start_2_tasks": cold},
           "per_task_s": {"local": local / a.tasks, "ray_serial": serial / a.tasks, "ray_parallel": parallel / a.tasks},
           "overhead_per_task_s": (serial - local) / a.tasks,
           "ratio_ray_serial_vs_local": serial / local, "ratio_ray_parallel_vs_local": parallel / local}
    md = _markdown(out)
    print(md)
    if not a.no_write:
        atomic_write_text(RESULTS / "executors.json", json.dumps(out, indent=2) + "\n")
        atomic_write_text(RESULTS / "executors.md", md + "\n")
    return out


def _markdown(o: dict) -> str:
    s, p = o["seconds"], o["per_task_s"]
    return "\n".join([
        f"# Executor overhead ({o['tasks']} tasks of one tiny run, {o['rounds']} round(s); ray {o['ray_version']}, "
        f"{o['nproc']} CPUs, load average {o['loadavg_1min_at_end']:.1f} at the end)",
        "",
        f"Medians of {o['reps']} interleaved repetitions (all: {json.dumps({k: [round(x, 2) for x in v] for k, v in o['all_seconds'].items()})}).",
        "",
        "| contender | wall s | s per task | vs local |",
        "|---|---|---|---|",
        f"| local (this process) | {s['local']:.2f} | {p['local']:.3f} | 1.00x |",
        f"| ray, one task at a time (num_cpus=2 per task) | {s['ray_serial']:.2f} | {p['ray_serial']:.3f} | "
        f"{o['ratio_ray_serial_vs_local']:.2f}x |",
        f"| ray, two tasks at a time (num_cpus=1 per task) | {s['ray_parallel']:.2f} | {p['ray_parallel']:.3f} | "
        f"{o['ratio_ray_parallel_vs_local']:.2f}x |",
        "",
        f"Overhead per task (ray one at a time - local) / tasks: {o['overhead_per_task_s']:.3f} s. "
        f"Apart: ray.init {s['ray_init']:.1f} s; workers' cold start (2 tasks, one per worker: import torch and "
        f"fedpaper, build the data pool) {s['ray_cold_start_2_tasks']:.1f} s.",
    ])


if __name__ == "__main__":
    main(sys.argv[1:])
