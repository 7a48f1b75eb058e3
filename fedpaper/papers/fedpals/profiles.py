"""The smoke, quick, long and paper profiles of the FedPALS artifacts (targets/fedpals.md sections 2, 4).

`RUNS[profile]` holds the training setting shared by every Fashion-MNIST/CIFAR-10 run; each
artifact adds its own grid. `NOTES[profile]` lists every shrinkage relative to the paper; it goes
into each artifact's provenance and its figure's subtitle.

Sizing (measured, not guessed). The paper trains 150 rounds on partitions of ~2,000-6,000
images per client (about 14,000 SGD steps per client), far beyond a CPU budget. Both scaled-down
profiles keep a common fraction of every partition (`data_fraction`,
`fedpaper.blocks.partition.thin_partition`: client sizes keep their ratios, T(Y) is kept) and 20 rounds:
CIFAR-10 10 % (200-500 images per client), Fashion-MNIST 10 %: the smallest sizes at which the models
still learn (measured in short probe runs, kept with the benchmark results).

- quick: every artifact and claim; all 7 Table 1 methods and rows; FedPALS lambda = 0 only;
  curves at C in {2, 3, 10}, beta in {0.1, 10}; Fig 7 and the curves with FedPALS, FedAvg,
  Oracle; Fig 8b E in {1, 20}, Fig 8c 10 and 100 clients. Its runs are a SUBSET of long's (same
  per-run settings: every quick spec is a long spec), so after, or alongside with the same
  FEDPAPER_CACHE, a long sweep it costs nothing.
- long: quick plus the paper's lambda grid {0, lambda_25, lambda_50, lambda_75} (vague-8)
  everywhere, Fig 8b E = 5, Fig 8c 50 clients.
A profile's cost is its training sample-steps (every distinct run's images x local epochs x
participation x rounds, counted from its specs: benchmarks/fedpals_cost.py) at the CPU's measured
samples per second; `fedpaper plan` prints it.
"""
from __future__ import annotations

import copy

_HYPER = {"mu": 0.01, "fedrs_alpha": 0.5, "afl_step": 0.01}  # vague-9
_C2 = {"fashion-mnist": 12, "cifar10": 16}  # vague-4

# Per-method local learning rates replacing `lr` (vague-5: "check on a validation set that it trains
# stably, and fall back to 0.01 if it does not"). SCAFFOLD's control variates add K_i * lr * (c - c_i)
# to a client's model in a round of K_i local steps (Karimireddy et al. 2020, Alg. 1 line 10; their
# analysis takes the local step size ~ 1 / K): at the paper's full partitions (K_i ~ 100-190 steps)
# lr 0.1 turned every Fashion-MNIST SCAFFOLD run non-finite within a few rounds, at lr 0.01 it trains.
# The scaled-down profiles (K_i ~ 10-19) keep 0.1.
_PAPER_METHOD_LR = {"SCAFFOLD": 0.01}

PAPER_SEEDS = 8  # vague-13
# The paper profile trains 3 of the paper's 8 seeds: its Table 1 (5 rows x 7 methods, the lambda
# grid, 150 rounds, full partitions) is then 140 runs, 625 M training sample-steps, many hours of
# one CPU core (`fedpaper plan` estimates them), run in pieces with --max-hours and
# `fedpaper cache export/import` (README, Profiles). Set RUNS["paper"]["seeds"] = 8 for all eight.
PAPER_PROFILE_SEEDS = 3

RUNS = {
    "paper": {  # the paper's settings, 3 of its 8 seeds (PAPER_PROFILE_SEEDS)
        "num_clients": 10, "seeds": PAPER_PROFILE_SEEDS, "rounds": {"fashion-mnist": 150, "cifar10": 150},  # vague-1, -6, -13
        "data_fraction": {}, "test_n": None, "lr": 0.1, "batch_size": 32, "lenet_c2": _C2,  # vague-5
        "method_lr": _PAPER_METHOD_LR, "ess_grid": [0.25, 0.5, 0.75], "hyper": _HYPER, "eval_every": 1,  # vague-8, -19
    },
    "quick": {
        "num_clients": 10, "seeds": 3, "rounds": {"fashion-mnist": 20, "cifar10": 20},
        "data_fraction": {"fashion-mnist": 0.1, "cifar10": 0.1}, "test_n": 500, "lr": 0.1, "batch_size": 32,
        "lenet_c2": _C2, "ess_grid": [], "hyper": _HYPER, "eval_every": 1,
    },
    "long": {
        "num_clients": 10, "seeds": 3, "rounds": {"fashion-mnist": 20, "cifar10": 20},
        "data_fraction": {"fashion-mnist": 0.1, "cifar10": 0.1}, "test_n": 500, "lr": 0.1, "batch_size": 32,
        "lenet_c2": _C2, "ess_grid": [0.25, 0.5, 0.75], "hyper": _HYPER, "eval_every": 1,
    },
    "smoke": {
        "num_clients": 10, "seeds": 2, "rounds": {"fashion-mnist": 2, "cifar10": 2},
        "data_fraction": {"fashion-mnist": 0.25, "cifar10": 0.25}, "test_n": 60, "lr": 0.1, "batch_size": 32,
        "lenet_c2": _C2, "ess_grid": [], "hyper": _HYPER, "eval_every": 1,
        "table1_rows": [["fashion-mnist", "C=3"], ["cifar10", "beta=0.1"]],
        "stand_ins": {
            "fashion-mnist": {"num_classes": 10, "n_train": 1000, "n_test": 200, "shape": [1, 16, 16], "seed": 0},
            "cifar10": {"num_classes": 10, "n_train": 1000, "n_test": 200, "shape": [3, 16, 16], "seed": 1},
        },
    },
}

