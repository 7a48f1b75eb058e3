"""The smoke, quick and paper profiles of the private-label-sets artifacts (targets/privlabels.md).

`SETTINGS[profile]` holds everything a run needs (data, partition, model, training, grids);
`NOTES[profile]` lists every shrinkage relative to the paper: it goes into each artifact's
provenance (info["notes"]) and, shortened, into the figure subtitle (`subtitle`).

The paper profile is the paper's setting (App A, Tables 1-2) with the targets file's defaults
where it is vague: m = 10 clients (vague-1), the Keras-like CNN 32-32-64-64 / 512 (vague-2),
global stratified 80/20 split (vague-3), 5,000 / 6,000 unlabeled server images (vague-4), Adam
lr 1e-3, batch 64, E = 1, 100 rounds, FedProx mu 0.01, FedRS alpha 0.5, 3 tuning epochs per
round, 10 seeds (3 for the epoch ablation, vague-13), L = 2..10 (vague-15).
"""
from __future__ import annotations

import copy

PAPER_L = [2, 3, 4, 5, 6, 7, 8, 9, 10]  # vague-15

_PAPER = {
    "num_clients": 10,  # vague-1
    "samples_per_client": 2000,  # Sec 5.1 / App A
    "val_fraction": 0.2,  # vague-3
    "server_size": {"cifar10": 5000, "fashion-mnist": 6000},  # vague-4
    "val_eval": None, "test_eval": None,  # None: the whole validation split / official test set
    "widths": [32, 32, 64, 64], "hidden": 512, "dropout": 0.5,  # vague-2
    "optimizer": "adam", "lr": 1e-3, "batch_size": 64, "local_epochs": 1, "rounds": 100,  # Table 2
    "mu": 0.01, "fedrs_alpha": 0.5, "tuning_epochs": 3,  # Table 2, App A
    "seeds": 10, "labels": PAPER_L,
    "pairwise_all_labels": PAPER_L,  # vague-7: the all-pairs variant at every L
    "epochs": {"E": [1, 3, 5], "labels": PAPER_L, "fig11_L": 5, "seeds": 3, "rounds": 100,
               "tuning_optimizer": "sgd", "tuning_lr": 1e-3},  # vague-13
    "rounds_L": 5,  # vague-12
    "eval_batch": 1024,
    "share_L10": False,
    # run the L = 10 identities (private = public FedAvg, FedRS = FedAvg) as real runs (checks)
    "backend": "auto",  # engine backend: speed only, never results
}

_QUICK = dict(
    _PAPER,
    samples_per_client=200,
    server_size={"cifar10": 64, "fashion-mnist": 64},
    val_eval=200, test_eval=400,
    widths=[8, 8, 16, 16], hidden=128,
    batch_size=16,  # a first quick run with batch 64 (2 steps per round at 100 images) stayed near chance
    rounds=10, seeds=3, labels=[2, 3, 5, 10],
    pairwise_all_labels=[2],  # where a label held by no client is likely (App B)
    epochs={"E": [1, 3, 5], "labels": [2, 5], "fig11_L": 5, "seeds": 2, "rounds": 4,
            "tuning_optimizer": "sgd", "tuning_lr": 1e-3},
    eval_batch=256,
    share_L10=True,
    backend="grouped",  # the fastest backend for this small CNN on the 2-core CPU (engine benchmark)
)

_SMOKE = dict(
    _QUICK,
    samples_per_client=16,
    server_size={"cifar10": 32, "fashion-mnist": 32},
    val_eval=40, test_eval=60,
    widths=[2, 2, 4, 4], hidden=16,
    rounds=2, seeds=2, labels=[3, 5],
    pairwise_all_labels=[5],
    epochs={"E": [1, 3], "labels": [3, 5], "fig11_L": 5, "seeds": 2, "rounds": 2,
            "tuning_optimizer": "sgd", "tuning_lr": 1e-3},
    stand_ins={
        "fashion-mnist": {"num_classes": 10, "n_train": 600, "n_test": 100, "shape": [1, 16, 16], "seed": 0},
        "cifar10": {"num_classes": 10, "n_train": 600, "n_test": 100, "shape": [3, 16, 16], "seed": 1},
    },
)

