"""Sizing trials of the FedMT quick/long profiles: a few methods of Table 2 at one setting, with
their per-round history (100-class accuracy, share of clients with a non-empty S_fix, mean |S_fix|)
and the wall time of each method's group of runs (all seeds trained together, as the sweep does).

    OMP_NUM_THREADS=1 taskset -c 0 python benchmarks/fedmt_sizing.py --profile quick \
        --set rounds=5 server_epochs=5 --methods Single "FedMT (E)" --seeds 1 [--n 25]

Results are written by hand into benchmarks/results/fedmt_sizing.md.
"""
from __future__ import annotations

import argparse
import json
import os
import time

from fedpaper.runs.executors import run_specs
from fedpaper.runs.experiment import Execution
from fedpaper.outputs.pipeline import declared_jobs
from fedpaper.papers import fedmt as F
from fedpaper.papers.fedmt import runs as R


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--set", nargs="*", default=[], help="key=json-value overrides of the profile")
    ap.add_argument("--methods", nargs="+", default=["Single", "FedMT (E)"])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--n", type=int, default=None)
    a = ap.parse_args()
    p = declared_jobs(F.main, profile=a.profile, seeds=a.seeds)[0].params
    for kv in a.set:
        k, v = kv.split("=", 1)
        p[k] = json.loads(v)
    p["single_rounds"] = p["rounds"] if "single_rounds" not in dict(kv.split("=", 1) for kv in a.set) else p["single_rounds"]
    print("settings:", {k: p[k] for k in ("samples_per_client", "num_clients", "rounds", "single_rounds", "local_epochs",
                                           "server_epochs", "batch_size", "lr", "threshold", "lambda2", "test_cap",
                                           "eval_every")}, flush=True)
    for m in a.methods:
        specs = [R.spec(p, m, s, n=a.n) for s in p["seeds"]]
        t0 = time.time()
        res = run_specs(specs, os.environ.get("FEDPAPER_DATA"), desc=m, execution=Execution(eval_batch=1024),
                        max_batch=16, progress=False)
        wall = time.time() - t0
        for s, r in zip(specs, res):
            line = []
            for h in r["history"]:
                acc = h.get("test_acc")
                fx = h.get("fix_clients_share")
                line.append(f"r{h['round']}:{100 * acc:.1f}" + (f"[{fx:.1f}|{h.get('fix_rows_mean', 0):.0f}]" if fx is not None else ""))
            print(f"{m:10s} seed {s.seed} wall {wall:.1f}s  " + " ".join(line), flush=True)
            print("   final:", {k: round(v, 2) for k, v in R.final_values(r, m).items()}, flush=True)


if __name__ == "__main__":
    main()
