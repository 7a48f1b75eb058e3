"""Do two checkouts train the same numbers? A few real runs per paper, cut to 2 rounds, trained with
a fresh results store; their per-round histories are written to a JSON file, and two such files
are compared exactly (issue #30: compact image pools must not change any result).

    export FEDPAPER_DATA=../shared/data OMP_NUM_THREADS=1
    PYTHONPATH=<old checkout> python benchmarks/same_results.py run fednca old-fednca.json
    PYTHONPATH=<new checkout> python benchmarks/same_results.py run fednca new-fednca.json
    python benchmarks/same_results.py compare old-fednca.json new-fednca.json   # exit 1 if any differs

Runs (quick profile, real data, rounds cut to 2; every backend and data path the quick results use):
fedpals: FedAvg, FedProx, SCAFFOLD, AFL, FedRS x seeds 0, 1 on Fashion-MNIST C=3 and CIFAR-10 beta=0.1
(grouped backend); privlabels: every main-sweep method, private and public, L=3, seeds 0, 1, both data
sets (central tuning, bf16 where native); fedmt: FedMT (T), FedMT (E), Learnable, FedTrans, FedRep,
SemiFL, Single on CIFAR-100 (seed 0); fednca: FedAvg, FedCurv, FedNCA-ML, Centralized on the
CIFAR-10 and DermaMNIST composites (resized 64/56 -> 32 px), beta 0.1, seed 0 (BatchNorm, loop backend).
"""
from __future__ import annotations

import json
import resource
import sys
import tempfile
import time

ROUNDS = 2


def specs_of(paper: str):
    from fedpaper.runs.experiment import Execution

    def cut(s):
        return s.with_(training={"rounds": ROUNDS})

    if paper == "fedpals":
        from fedpaper.papers.fedpals import profiles as P, runs as R

        p = P.runs("quick")
        specs = []
        for ds, split in (("fashion-mnist", {"scheme": "sparsity", "C": 3}),
                          ("cifar10", {"scheme": "dirichlet", "beta": 0.1})):
            specs += [cut(s) for s in R.method_specs(p, ds, split, ["FedAvg", "FedProx", "SCAFFOLD", "AFL", "FedRS"],
                                                     [0, 1])]
        return specs, R.execution()
    if paper == "privlabels":
        from fedpaper.papers.privlabels import profiles as P, runs as R

        p = P.settings("quick")
        p.update(seeds=[0, 1], profile="quick")
        specs = [cut(s) for ds in ("fashion-mnist", "cifar10") for s in R.main_specs(p, ds, [3])]
        return specs, Execution(backend=p.get("backend", "auto"), eval_batch=p.get("eval_batch", 1024))
    if paper == "fedmt":
        from fedpaper.papers.fedmt import profiles as P, runs as R

        p = P.settings("quick")
        names = ["FedMT (T)", "FedMT (E)", "Learnable", "FedTrans", "FedRep", "SemiFL", "Single"]
        return [cut(R.spec(p, n, 0)) for n in names], Execution(eval_batch=1024)
    if paper == "fednca":
        from fedpaper.papers.fednca import profiles as P, runs as R
        from fedpaper.papers.fednca.methods import CENTRAL, FEDNCA

        p = P.settings("quick")
        p["seeds"] = [0]
        specs = [cut(s) for table in ("table1", "table2")
                 for _, s in R.main_specs(p, table, ["FedAvg", "FedCurv", FEDNCA, CENTRAL])
                 if s.partition.get("beta", 0.1) == 0.1]
        return specs, Execution(backend="auto", eval_batch=p.get("eval_batch", 512))
    raise SystemExit(f"unknown paper {paper!r}; choose fedpals, privlabels, fedmt or fednca")


def run(paper: str, out: str) -> None:
    from fedpaper.runs.executors import run_specs
    from fedpaper.runs.store import ResultStore

    specs, execution = specs_of(paper)
    t0, c0 = time.time(), time.process_time()
    store = ResultStore(tempfile.mkdtemp(prefix="same-results-"))
    res = run_specs(specs, None, execution=execution, desc=paper, store=store, progress=False)
    with open(out, "w") as fh:
        json.dump([{"spec": s.to_json(), "history": r["history"]} for s, r in zip(specs, res)], fh, default=float)
    print(f"{paper}: {len(specs)} runs, {time.time() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU, "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")


def compare(a: str, b: str) -> int:
    ra, rb = json.load(open(a)), json.load(open(b))
    specs = len(ra) == len(rb) and all(x["spec"] == y["spec"] for x, y in zip(ra, rb))
    diff = [i for i, (x, y) in enumerate(zip(ra, rb)) if x["history"] != y["history"]]
    rows = sum(len(x["history"]) for x in ra)
    print(f"{len(ra)} runs, {rows} history rows; same specs: {specs}; runs whose histories differ: {diff or 'none'}")
    return 0 if specs and not diff else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        raise SystemExit(__doc__)