# Per-artifact grids. C grids: vague-12; beta grid: vague-11; E grid: vague-7; clients: vague-12.
GRIDS = {
    "paper": {
        "shift_C": [2, 3, 4, 5, 6, 7, 8, 9, 10], "shift_beta": [0.1, 0.2, 0.5, 1.0, 10.0],
        "shift_methods": ["FedPALS", "FedAvg", "FedProx", "SCAFFOLD", "AFL", "FedRS", "Oracle"],
        "fig7_methods": ["FedPALS", "FedAvg", "FedProx", "SCAFFOLD", "AFL", "FedRS", "Oracle"],
        "fig8_methods": ["FedPALS", "FedAvg", "FedProx", "SCAFFOLD"], "fig8a_C": [2, 3, 10],
        "fig8a_clients": 100, "fig8b_E": [1, 2, 5, 10, 20, 40], "fig8c_clients": [10, 20, 50, 100],
        "marginal_seeds": 8, "marginal_C": [2, 3, 4, 5, 6, 7, 8, 9, 10], "marginal_beta": [0.1, 0.2, 0.5, 1.0, 10.0],
    },
    "quick": {
        "shift_C": [2, 3, 10], "shift_beta": [0.1, 10.0],
        "shift_methods": ["FedPALS", "FedAvg", "Oracle"],
        "fig7_methods": ["FedPALS", "FedAvg", "Oracle"],
        "fig8_methods": ["FedPALS", "FedAvg", "FedProx", "SCAFFOLD"], "fig8a_C": [2, 3, 10],
        "fig8a_clients": 100, "fig8b_E": [1, 20], "fig8c_clients": [10, 100],
        "marginal_seeds": 8, "marginal_C": [2, 3, 4, 5, 6, 7, 8, 9, 10], "marginal_beta": [0.1, 0.2, 0.5, 1.0, 10.0],
    },
    "smoke": {
        "shift_C": [2, 10], "shift_beta": [0.5, 10.0], "shift_methods": ["FedPALS", "FedAvg"],
        "fig7_methods": ["FedPALS", "FedAvg", "Oracle"], "fig8_methods": ["FedPALS", "FedAvg"],
        "fig8a_C": [2, 10], "fig8a_clients": 20, "fig8b_E": [1, 2], "fig8c_clients": [10, 20],
        "marginal_seeds": 2, "marginal_C": [2, 5, 10], "marginal_beta": [0.1, 10.0],
    },
}
# long = quick plus Fig 8b E = 5 and Fig 8c 50 clients (its runs include all of quick's).
GRIDS["long"] = dict(GRIDS["quick"], fig8b_E=[1, 5, 20], fig8c_clients=[10, 50, 100])

PAPER_ROUNDS = 150  # vague-6
PAPER_ESS = [0.25, 0.5, 0.75]  # vague-8
_NAMES = {"fashion-mnist": "Fashion-MNIST", "cifar10": "CIFAR-10"}


def _pct(f: float) -> str:
    return f"{100 * f:g}%"


def shrink_notes(profile: str) -> list[str]:
    """Every shrinkage of a profile's image runs relative to the paper, from its settings."""
    r = RUNS[profile]
    out = [f"{profile} profile (2-core CPU): {r['seeds']} seeds (paper {PAPER_SEEDS})"] if r["seeds"] != PAPER_SEEDS else []
    rounds = sorted(set(r["rounds"].values()))
    if rounds != [PAPER_ROUNDS]:
        out.append("/".join(map(str, rounds)) + f" rounds instead of {PAPER_ROUNDS} (vague-6)")
    fr = r["data_fraction"]
    if fr:
        out.append("each partition (clients and target) keeps "
                   + ", ".join(f"{_pct(fr[d])} ({_NAMES[d]})" for d in fr)
                   + " of its images of every label: client sizes keep their ratios (FedAvg n_i/N), "
                     "T(Y) and every client's label marginal are kept up to rounding")
    if r["test_n"] is not None:
        out.append(f"target test set capped at {r['test_n']} images resampled to T(Y)")
    if not r["ess_grid"]:
        out.append("FedPALS lambda = 0 only (eq. 8), not chosen on validation from {0, lambda_25, lambda_50, "
                   "lambda_75} (vague-8; the long profile has the grid)")
    elif r["ess_grid"] != PAPER_ESS:
        lam = ", ".join(f"lambda_{round(100 * f)}" for f in r["ess_grid"])
        out.append(f"FedPALS lambda grid {{0, {lam}}} instead of {{0, lambda_25, lambda_50, lambda_75}} (vague-8)")
    for m, lr in (r.get("method_lr") or {}).items():
        out.append(f"{m} local lr {lr:g} instead of {r['lr']:g} (vague-5: {r['lr']:g} does not train it stably at "
                   "full partitions)")
    return out


