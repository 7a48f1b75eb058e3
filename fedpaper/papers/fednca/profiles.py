"""FedNCA-ML profile settings: smoke (synthetic stand-ins, seconds), quick (whole paper in at most
20 min on ONE core of this CPU), long (at most 60 min on one core) and paper (Sec. 5.2 as printed).

Sizing (single runs timed on one core, OMP_NUM_THREADS=1, with benchmarks/size_fednca.py; the
timings are kept with the benchmark results):
- backbone "convnet w16 d64" at 32 px with BatchNorm after every conv (norm="batch"; the paper's
  ResNet-18 has BatchNorm too). Without it every method sits on a macro-AUC plateau for several
  rounds (it learns how many objects a canvas holds, not which) with macro-F1 0; with it the
  methods leave the plateau within the first rounds.
- lr 1e-3 (paper 1e-4, for ImageNet-initialised / 100-round ResNet-18 training): in short trials
  from scratch 1e-3 beat 1e-4 for FedAvg and FedNCA-ML on both data sets.
- cost: both profiles train 120 runs (38 distinct runs per seed x 3 seeds + 6 feature-figure
  models), each run's time proportional to its rounds; the rounds are as many as the profiles'
  one-core budgets allow (quick 4, long 12 of the paper's 100).
- quick and long train the same runs on the same data; quick is long with 4 rounds instead of 12.
quick and long are NOT the paper's setting: every figure and provenance says so (notes).
"""
from __future__ import annotations

import copy

BASE = {
    "seeds": 3, "clients": 10, "local_epochs": 1, "batch_size": 32, "lr": 1e-4, "weight_decay": 0.01,
    "betas": [0.9, 0.98], "lr_schedule": "warmup-linear", "bce": "mean", "tau": 0.3, "lam_pos": 1.0,
    "lam_neg": {"cifar10": 1.0, "dermamnist": 0.01}, "mu": 0.01, "fedcurv_lam": 0.01, "fisher_batches": None,
    "partition_seed": 0, "eval_every": 1, "eval_batch": 512,
    "settings": {"table1": {"dataset": "cifar10", "betas": [0.5, 0.1], "gamma": 0.5},
                 "table2": {"dataset": "dermamnist", "betas": [0.5, 0.1], "gamma": 0.71},
                 "table5": {"dataset": "dermamnist", "beta": 0.1, "gamma": 0.71},
                 "table6": {"dataset": "dermamnist", "beta": 0.1, "gamma": 0.71},
                 "table7": {"dataset": "cifar10", "beta": 0.5, "gamma": 0.5},
                 "table8": {"dataset": "cifar10", "beta": 0.5, "gamma": 0.5}},
}

PAPER = {
    **BASE, "rounds": 100,
    "model": {"backbone": "resnet18", "width": 32, "dim": 128, "heads": 4, "etf_layout": "rotated",
              "logit_scale": 10.0, "bias": True, "pretrained": {"cifar10": False, "dermamnist": True}},
    "data": {"cifar10": {"singles": {"train": 3100, "val": 100, "test": 800}, "pairs": {"train": 200, "val": 10, "test": 50},
                         "input_size": 224},
             "dermamnist": {"singles": {}, "pairs": {"train": 200, "val": 25, "test": 50}, "input_size": 224}},
    "notes": ["paper profile: ResNet-18 (ImageNet stem) at 224 px, 100 rounds, 3 seeds (Sec. 5.2)"],
}

LONG = {
    **BASE, "seeds": 3, "rounds": 12, "lr": 1e-3, "fisher_batches": 4,
    "model": {"backbone": "convnet", "width": 16, "dim": 64, "norm": "batch", "heads": 4, "etf_layout": "rotated",
              "logit_scale": 10.0, "bias": True, "pretrained": {"cifar10": False, "dermamnist": False}},
    "data": {"cifar10": {"singles": {"train": 150, "val": 20, "test": 50}, "pairs": {"train": 10, "val": 2, "test": 5},
                         "input_size": 32},
             "dermamnist": {"singles": {"train": 250, "val": 40, "test": 80}, "pairs": {"train": 15, "val": 3, "test": 6},
                            "input_size": 32}},
}


def _notes(profile: str, rounds: int) -> list:
    return [
        f"{profile} profile, not the paper's setting: small CNN backbone 'convnet w16 d64' with BatchNorm (4 conv "
        f"blocks, 4x4 grid of 16 tokens at 32 px) instead of ResNet-18, {rounds} rounds instead of 100, seeds 3 "
        "(paper: 3), lr 1e-3 instead of 1e-4 (in 8-round trials from scratch 1e-4 reached 58-64% macro-AUC, 1e-3 67-71%: "
        "benchmarks/results/fednca_sizing.md)",
        "composites shrunk: CIFAR-10 150 singles per class + 10 composites per class pair (train), DermaMNIST at most "
        "250 singles per class (the long tail is cut) + 15 per pair; canvases resized to 32 px",
        "random initialisation everywhere: the paper starts DermaMNIST from ImageNet weights, which are not available "
        "offline",
        "FedCurv's Fisher information from 4 minibatches per client; FedLGT not regenerated (needs CLIP text "
        "embeddings)",
    ]


LONG["notes"] = _notes("LONG", LONG["rounds"]) + [
    "12 of the paper's 100 rounds: the project allows the long profile 2.5 h, this session had 60 min of one core"]

QUICK = copy.deepcopy(LONG)
QUICK["rounds"] = 4
QUICK["notes"] = _notes("QUICK", QUICK["rounds"]) + ["quick = the long profile's runs with 4 rounds instead of 12"]

SMOKE = copy.deepcopy(QUICK)
SMOKE.update({"seeds": 1, "rounds": 2, "clients": 3, "fisher_batches": 1, "eval_batch": 256,
              "model": {**QUICK["model"], "width": 4, "dim": 16}})
del SMOKE["model"]["norm"]  # smoke checks the code paths with the plain backbone (and its cache keys)
SMOKE["data"] = {d: {"source": "synthetic", "num_classes": 4, "side": 8, "n_train": 12, "n_val": 4, "n_test": 6,
                     "singles": {}, "pairs": {"train": 2, "val": 1, "test": 2}} for d in ("cifar10", "dermamnist")}
SMOKE["settings"] = copy.deepcopy(BASE["settings"])
SMOKE["notes"] = ["SMOKE: synthetic 4-class stand-ins (8 px images in 16 px composites), 3 clients, 2 rounds"]

PROFILES = {"smoke": SMOKE, "quick": QUICK, "long": LONG, "paper": PAPER}


def settings(profile: str) -> dict:
    return copy.deepcopy(PROFILES[profile])


def where(p: dict) -> str:
    """Where the settings `p` (an artifact's, with its `profile`) come from, for an override's error line."""
    return f"the fednca {p['profile']} profile"


def backbone_name(p: dict) -> str:
    m = p["model"]
    if m["backbone"] == "convnet":
        return f"convnet w{m['width']} d{m['dim']}" + (" BatchNorm" if m.get("norm") == "batch" else "")
    return {"resnet18": "ResNet-18", "resnet18_cifar": "ResNet-18 (CIFAR stem)"}[m["backbone"]]


def subtitle(p: dict, dataset: str) -> str:
    pre = p["model"]["pretrained"][dataset] if isinstance(p["model"]["pretrained"], dict) else p["model"]["pretrained"]
    init = "ImageNet weights" if pre else "random init" + (" (paper: ImageNet weights)" if dataset != "cifar10" else "")
    return f"{p['profile']} profile: backbone {backbone_name(p)}, {init}, {p['rounds']} rounds, {len(p['seeds'])} seed(s)"
