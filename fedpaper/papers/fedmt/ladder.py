"""FedMT's compute ladder, the `fedmt/scaling` artifact: claims 3 (Table 2: both FedMT
variants beat every baseline at every n) and 11 (Fig. 2b: FedMT beats SemiFL at every gamma), and
Table 2's gap to the paper, rerun at >= 3 budgets of rounds x data.

Work of one run: rounds x images per client x local epochs (the backbone fixed within a profile;
Single's epochs follow the rounds, 3 per round as in the profiles). The paper's ResNet-18 at 200
rounds x 4,000 images x 5 epochs is counted with the same measure (its backbone's larger cost per
image is not in it: the paper's compute is a lower bound).

Module name: `ladder` (the package already has an artifact function `scaling`, Figs. 2b/2c); the
artifact id is `fedmt/scaling` like every paper's ladder, its function `ladder_artifact`.

Rungs (`RUNGS`; the same 3 seeds at every rung; every rung has at least 2 rounds):

- quick (base quick: 2 rounds, 400 images per client): 1/10 (2 rounds, 40 images), 1/2 (2 rounds,
  200), 1 (the quick profile): 10x.
- long (base long: 6 rounds, 400): 1/12 (2 rounds, 100), 2/3 (4 rounds, 400: quick's size), 1 (the
  long profile): 12x.
- smoke: 1 round x 8 images, the smoke profile (2 x 24), 4 x 48 (synthetic, seconds).

Why 2 rounds at least: after one round FedMT (T), FedMT (E) and SemiFL gave the same score on every
seed in these profiles, so claims 3 and 11 would have a
margin of exactly 0 there by construction and it would enter their fits. `differ` leaves such a rung
out, and the rungs start at 2 rounds, where the methods differ.

Cost: benchmarks/ladder_runs.py counts each rung's runs; the rung equal to the profile reuses its
cached runs. The measured rung times are kept with the benchmark results.
"""
from __future__ import annotations

import numpy as np

from fedpaper.papers import fedmt as FM
from fedpaper.claims.catalog import load_reported
from fedpaper.papers.fedmt import profiles as P
from fedpaper.papers.fedmt.claims import ACC, BASE, E, T, chance
from fedpaper.outputs.pipeline import artifact_function
from fedpaper.outputs.ladder import (GAP, Ladder, Quantity, Rung, differ, gap_to_paper, learned, method_cells,
                                    ladder_job, seeds_of, testable, worst)


def _sized(rounds: int, spc: int) -> dict:
    return {"rounds": rounds, "single_rounds": 3 * rounds, "samples_per_client": spc}


RUNGS = {
    "smoke": ("smoke", (Rung("r1", {"rounds": 1, "single_rounds": 1, "samples_per_client": 8}), Rung("r2"),
                        Rung("r3", {"rounds": 4, "single_rounds": 4, "samples_per_client": 48}))),
    "quick": ("quick", (Rung("r1", _sized(2, 40)), Rung("r2", _sized(2, 200)), Rung("r3"))),
    "long": ("long", (Rung("r1", _sized(2, 100)), Rung("r2", _sized(4, 400)), Rung("r3"))),
}


def c3(tabs):
    """The worse FedMT variant minus the best learning baseline, the worst n where both FedMT
    variants learn (Table 2; claim 3)."""
    t = tabs["table2"]
    t = t[t["metric"] == ACC]

    def row(n):
        def margin():
            m = learned(method_cells(t, n=n), (T, E), chance(t, ACC), f"at n={n:g}", others=BASE)
            if "SemiFL" in m:
                for k in (T, E):
                    differ(m, k, "SemiFL", f"at n={n:g}")
            return (np.min([seeds_of(m[k]) for k in (T, E)], axis=0)
                    - np.max([seeds_of(m[k]) for k in BASE if k in m], axis=0))
        return margin
    return worst(testable(tabs, [(f"n={n:g}", row(n)) for n in sorted({float(x) for x in t["n"]})]))


def c11(tabs):
    """FedMT (E) minus SemiFL, the worst gamma of the label-skew rows where both learn (Fig. 2b;
    claim 11)."""
    t = tabs["fig2b"]
    t = t[(t["metric"] == ACC) & t["gamma"].notna()]

    def row(g):
        def margin():
            m = learned(method_cells(t, gamma=g), (E, "SemiFL"), chance(t, ACC), f"at gamma={g:g}")
            differ(m, E, "SemiFL", f"at gamma={g:g}")
            return seeds_of(m[E]) - seeds_of(m["SemiFL"])
        return margin
    return worst(testable(tabs, [(f"gamma={g:g}", row(g)) for g in sorted({float(x) for x in t["gamma"]})]))


def gap(tabs):
    return gap_to_paper(tabs["table2"], load_reported("fedmt/table2"), ACC)


def work(p: dict) -> float:
    return p["rounds"] * p["samples_per_client"] * p["local_epochs"]


LADDER = Ladder(
    paper="fedmt", functions=(FM.main, FM.scaling), rungs=RUNGS,
    quantities=(Quantity("claim 3: worse FedMT variant - best baseline (Table 2, worst n)", (3,), 1, c3),
                Quantity("claim 11: FedMT (E) - SemiFL (Fig. 2b, worst gamma)", (11,), 1, c11),
                Quantity("Table 2: mean |ours - paper|", (), -1, gap, GAP)),
    settings=P.settings, work=work, work_unit="rounds x images per client x local epochs", datasets=("cifar100",))


@artifact_function
def ladder_artifact(*, profile="smoke", data_root=None):
    """The `fedmt/scaling` artifact: the compute ladder (module docstring)."""
    return ladder_job(LADDER, profile=profile, data_root=data_root)


scaling = ladder_artifact  # the name every paper's ladder module gives its artifact function
