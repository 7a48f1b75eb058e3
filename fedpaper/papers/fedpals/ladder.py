"""FedPALS's compute ladder, the `fedpals/scaling` artifact (issue 29): claims 1, 4 (Table 1) and 6
(Fig. 2c) and Table 1's gap to the paper, rerun at >= 3 budgets of rounds x data.

Work of one run: rounds x the fraction of each partition kept (CIFAR-10; Fashion-MNIST is scaled
alike), the LeNet fixed: the training sample-steps of a run are proportional to it. The paper's
150 rounds on full partitions are 75x the quick/long run (150 x 1 / 20 x 0.1).

Rungs (overrides of the base profile, `RUNGS`; the same 3 seeds at every rung):

- quick (base quick): 1/16 (5 rounds, 2.5 %), 1/4 (10 rounds, 5 %), 1 (the quick profile): 16x.
- long (base long): 1/4 (10 rounds, 5 %), 1 (the long profile), 2.5 (25 rounds, 20 %): 10x.
- smoke: 1 round at 10 %, the smoke profile (2 rounds, 25 %), 4 rounds at 50 % (synthetic, seconds).

Cost (a run's training work scales with its rung's compute; the base is what the rung's artifact
functions train at the quick size: Table 1 + Figs. 2c, 6b, 5c (`accuracy_vs_shift` makes the three),
132 runs, 9.33 M training sample-steps, ~1,779 CPU s at 4,256 CIFAR-10 / 7,690 Fashion-MNIST
samples per CPU second, counted from the specs by benchmarks/results/fedpals_quick_cost.md):

- quick ladder: 3 x 132 = 396 runs, of which the top rung's 132 are the quick profile's own
  (cached when it ran with the same FEDPAPER_CACHE); new work (1/16 + 1/4) x 9.33 M = 2.9 M
  sample-steps, ~560 CPU s (~9 min) on one core.
- long ladder: 396 runs plus FedPALS' lambda grid (long's, same work per run); new work
  (1/4 + 5/2) x 9.33 M = 25.7 M sample-steps, ~4,890 CPU s (~82 min), on top of the long profile's
  ~63 min: about 2.4 h, inside long's 2.5 h on one core here.
"""
from __future__ import annotations

import numpy as np

from fedpaper.papers import fedpals as F
from fedpaper.papers import load_reported
from fedpaper.papers.fedpals import profiles as P
from fedpaper.papers.fedpals.claims import BASELINES, NON_ORACLE
from fedpaper.parameters import artifact_function
from fedpaper.papers.ladder import Ladder, Quantity, Rung, gap_to_paper, method_cells, run_ladder, seeds_of, worst

#: claim 4's margin as its check states it ("here: at least 10 points"; fedpals/claims.py)
WIDE = 10.0

RUNGS = {
    "smoke": ("smoke", (Rung("r1", {"rounds": 1, "data_fraction": 0.1}), Rung("r2"),
                        Rung("r3", {"rounds": 4, "data_fraction": 0.5}))),
    "quick": ("quick", (Rung("r1", {"rounds": 5, "data_fraction": 0.025}),
                        Rung("r2", {"rounds": 10, "data_fraction": 0.05}), Rung("r3"))),
    "long": ("long", (Rung("r1", {"rounds": 10, "data_fraction": 0.05}), Rung("r2"),
                      Rung("r3", {"rounds": 25, "data_fraction": 0.2}))),
}


def _rows(t):
    return [method_cells(t, dataset=d, label_split=s) for d, s in
            dict.fromkeys(zip(t["dataset"], t["label_split"]))]


def c1(tabs):
    """FedPALS minus the best other non-oracle method, the worst Table 1 row (claim 1)."""
    return worst([seeds_of(m["FedPALS"]) - np.max([seeds_of(m[k]) for k in NON_ORACLE if k in m and k != "FedPALS"],
                                                   axis=0) for m in _rows(tabs["table1"])])


def c4(tabs):
    """FedPALS minus FedAvg minus the claim's margin, the worst Table 1 row (claim 4)."""
    return worst([seeds_of(m["FedPALS"]) - seeds_of(m["FedAvg"]) - WIDE for m in _rows(tabs["table1"])])


def c6(tabs):
    """FedPALS minus the best baseline at C = 2 and 3 (Fig. 2c; claim 6), the worse of the two."""
    t = tabs["fig2c"]
    out = []
    for C in (2, 3):
        m = method_cells(t, C=C)
        if "FedPALS" in m:
            out.append(seeds_of(m["FedPALS"]) - np.max([seeds_of(m[k]) for k in BASELINES if k in m], axis=0))
    return worst(out)


def gap(tabs):
    return gap_to_paper(tabs["table1"], load_reported("fedpals/table1"))


def work(p: dict) -> float:
    return p["rounds"]["cifar10"] * p["data_fraction"].get("cifar10", 1.0)


LADDER = Ladder(
    paper="fedpals", functions=(F.table1, F.accuracy_vs_shift), rungs=RUNGS,
    quantities=(Quantity("claim 1: FedPALS - best other non-oracle (worst Table 1 row)", (1,), 1, c1),
                Quantity("claim 4: FedPALS - FedAvg - margin (worst Table 1 row)", (4,), 1, c4),
                Quantity("claim 6: FedPALS - best baseline at C = 2, 3 (Fig. 2c)", (6,), 1, c6),
                Quantity("Table 1: mean |ours - paper|", (), -1, gap)),
    settings=P.runs, work=work, work_unit="rounds x partition fraction", datasets=("fashion-mnist", "cifar10"))


@artifact_function
def scaling(*, profile="smoke", data_root=None, out_dir=None, seeds=None):
    """The `fedpals/scaling` artifact: the compute ladder (module docstring)."""
    return run_ladder(LADDER, profile=profile, data_root=data_root, out_dir=out_dir, seeds=seeds)
