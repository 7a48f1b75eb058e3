"""Where one FedPALS run's time goes: torch's profiler over one paper-profile run, operators by self CPU time.

    OMP_NUM_THREADS=1 FEDPAPER_DATA=../shared/data python benchmarks/profile_fedpals_run.py [--row cifar10:C=3]
        [--method FedAvg] [--rounds 1] [--top 30]

The run is the row's first seed of `--method` at the paper profile (full partitions, evaluation every round),
cut to `--rounds`; pools, partition and federation are built before profiling. Prints the process CPU
seconds of the run and torch.profiler's table (self CPU time, top `--top` operators).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fedpals_cost as FC  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row", default="cifar10:C=3")
    ap.add_argument("--method", default="FedAvg")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    from fedpaper.runs.executors import run_specs
    from fedpaper.runs.store import ResultStore

    data_root = os.environ.get("FEDPAPER_DATA")
    specs = [s for s in FC.row_specs(FC.params("paper", 1), a.row, a.rounds, data_root) if s.method.get("name") == a.method][:1]
    if not specs:
        raise SystemExit(f"no {a.method!r} run in row {a.row!r}")
    specs[0].build(data_root, FC.R.execution())
    print(f"# {a.row}, {a.method}, seed 0, {a.rounds} round(s), paper profile; torch {torch.__version__}, "
          f"capability {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} thread(s)")
    with tempfile.TemporaryDirectory() as d, profile(activities=[ProfilerActivity.CPU]) as prof:
        c = time.process_time()
        run_specs(specs, data_root, execution=FC.R.execution(), store=ResultStore(d), progress=False, max_batch=1)
        cpu = time.process_time() - c
    print(f"# CPU s of the run (profiled): {cpu:.2f}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.top))


if __name__ == "__main__":
    main()
