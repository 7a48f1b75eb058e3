"""privlabels' compute ladder, the `privlabels/scaling` artifact: claims 5 and 14 (central
tuning against adapted FedAvg/FedProx, private setting) and 9 (private ~ public for FedAvg and
FedProx), from Figs. 2 (CIFAR-10) and 3 (Fashion-MNIST), rerun at >= 3 budgets of rounds x data.

Work of one run: rounds x images per client x (last conv width)^2 (the CNN's multiply-adds grow with
its width squared); the server set keeps the paper's ratio to the clients' data at every rung
(`profiles.paper_ratio_server`), so central tuning scales with the rung too. The paper's 100 rounds x
2,000 images x width 64 are computed from its profile dict like every rung. The paper reports no
table for these figures: the quantities are the claims' margins only (no gap to the paper).

Rungs (`RUNGS`; the same 3 seeds at every rung):

- quick (base quick: 3 rounds, 100 images per client): 1/12 (1 round, 25), 1/2 (2 rounds, 75), 1 (the
  quick profile): 12x.
- long (base long: 10 rounds, 200 per client, CNN 8-8-16-16): the CNN's widths 4-4-8-8 (1/4), 8-8-16-16 (1, the
  long profile), 16-16-32-32 (4), at the long profile's rounds and data: 16x. Not rounds x data below
  the long profile: there every compared model is at chance on the lowest rung, so no trend can be
  classified, and a rung above the long profile is needed. Width is the paper's other axis of
  compute (its CNN is 32-32-64-64, 4x ours in width), and a wider CNN costs less CPU than the same
  nominal work in rounds (a grouped training step's time grows more slowly than its multiply-adds).
  The 4-4-8-8 CNN still learns CIFAR-10 at L = 10 (public FedAvg, 10 rounds x 200):
  `python -m fedpaper.papers.privlabels.probe --profile long --learn --set 'widths=[4,4,8,8]'`.
- smoke: 1 round x 8, the smoke profile (2 x 16), 4 x 32 (synthetic, seconds).

Cost: benchmarks/privlabels_ladder_cost.py counts the specs Figs. 2 and 3 build at each rung (the
unique runs of `runs.main_specs`, L = 10 shared, no training) and their CPU time at measured per-run
rates. The narrowest rung costs more than its share of multiply-adds: costs that do not scale with
the width dominate its runs. The counts and the measured rung times are kept with the benchmark
results.

The rung equal to the profile reuses its cached runs, so a ladder adds its other two rungs; the
long one adds more than long's time budget per paper, so it is made in pieces (README, compute
ladders).
"""
from __future__ import annotations

import numpy as np

from fedpaper.papers import privlabels as PL
from fedpaper.outputs.pipeline import artifact_function
from fedpaper.outputs.ladder import (Ladder, Quantity, Rung, as_cell, learned, method_cells, ladder_job, seeds_of,
                                    testable, worst)
from fedpaper.papers.privlabels import profiles as P
from fedpaper.papers.privlabels.claims import ADAPT, CHANCE, TUNE

#: claim 9's tolerance as its check states it ("within 3 points"; privlabels/claims.py)
CLOSE = 3.0


def _sized(rounds: int, spc: int) -> dict:
    return {"rounds": rounds, "samples_per_client": spc, "server_size": P.paper_ratio_server(spc)}


RUNGS = {
    "smoke": ("smoke", (Rung("r1", {"rounds": 1, "samples_per_client": 8}), Rung("r2"),
                        Rung("r3", {"rounds": 4, "samples_per_client": 32}))),
    "quick": ("quick", (Rung("r1", _sized(1, 25)), Rung("r2", _sized(2, 75)), Rung("r3"))),
    # long: the CNN's width halved and doubled, hidden 128 kept (why: the module docstring)
    "long": ("long", (Rung("r1", {"widths": [4, 4, 8, 8]}), Rung("r2"), Rung("r3", {"widths": [16, 16, 32, 32]}))),
}


def _acc(t, **key) -> dict:
    m = method_cells(t[t["metric"] == "accuracy"], **key)
    return {k: v.scaled(100) for k, v in m.items()}


def _Ls(t) -> list:
    return sorted({float(x) for x in t["labels_per_client"] if float(x) < 10})


def c5(tabs):
    """The worse tuning method minus the better learning adapted FedAvg/FedProx, CIFAR-10 private,
    the worst L < 10 where both tuning methods learn."""
    t = tabs["fig2"]

    def row(L):
        def margin():
            m = learned(_acc(t, setting="private", labels_per_client=L), TUNE, CHANCE, f"private at L={L:g}",
                        others=ADAPT)
            return (np.min([seeds_of(m[k]) for k in TUNE], axis=0)
                    - np.max([seeds_of(m[k]) for k in ADAPT if k in m], axis=0))
        return margin
    return worst(testable(tabs, [(f"L={L:g}", row(L)) for L in _Ls(t)]))


def c14(tabs):
    """The better learning tuning method minus adapted FedAvg at the smallest L, private, the worse
    data set."""
    def row(name):
        def margin():
            t = tabs[name]
            L = _Ls(t)[0]
            m = learned(_acc(t, setting="private", labels_per_client=L), ("FedAvg",), CHANCE,
                        f"{name} private at L={L:g}", others=TUNE)
            return np.max([seeds_of(m[k]) for k in TUNE if k in m], axis=0) - seeds_of(m["FedAvg"])
        return margin
    return worst(testable(tabs, [(name, row(name)) for name in ("fig2", "fig3")]))


def c9(tabs):
    """Claim 9's tolerance minus the largest |private - public| of FedAvg/FedProx over L and data
    sets, where both learn in both settings."""
    def row(name, L):
        def diff():
            t = tabs[name]
            pr = learned(_acc(t, setting="private", labels_per_client=L), ADAPT, CHANCE, f"{name} private at L={L:g}")
            pu = learned(_acc(t, setting="public", labels_per_client=L), ADAPT, CHANCE, f"{name} public at L={L:g}")
            return np.max([np.abs(seeds_of(pr[k]) - seeds_of(pu[k])) for k in ADAPT], axis=0)
        return diff
    diffs = testable(tabs, [(f"{name} L={L:g}", row(name, L)) for name in ("fig2", "fig3") for L in _Ls(tabs[name])])
    return as_cell(CLOSE - np.max(np.vstack(diffs), axis=0))


def work(p: dict) -> float:
    return p["rounds"] * p["samples_per_client"] * p["widths"][-1] ** 2


LADDER = Ladder(
    paper="privlabels", functions=(PL.accuracy_vs_labels,), rungs=RUNGS,
    quantities=(Quantity("claim 5: worse tuning - better adapted FedAvg/FedProx (CIFAR-10 private, worst L)", (5,), 1,
                         c5),
                Quantity("claim 14: better tuning - adapted FedAvg at the smallest L (worse data set)", (14,), 1, c14),
                Quantity("claim 9: tolerance - largest |private - public| of FedAvg/FedProx", (9,), 1, c9)),
    settings=P.settings, work=work, work_unit="rounds x images per client x width^2",
    datasets=("fashion-mnist", "cifar10"))


@artifact_function
def scaling(*, profile="smoke", data_root=None):
    """The `privlabels/scaling` artifact: the compute ladder (module docstring)."""
    return ladder_job(LADDER, profile=profile, data_root=data_root)
