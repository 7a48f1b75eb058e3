"""Sizing trials for the FedNCA-ML quick / long profiles: train a few runs at a profile with
changed settings and print wall time and the per-round validation / test metrics.

    python benchmarks/size_fednca.py --profile quick --dataset dermamnist --method FedNCA-ML \
        --beta 0.1 --seeds 0 --set '{"rounds": 4, "lr": 1e-3}'

Results go to $FEDPAPER_CACHE (use a scratch cache)."""
from __future__ import annotations

import argparse
import json
import time

import pandas as pd

from fedpaper.papers.fednca import _settings, runs


def deep_update(d: dict, u: dict) -> dict:
    for k, v in u.items():
        if isinstance(v, dict) and isinstance(d.get(k), dict):
            deep_update(d[k], v)
        else:
            d[k] = v
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--dataset", default="dermamnist")
    ap.add_argument("--method", action="append", default=None)
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--set", default="{}", help="JSON dict merged into the profile dict")
    a = ap.parse_args()
    p = deep_update(_settings(a.profile), json.loads(a.set))
    p["seeds"] = [int(s) for s in a.seeds.split(",")]
    gamma = {"cifar10": 0.5, "dermamnist": 0.71}[a.dataset]
    t0 = time.time()
    pl = runs.pools(p, a.dataset)
    n = pl.fednca_split
    print(f"pools {n} built in {time.time() - t0:.1f}s", flush=True)
    for name in a.method or ["FedNCA-ML"]:
        specs = [runs.run_spec(p, a.dataset, name, a.beta, gamma, s) for s in p["seeds"]]
        t = time.time()
        res = runs.sweep(specs, p, desc=name)
        wall = time.time() - t
        for s, r in zip(p["seeds"], res):
            h = pd.DataFrame(r["history"])
            cols = [c for c in ("round", "val_auc", "test_auc", "test_f1", "test_micro_f1") if c in h]
            b = runs.best_round_metrics(r)
            print(f"{name} seed {s}: wall {wall:.1f}s for {len(specs)} run(s); best round {b['round']}: "
                  + ", ".join(f"{k} {v[0]:.1f}" for k, v in b.items() if k != "round"), flush=True)
            print(h[cols].round(3).to_string(index=False), flush=True)


if __name__ == "__main__":
    main()
