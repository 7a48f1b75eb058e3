"""FedNCA-ML's compute ladder, the `fednca/scaling` artifact: claims 1/9 (FedNCA-ML's
class-wise margin over the second best, Table 1), 13 and 17 (the regularisers' gain, Tables 5 and 7),
the gaps to the paper, and the agreement of our method ordering with the paper's (Kendall tau,
item 5: where the ordering stabilises), rerun at >= 3 budgets of rounds x backbone width.

Work of one run: rounds x width^2 x training images x (input side / 32)^2 (a conv net's
multiply-adds grow with its width squared and its input area). The paper's ResNet-18 (width 32 at
224 px, 100 rounds, 3,100 singles per class) is counted with the same measure: an approximation
across backbones.

Rungs (`RUNGS`; the same 3 seeds and one partition seed at every rung):

- quick (base quick: 4 rounds, convnet width 16): 1/16 (1 round, width 8), 9/32 (2 rounds, width 12),
  1 (the quick profile): 16x.
- long (base long: 12 rounds, width 16): 1/2 (2 rounds), 3 (the long profile), 6.75 (12 rounds, width
  24): 13.5x, rounds and width.
- smoke: 1 round, the smoke profile (2 rounds, width 4), 4 rounds at width 8 (synthetic, seconds).

Cost: runs counted from the specs of Tables 1, 5, 7 at each rung (benchmarks/ladder_runs.py, no
training), their CPU time estimated as the quick profile's measured time x the rung's work / quick's
(a narrow net runs below its share of the multiply-adds on a CPU, a wide one may run above: measure
the top rung first). The rung equal to the profile reuses its cached runs. The estimates are kept
with the benchmark results.
"""
from __future__ import annotations

import numpy as np

from fedpaper.papers import fednca as FN
from fedpaper.claims.catalog import load_reported
from fedpaper.papers.fednca import profiles as P
from fedpaper.papers.fednca.claims import CENTRAL, FEDNCA, FULL, LADM, chance
from fedpaper.outputs.pipeline import artifact_function
from fedpaper.outputs.ladder import (GAP, TAU, Ladder, Quantity, Rung, as_cell, gap_to_paper, learned, method_cells,
                                    ladder_job, seeds_of, testable, worst)
from fedpaper.claims.rows import Missing

AUC = "macro-AUC"

RUNGS = {
    "smoke": ("smoke", (Rung("r1", {"rounds": 1}), Rung("r2"), Rung("r3", {"rounds": 4, "model.width": 8}))),
    "quick": ("quick", (Rung("r1", {"rounds": 1, "model.width": 8}), Rung("r2", {"rounds": 2, "model.width": 12}),
                        Rung("r3"))),
    "long": ("long", (Rung("r1", {"rounds": 2}), Rung("r2"), Rung("r3", {"model.width": 24}))),
}


def _betas(t):
    return sorted({float(b) for b in t["beta"]})


def c1(tabs):
    """FedNCA-ML's macro-AUC minus the best other learning federated method, the worse beta where
    FedNCA-ML learns (Table 1)."""
    t = tabs["table1"]
    t = t[t["metric"] == AUC]

    def row(b):
        def margin():
            m = method_cells(t, beta=b)
            others = [k for k in m if k not in (FEDNCA, CENTRAL)]
            m = learned(m, (FEDNCA,), chance(AUC), f"at beta={b:g}", others=others)
            return seeds_of(m[FEDNCA]) - np.max([seeds_of(m[k]) for k in others if k in m], axis=0)
        return margin
    return worst(testable(tabs, [(f"beta={b:g}", row(b)) for b in _betas(t)]))


def _gain(name):
    def gain(tabs):
        t = tabs[name]
        t = t[t["metric"] == AUC]
        v = {r["components"]: r for _, r in t.iterrows()}
        if FULL not in v or LADM not in v:
            raise Missing(f"{name}: the {FULL} and {LADM} rows")
        m = method_cells(t[t["components"].isin([FULL, LADM])].assign(method=t["components"]))
        learned(m, (FULL, LADM), chance(AUC), f"in {name}")
        return as_cell(seeds_of(m[FULL]) - seeds_of(m[LADM]))
    gain.__doc__ = f"The regularisers' macro-AUC gain, {FULL} minus {LADM} ({name})."
    return gain


def tau(tabs):
    """Per seed, Kendall's tau between our and the paper's macro-AUC ordering of Table 1's methods
    (both betas, the methods both tables have; mean over betas)."""
    from scipy.stats import kendalltau

    t, ref = tabs["table1"], load_reported("fednca/table1")
    t, ref = t[t["metric"] == AUC], ref[ref["metric"] == AUC]
    per_beta = []
    for b in _betas(t):
        ours = method_cells(t, beta=b)
        theirs = {r["method"]: float(r["mean"]) for _, r in ref[ref["beta"].astype(float) == b].iterrows()}
        common = sorted(k for k in ours if k in theirs and ours[k].seeds)
        if len(common) < 3:
            continue
        grid = np.vstack([seeds_of(ours[k]) for k in common])  # methods x seeds
        per_beta.append([kendalltau(grid[:, s], [theirs[k] for k in common])[0] for s in range(grid.shape[1])])
    if not per_beta:
        raise Missing("three methods shared with the paper")
    return as_cell(np.mean(np.asarray(per_beta, dtype=float), axis=0))


def _gap(name):
    def gap(tabs):
        return gap_to_paper(tabs[name], load_reported(f"fednca/{name}"), AUC)
    return gap


def work(p: dict) -> float:
    d = p["data"]["cifar10"]
    side = d.get("input_size", d.get("side", 32))
    images = d.get("singles", {}).get("train", 0) + d.get("n_train", 0) + d["pairs"]["train"]
    return p["rounds"] * p["model"]["width"] ** 2 * images * (side / 32) ** 2


LADDER = Ladder(
    paper="fednca", functions=(FN.table1, FN.table5, FN.table7), rungs=RUNGS,
    quantities=(Quantity("claims 1, 9: FedNCA-ML - best other, macro-AUC (Table 1, worse beta)", (1, 9), 1, c1),
                Quantity("claim 13: regularisers' macro-AUC gain (Table 5)", (13,), 1, _gain("table5")),
                Quantity("claim 17: regularisers' macro-AUC gain (Table 7)", (17,), 1, _gain("table7")),
                Quantity("Table 1: Kendall tau of the method ordering with the paper's", (), 1, tau, TAU),
                Quantity("Table 1: mean |ours - paper|, macro-AUC", (), -1, _gap("table1"), GAP),
                Quantity("Tables 5, 7: mean |ours - paper|, macro-AUC", (), -1,
                         lambda tabs: as_cell(np.mean([seeds_of(_gap(n)(tabs)) for n in ("table5", "table7")],
                                                      axis=0)), GAP)),
    settings=P.settings, work=work, work_unit="rounds x width^2 x training images x input area",
    datasets=("cifar10", "dermamnist"))


@artifact_function
def scaling(*, profile="smoke", data_root=None):
    """The `fednca/scaling` artifact: the compute ladder (module docstring)."""
    return ladder_job(LADDER, profile=profile, data_root=data_root)
