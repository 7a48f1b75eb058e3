"""FedMT's compute ladder, the `fedmt/scaling` artifact (issue 29): claims 3 (Table 2: both FedMT
variants beat every baseline at every n) and 11 (Fig. 2b: FedMT beats SemiFL at every gamma), and
Table 2's gap to the paper, rerun at >= 3 budgets of rounds x data.

Work of one run: rounds x images per client x local epochs (the backbone fixed within a profile;
Single's epochs follow the rounds, 3 per round as in the profiles). The paper's ResNet-18 at 200
rounds x 4,000 images x 5 epochs is counted with the same measure (its backbone's larger cost per
image is not in it: the paper's compute is a lower bound).

Module name: `ladder` (the package already has an artifact function `scaling`, Figs. 2b/2c); the
artifact id is `fedmt/scaling` like every paper's ladder, its function `ladder_artifact`.

Rungs (`RUNGS`; the same 3 seeds at every rung):

- quick (base quick: 2 rounds, 400 images per client): 1/10.7 (1 round, 75), 1/2 (1 round, 400), 1
  (the quick profile): 10.7x.
- long (base long: 6 rounds, 400): 1/12 (1 round, 200), 2/3 (4 rounds, 400: quick's size), 1 (the
  long profile): 12x.
- smoke: 1 round x 8 images, the smoke profile (2 x 24), 4 x 48 (synthetic, seconds).

Cost (sized with the LeNet, session 12; session 16 moved quick and long to the BatchNorm convnet, about
3-5x the LeNet's CPU per run, and quick to 2 rounds: the README's profile table has the measured times):
runs counted from the specs of `main` and `scaling` at each rung (benchmarks/ladder_runs.py, no
training), CPU s = the quick profile's <= 1,200 s for these artifacts (the quick profile measured <=
20 min on one core in all, benchmarks/results/fedmt_sizing.md; an upper bound) x the rung's work / quick's:

| ladder | rung | runs | work (x quick) | ~CPU s |
|---|---|---|---|---|
| quick | r1 | 54 | 0.105 | <= 127 |
| quick | r2 | 54 | 0.422 | <= 506 |
| quick | r3 = quick | 48 | 1 | <= 1,200 |
| long | r1 | 120 | 0.312 | <= 375 |
| long | r2 | 114 | 2.38 | <= 2,850 |
| long | r3 = long | 114 | 3.56 | <= 4,275 (long measured <= 60 min in all) |

The rung equal to the profile reuses its cached runs: the quick ladder adds <= 630 CPU s (<= 11 min) to
the quick profile (<= 20 min); the long one <= 3,225 CPU s (<= 54 min) to the long profile (<= 60 min):
<= 1.9 h, inside 2.5 h.
"""
from __future__ import annotations

import numpy as np

from fedpaper.papers import fedmt as FM
from fedpaper.papers import load_reported
from fedpaper.papers.fedmt import profiles as P
from fedpaper.papers.fedmt.claims import ACC, BASE, E, T, chance
from fedpaper.parameters import artifact_function
from fedpaper.papers.ladder import (GAP, Ladder, Quantity, Rung, gap_to_paper, learned, method_cells, run_ladder,
                                    seeds_of, testable, worst)


def _sized(rounds: int, spc: int) -> dict:
    return {"rounds": rounds, "single_rounds": 3 * rounds, "samples_per_client": spc}


RUNGS = {
    "smoke": ("smoke", (Rung("r1", {"rounds": 1, "single_rounds": 1, "samples_per_client": 8}), Rung("r2"),
                        Rung("r3", {"rounds": 4, "single_rounds": 4, "samples_per_client": 48}))),
    "quick": ("quick", (Rung("r1", _sized(1, 75)), Rung("r2", _sized(1, 400)), Rung("r3"))),
    "long": ("long", (Rung("r1", _sized(1, 200)), Rung("r2", _sized(4, 400)), Rung("r3"))),
}


def c3(tabs):
    """The worse FedMT variant minus the best learning baseline, the worst n where both FedMT
    variants learn (Table 2; claim 3)."""
    t = tabs["table2"]
    t = t[t["metric"] == ACC]

    def row(n):
        def margin():
            m = learned(method_cells(t, n=n), (T, E), chance(t, ACC), f"at n={n:g}", others=BASE)
            return (np.min([seeds_of(m[k]) for k in (T, E)], axis=0)
                    - np.max([seeds_of(m[k]) for k in BASE if k in m], axis=0))
        return margin
    return worst(testable([(f"n={n:g}", row(n)) for n in sorted({float(x) for x in t["n"]})]))


def c11(tabs):
    """FedMT (E) minus SemiFL, the worst gamma of the label-skew rows where both learn (Fig. 2b;
    claim 11)."""
    t = tabs["fig2b"]
    t = t[(t["metric"] == ACC) & t["gamma"].notna()]

    def row(g):
        def margin():
            m = learned(method_cells(t, gamma=g), (E, "SemiFL"), chance(t, ACC), f"at gamma={g:g}")
            return seeds_of(m[E]) - seeds_of(m["SemiFL"])
        return margin
    return worst(testable([(f"gamma={g:g}", row(g)) for g in sorted({float(x) for x in t["gamma"]})]))


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
def ladder_artifact(*, profile="smoke", data_root=None, out_dir=None, seeds=None):
    """The `fedmt/scaling` artifact: the compute ladder (module docstring)."""
    return run_ladder(LADDER, profile=profile, data_root=data_root, out_dir=out_dir, seeds=seeds)


scaling = ladder_artifact  # the name every paper's ladder module gives its artifact function
