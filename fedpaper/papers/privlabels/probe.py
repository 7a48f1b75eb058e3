"""Timing probe for sizing the privlabels profiles: train a few representative batches of runs
at a profile's size for a couple of rounds, and extrapolate the whole sweep's CPU time.

    OMP_NUM_THREADS=1 python -m fedpaper.papers.privlabels.probe --profile quick --rounds 2

The probe times, per data set, one engine batch (all of the sweep's L values x seeds, as the
sweep groups them) of public FedAvg, Tuning-MSE and Tuning-Pairwise for `--rounds` rounds in a
throw-away results store, and derives seconds per (run x round) for three cost classes: plain
(FedAvg, FedProx, FedRS, private or public), MSE tuning, pairwise tuning (also the all-pairs
variant). The sweep estimate counts the runs the profile really trains (after share_L10) per class
and multiplies by its rounds; epoch-ablation runs are charged E times the plain local-training
cost plus their class's tuning and evaluation cost. Data loading and notebook start-up are not in it
(a few seconds per notebook). On the shared 2-core machine the numbers are noisy (other jobs).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter

from fedpaper.runs.executors import run_specs
from fedpaper.runs.store import ResultStore

from fedpaper.outputs.pipeline import declared_jobs
from fedpaper.papers.privlabels import tables
from fedpaper.papers.privlabels import runs
from fedpaper.papers.privlabels import _epoch_pairs
from fedpaper.papers.privlabels.profiles import paper_ratio_server

CLASSES = {"plain": "FedAvg", "mse": "Tuning-MSE", "pairwise": "Tuning-Pairwise"}


def cost_class(display: str) -> str:
    if display.startswith("Tuning-Pairwise"):
        return "pairwise"
    return "mse" if display == "Tuning-MSE" else "plain"


def sweep_counts(p: dict, dataset: str) -> tuple[Counter, Counter, Counter]:
    """(main runs per class, epoch-ablation local-epoch-rounds per class, epoch runs per class) the
    profile trains for one data set (the epoch ablation is CIFAR-10 only)."""

    main = Counter()
    trained = dict.fromkeys(runs.canonical(s, p) for s in runs.main_specs(p, dataset, p["labels"]))
    for s in trained:
        main[cost_class(s.tags["display"])] += 1
    ep_E, ep_n = Counter(), Counter()
    if dataset == "cifar10":
        pairs = sorted({pr for w in ("fig11", "fig12", "fig13") for pr in _epoch_pairs(p, w)})
        for s in dict.fromkeys(runs.epoch_specs(p, dataset, pairs, p["epochs"]["seeds"])):
            if s in trained:  # E = 1 FedAvg: the main sweep's run, read from the cache
                continue
            c = cost_class(s.tags["display"])
            ep_E[c] += s.training["local_epochs"]
            ep_n[c] += 1
    return main, ep_E, ep_n


def time_class(p: dict, dataset: str, display: str, rounds: int, seeds: list[int]) -> tuple[float, int]:
    """Process CPU seconds (not wall: the machine is shared) for one engine batch of public `display` runs (every L x seeds), and its run count."""
    q = dict(p, rounds=rounds)
    specs = [runs.run_spec(q, dataset, display, "public", L, s) for L in q["labels"] for s in seeds]
    specs = list(dict.fromkeys(runs.canonical(s, q) for s in specs))
    execution = runs.Execution(backend=q.get("backend", "auto"), eval_batch=q.get("eval_batch", 1024))
    with tempfile.TemporaryDirectory() as tmp:
        t0, c0 = time.perf_counter(), time.process_time()
        run_specs(specs, None, execution=execution, desc=f"probe {display}", store=ResultStore(tmp),
                  progress=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"  ({display}: wall {wall:.1f} s, process CPU {cpu:.1f} s)", flush=True)
        return cpu, len(specs)


LEARN_CHECK = [("FedAvg", "public", 10), ("FedAvg", "private", 2), ("Tuning-MSE", "private", 2)]


def learn_check(p: dict, dataset: str) -> None:
    """Train a few of the sweep's runs at the profile's full size and print their test accuracy
    (mean and per seed): does the size learn? (L = 10 FedAvg, and the hardest private L = 2 runs)."""
    execution = runs.Execution(backend=p.get("backend", "auto"), eval_batch=p.get("eval_batch", 1024))
    for name, setting, L in LEARN_CHECK:
        specs = [runs.run_spec(p, dataset, name, setting, L, s) for s in p["seeds"]]
        with tempfile.TemporaryDirectory() as tmp:
            c0 = time.process_time()
            res = run_specs(specs, None, execution=execution, desc="learn", store=ResultStore(tmp), progress=False)
        acc = [r["best"]["test_acc"] for r in res]
        print(f"{dataset} {setting} {name} L={L}, {p['rounds']} rounds: test accuracy mean {sum(acc) / len(acc):.3f} "
              f"(seeds {', '.join(f'{a:.3f}' for a in acc)}); {time.process_time() - c0:.0f} CPU s", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--datasets", default="cifar10,fashion-mnist")
    ap.add_argument("--precision", default=None, help="override the profile's precision (fp32 / bf16)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="override a setting for the probe, e.g. samples_per_client=500 (sizing only)")
    ap.add_argument("--learn", action="store_true", help="instead of timing, train a few runs at full size "
                    "and print their accuracy (LEARN_CHECK)")
    a = ap.parse_args(argv)
    p = declared_jobs(tables, profile=a.profile)[0].params  # the profile's settings as the artifacts run them
    if a.precision:
        p["precision"] = a.precision
    for kv in a.set:
        k, v = kv.split("=", 1)
        v = json.loads(v)
        p[k] = list(range(v)) if k == "seeds" and isinstance(v, int) else v  # seeds: a count or a list
    if any(kv.startswith("samples_per_client=") for kv in a.set) and not any(kv.startswith("server_size=") for kv in a.set):
        p["server_size"] = paper_ratio_server(p["samples_per_client"], p["num_clients"])
    print(f"probe settings: spc {p['samples_per_client']}, server {p['server_size']}, CNN {p['widths']}/{p['hidden']}, "
          f"batch {p['batch_size']}, val/test {p['val_eval']}/{p['test_eval']}, L {p['labels']}, seeds {p['seeds']}, "
          f"precision {p.get('precision', 'fp32')}", flush=True)
    if a.learn:
        for ds in a.datasets.split(","):
            learn_check(p, ds)
        return
    total = 0.0
    for ds in a.datasets.split(","):
        runs.pools(runs.data_spec(ds, p))  # load the data outside the timing
        per = {}
        for c, display in CLASSES.items():
            sec, n = time_class(p, ds, display, a.rounds, p["seeds"])
            per[c] = sec / (n * a.rounds)
            print(f"{ds} {display}: {n} runs x {a.rounds} rounds in {sec:.1f} CPU s -> {per[c]:.3f} CPU s per run-round",
                  flush=True)
        main_n, ep_E, ep_n = sweep_counts(p, ds)
        est = sum(main_n[c] * p["rounds"] * per[c] for c in main_n)
        er = p["epochs"]["rounds"]
        est_ep = sum((ep_n[c] * (per[c] - per["plain"]) + ep_E[c] * per["plain"]) * er for c in ep_n)
        print(f"{ds}: main sweep {dict(main_n)} runs x {p['rounds']} rounds ~ {est:.0f} s; "
              f"epoch ablation {dict(ep_n)} runs x {er} rounds ~ {est_ep:.0f} s", flush=True)
        total += est + est_ep
    print(f"estimated sweep ({a.profile}, precision {p.get('precision', 'fp32')}): {total:.0f} s = "
          f"{total / 60:.1f} min of CPU at OMP_NUM_THREADS as set (noisy: shared machine)")


if __name__ == "__main__":
    main()
