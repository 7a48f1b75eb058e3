"""Runs and training sample-steps of each rung of the FedPALS compute ladder (fedpaper/papers/fedpals/ladder.py),
counted from the specs the rungs build with benchmarks/fedpals_cost.py (no training):

    FEDPAPER_DATA=../shared/data python benchmarks/fedpals_ladder_cost.py quick long
"""
import copy, sys, time
sys.path.insert(0, "benchmarks")
import fedpals_cost as FC
from fedpaper.papers.fedpals.ladder import LADDER
rate = {"cifar10": 4256.0, "fashion-mnist": 7690.0}
only = {"table1", "fig2c", "fig6b", "fig5c"}
for profile in sys.argv[1:]:
    tot_new = [0, 0.0, 0.0]
    for r in LADDER.rungs[profile][1]:
        t0 = time.time()
        p = FC.params(profile, overrides=copy.deepcopy(r.overrides) or None)
        res = FC.count(p, rate, only=only, data_root=None, quiet=True)
        n, steps, secs = res["total"]
        print(f"{profile} {r.name} {r.overrides or 'profile itself'}: {n} runs, {steps/1e6:.2f} M sample-steps, "
              f"~{secs:.0f} CPU s ({time.time()-t0:.0f} s to count)", flush=True)
