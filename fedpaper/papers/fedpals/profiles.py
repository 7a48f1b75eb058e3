"""The smoke, quick and paper profiles of the FedPALS artifacts (targets/fedpals.md sections 2, 4).

`RUNS[profile]` holds the training setting shared by every Fashion-MNIST/CIFAR-10 run; each
artifact adds its own grid. `NOTES[profile]` lists every shrinkage relative to the paper; it goes
into each artifact's provenance and its figure's subtitle.
"""
from __future__ import annotations

import copy

_HYPER = {"mu": 0.01, "fedrs_alpha": 0.5, "afl_step": 0.01}  # vague-9
_C2 = {"fashion-mnist": 12, "cifar10": 16}  # vague-4

RUNS = {
    "paper": {
        "num_clients": 10, "seeds": 8, "rounds": {"fashion-mnist": 150, "cifar10": 150},  # vague-1, -6, -13
        "per_client": {}, "test_n": None, "lr": 0.1, "batch_size": 32, "lenet_c2": _C2,  # vague-5
        "ess_grid": [0.25, 0.5, 0.75], "hyper": _HYPER, "eval_every": 1,  # vague-8, -19
    },
    "quick": {
        "num_clients": 10, "seeds": 3, "rounds": {"fashion-mnist": 15, "cifar10": 15},
        "per_client": {"fashion-mnist": 90, "cifar10": 48}, "test_n": 300, "lr": 0.1, "batch_size": 32,
        "lenet_c2": _C2, "ess_grid": [0.5], "hyper": _HYPER, "eval_every": 1,
    },
    "smoke": {
        "num_clients": 10, "seeds": 2, "rounds": {"fashion-mnist": 2, "cifar10": 2},
        "per_client": {"fashion-mnist": 24, "cifar10": 24}, "test_n": 60, "lr": 0.1, "batch_size": 32,
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
        "fig7_methods": ["FedPALS", "FedAvg", "FedProx", "Oracle"],
        "fig8_methods": ["FedPALS", "FedAvg", "FedProx", "SCAFFOLD"], "fig8a_C": [2, 3, 10],
        "fig8a_clients": 100, "fig8b_E": [1, 5, 15], "fig8c_clients": [10, 100],
        "marginal_seeds": 8, "marginal_C": [2, 3, 4, 5, 6, 7, 8, 9, 10], "marginal_beta": [0.1, 0.2, 0.5, 1.0, 10.0],
    },
    "smoke": {
        "shift_C": [2, 10], "shift_beta": [0.5, 10.0], "shift_methods": ["FedPALS", "FedAvg"],
        "fig7_methods": ["FedPALS", "FedAvg", "Oracle"], "fig8_methods": ["FedPALS", "FedAvg"],
        "fig8a_C": [2, 10], "fig8a_clients": 20, "fig8b_E": [1, 2], "fig8c_clients": [10, 20],
        "marginal_seeds": 2, "marginal_C": [2, 5, 10], "marginal_beta": [0.1, 10.0],
    },
}

NOTES = {
    "paper": [],
    "quick": [
        "quick profile (2-core CPU): 3 seeds instead of 8",
        "15 rounds instead of 150 (vague-6)",
        "each client and the target partition capped at 90 (Fashion-MNIST) / 48 (CIFAR-10) training images "
        "(sparsity: cap // C per label; Dirichlet: cap per partition)",
        "target test set capped at 300 images resampled to T(Y)",
        "FedPALS lambda grid {0, lambda_50} instead of {0, lambda_25, lambda_50, lambda_75} (vague-8)",
    ],
    "smoke": ["SMOKE: synthetic 16x16 stand-in images, 2 seeds, 2 rounds, 24 images per client, FedPALS lambda=0 "
              "only, Table 1 rows FMNIST C=3 and CIFAR-10 beta=0.1 only; not a result"],
}

GRID_NOTES = {
    "quick": {
        "shift": "curves: C in {2, 3, 10}, beta in {0.1, 10}; methods FedPALS, FedAvg, Oracle only "
                 "(all Table 1 methods at the Table 1 points)",
        "fig7": "methods FedPALS, FedAvg, FedProx, Oracle only",
        "fig8": "Fig 8b: E in {1, 5, 15} with rounds = 15 / E (E=15: one round, the quick analogue of E=40); "
                "Fig 8c: 10 and 100 training clients; Fig 8a lambda rescaled to the capped client size "
                "(1000 x 48 / (50000/101))",
    },
}


def runs(profile: str) -> dict:
    return copy.deepcopy(RUNS[profile])


def grid(profile: str) -> dict:
    return copy.deepcopy(GRIDS[profile])


def notes(profile: str, section: str | None = None) -> list[str]:
    out = list(NOTES[profile])
    extra = GRID_NOTES.get(profile, {}).get(section)
    return out + ([extra] if extra else [])