NOTES = {
    "paper": shrink_notes("paper"),
    "quick": shrink_notes("quick"),
    "long": shrink_notes("long"),
    "smoke": ["SMOKE: synthetic 16x16 stand-in images, 2 seeds, 2 rounds, 25% of each partition, FedPALS lambda=0 "
              "only, Table 1 rows FMNIST C=3 and CIFAR-10 beta=0.1 only; not a result"],
}


def _grid_notes(profile: str) -> dict:
    g, r = GRIDS[profile], RUNS[profile]
    base = r["rounds"]["cifar10"]
    es = ", ".join(map(str, g["fig8b_E"]))
    return {
        "shift": f"curves: C in {{{', '.join(map(str, g['shift_C']))}}}, beta in "
                 f"{{{', '.join(f'{b:g}' for b in g['shift_beta'])}}}; methods {', '.join(g['shift_methods'])} "
                 "(all Table 1 methods at the Table 1 points)",
        "fig7": "methods " + ", ".join(g["fig7_methods"]),
        "fig8": f"Fig 8b: E in {{{es}}} with rounds = {base} / E (paper: E up to 40 with 150 / E rounds); "
                f"Fig 8c: {', '.join(map(str, g['fig8c_clients']))} training clients; Fig 8a lambda = 1000 x "
                f"{r['data_fraction'].get('cifar10', 1):g} (eq. 9's penalty is unchanged when every n_i shrinks by "
                "the data fraction)",
    }


GRID_NOTES = {"quick": _grid_notes("quick"), "long": _grid_notes("long")}


#: Fig 9 set-up, App. B.4 (l.411-422) and A.5 line by line: 3 classes, N(mu_y, I), the printed means
#: (A.5), S_1/S_2 and n = (40, 18), T_delta, n_test = 2000 from T_delta (l.422): data.synthetic.
#: Logistic regression (Sec. 5, l.194). E = 1 (l.194: "the number of local epochs E=1 across all
#: experiments"); batch 64 > both clients' sizes, so one full-batch GD step per round. Not in the
#: paper, vague-18 defaults: lr 0.1, 100 rounds, 500 validation points, delta grid 0..1, 5 runs
#: (Fig 9 caption: 5 independent runs). Fixed against the earlier runs: features standardised
#: (`geometry.standardise_task`, vague-22 as for every data set); lambda tuned on validation
#: (l.194) from a grid that is not empty (`geometry.fig9_lambdas`). Every profile but smoke is the
#: paper's scale (quick = long = paper).
FIG9 = {
    "paper": {"deltas": [round(0.1 * i, 1) for i in range(11)], "seeds": 5, "rounds": 100, "n_test": 2000,
              "n_val": 500, "lr": 0.1, "batch_size": 64, "ess_range": [0.25, 0.5, 0.75], "standardise": True},
    "smoke": {"deltas": [0.0, 0.5, 1.0], "seeds": 2, "rounds": 10, "n_test": 200, "n_val": 100, "lr": 0.1,
              "batch_size": 64, "ess_range": [0.5], "standardise": True},
}
FIG9["quick"] = FIG9["paper"]
FIG9["long"] = FIG9["paper"]


def settings(profile: str, section: str | None = None, group: str | None = None) -> dict:
    """A profile's settings: those of the image data sets (`runs`, `grid` and the notes of
    `section`), of Fig 9's synthetic Gaussians (group "fig9": FIG9), or of the real-data `group`
    ("pacs", "iwildcam": fedpals.real.profile)."""
    if group == "fig9":
        return copy.deepcopy(FIG9[profile])
    if group is not None:
        from fedpaper.papers.fedpals import real  # start-up time: torch, imported when a real-data group is asked for

        return real.profile(group, profile)
    p = runs(profile)
    p.update(grid(profile))
    p["notes"] = notes(profile, section)
    return p


def runs(profile: str) -> dict:
    return copy.deepcopy(RUNS[profile])


def grid(profile: str) -> dict:
    return copy.deepcopy(GRIDS[profile])


def notes(profile: str, section: str | None = None) -> list[str]:
    out = list(NOTES[profile])
    extra = GRID_NOTES.get(profile, {}).get(section)
    return out + ([extra] if extra else [])