SETTINGS = {"paper": _PAPER, "quick": _QUICK, "smoke": _SMOKE}


def _shrinkage(p: dict) -> list[str]:
    """Every difference from the paper profile, in words."""
    q, notes = _PAPER, []
    if p["samples_per_client"] != q["samples_per_client"]:
        notes.append(f"{p['samples_per_client']} samples per client instead of 2,000")
    if p["server_size"] != q["server_size"]:
        notes.append("unlabeled server set " + ", ".join(f"{k} {v}" for k, v in p["server_size"].items())
                     + " instead of 5,000 (CIFAR-10) / 6,000 (Fashion-MNIST)")
    if p["val_eval"] or p["test_eval"]:
        notes.append(f"snapshot selection on a random {p['val_eval']}-image subset of the 20% validation split, "
                     f"test accuracy on a random {p['test_eval']}-image subset of the official test set (per seed)")
    if (p["widths"], p["hidden"]) != (q["widths"], q["hidden"]):
        notes.append(f"CNN widths {tuple(p['widths'])}, hidden {p['hidden']} instead of (32, 32, 64, 64), 512")
    if p["batch_size"] != q["batch_size"]:
        steps = -(-p["samples_per_client"] // 64)
        notes.append(f"batch {p['batch_size']} instead of 64 for local training and central tuning (with "
                     f"{p['samples_per_client']} images per client, batch 64 gives {steps} steps per round; a first "
                     "quick run with 100 images per client, batch 64 and 8 rounds left every method near chance)")
    if p["rounds"] != q["rounds"]:
        notes.append(f"{p['rounds']} rounds instead of 100")
    if p["seeds"] != q["seeds"]:
        notes.append(f"{p['seeds']} seeds instead of 10")
    if p.get("share_L10"):
        notes.append("at L = 10 private FedAvg/tuning and FedRS reuse the public FedAvg/tuning run of the seed "
                     "(identical by definition: every client holds every label)")
    if p["labels"] != q["labels"]:
        notes.append(f"L in {{{', '.join(map(str, p['labels']))}}} instead of 2..10")
    if p["pairwise_all_labels"] != q["pairwise_all_labels"]:
        pa = p["pairwise_all_labels"]
        notes.append("all-pairs pairwise tuning (vague-7) " + (f"only at L in {pa}" if pa else "not run"))
    e, qe = p["epochs"], q["epochs"]
    if e != qe:
        notes.append(f"epoch ablation: E in {e['E']}, L in {e['labels']}, {e['seeds']} seeds, {e['rounds']} rounds "
                     f"(paper: E in {qe['E']}, L 2..10, 3 seeds, 100 rounds)")
    return notes


NOTES = {
    "paper": [],
    "quick": ["quick profile (2-core CPU): " + n for n in _shrinkage(_QUICK)],
    "smoke": ["SMOKE: synthetic 16x16 stand-in images; not a result"] + _shrinkage(_SMOKE),
}


def settings(profile: str) -> dict:
    """A deep copy of the profile's settings, with its notes."""
    p = copy.deepcopy(SETTINGS[profile])
    p["notes"] = list(NOTES[profile])
    return p


def subtitle(p: dict, epochs: bool = False) -> str:
    """One line of shrinkage for a figure (empty at the paper profile)."""
    if p.get("profile") == "paper":
        return ""
    e = p["epochs"]
    parts = [f"{p['profile']} profile: m={p['num_clients']}, {p['samples_per_client']}/client, batch {p['batch_size']}",
             f"server set {next(iter(p['server_size'].values()))}",
             f"CNN {'-'.join(map(str, p['widths']))}/{p['hidden']}"]
    n = lambda s: len(s) if isinstance(s, list) else s  # noqa: E731
    if epochs:
        parts += [f"{e['rounds']} rounds", f"{n(e['seeds'])} seeds", "SGD tuning"]
    else:
        parts += [f"{p['rounds']} rounds", f"{n(p['seeds'])} seeds"]
    if p.get("test_eval"):
        parts.append(f"val/test subsets {p['val_eval']}/{p['test_eval']}")
    return "; ".join(parts) + " (paper: 2000/client, batch 64, 32-32-64-64/512, 100 rounds, 10 seeds)"
