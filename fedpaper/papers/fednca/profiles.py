"""FedNCA-ML profile settings: smoke (synthetic stand-ins, seconds), quick (whole paper in about
30 min on this 2-core CPU), long (about 2.5 h) and paper (Sec. 5.2 as printed).

Sizing (benchmarks/results/fednca_backbones.md, measured at OMP_NUM_THREADS=1 on the shared
machine, noisy): the convnet w16 d64 backbone at 32 px trains about 495 images/s through the
engine (658 in a second measurement: +-25% noise; bf16 does not pay, +6%; ResNet-18 with the
CIFAR stem: about 9 images/s, so it is out of reach here). The quick
profile trains 38 runs (tables 1, 2, 5-8; shared rows are trained once) plus 6 feature-figure
models of 8 rounds x about 1,700-2,000 images: about 44 x 30 s = 22 min at 495 images/s. One
quick DermaMNIST FedNCA-ML run measured 70 s wall (13,776 images, 196 images/s) while other jobs
shared the 2 cores: under that load the quick profile takes about 50 min. Long: 2 seeds x 16
rounds x about 2,400 images (82 runs with the figure models), about 82 x 80 s = 1.8 h at 495
images/s (about 4.5 h under the load above): two seeds, so that each run trains twice as long as
with three (the quick models are far from converged). Quick runs reach only about 58-59% macro-AUC
(DermaMNIST FedNCA-ML; CIFAR-10 FedCurv, with macro-F1 0: every label predicted negative) after
8 rounds of a small CNN from scratch on 32 px composites: claims whose compared models sit near
chance are reported as not testable. quick and long are NOT the
paper's setting: every figure and provenance says so.
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

QUICK = {
    **BASE, "seeds": 1, "rounds": 8, "lr": 1e-3, "fisher_batches": 4,
    "model": {"backbone": "convnet", "width": 16, "dim": 64, "heads": 4, "etf_layout": "rotated",
              "logit_scale": 10.0, "bias": True, "pretrained": {"cifar10": False, "dermamnist": False}},
    "data": {"cifar10": {"singles": {"train": 150, "val": 20, "test": 50}, "pairs": {"train": 10, "val": 2, "test": 5},
                         "input_size": 32},
             "dermamnist": {"singles": {"train": 250, "val": 40, "test": 80}, "pairs": {"train": 15, "val": 3, "test": 6},
                            "input_size": 32}},
}
QUICK["notes"] = [
    "QUICK profile, not the paper's setting: small CNN backbone 'convnet w16 d64' (4 conv blocks, 4x4 grid of 16 "
    "tokens at 32 px) instead of ResNet-18, 8 rounds instead of 100, 1 seed instead of 3, lr 1e-3 instead of 1e-4",
    "composites shrunk: CIFAR-10 150 singles per class + 10 composites per class pair (train), DermaMNIST at most "
    "250 singles per class (the long tail is cut) + 15 per pair; canvases resized to 32 px",
    "random initialisation everywhere: the paper starts DermaMNIST from ImageNet weights, which are not available "
    "offline",
    "FedCurv's Fisher information from 4 minibatches per client; FedLGT not regenerated (needs CLIP text "
    "embeddings)",
]

LONG = copy.deepcopy(QUICK)
LONG.update({"seeds": 2, "rounds": 16})
LONG["data"] = {"cifar10": {"singles": {"train": 180, "val": 30, "test": 80}, "pairs": {"train": 12, "val": 3, "test": 8},
                            "input_size": 32},
                "dermamnist": {"singles": {"train": 300, "val": 60, "test": 120}, "pairs": {"train": 20, "val": 3,
                                                                                          "test": 8},
                               "input_size": 32}}
LONG["notes"] = [n.replace("QUICK", "LONG").replace("8 rounds", "16 rounds").replace("1 seed instead of 3", "2 seeds instead of 3")
                 .replace("150 singles", "180 singles").replace("+ 10 composites", "+ 12 composites")
                 .replace("250 singles", "300 singles").replace("+ 15 per pair", "+ 20 per pair") for n in QUICK["notes"]]

SMOKE = copy.deepcopy(QUICK)
SMOKE.update({"seeds": 1, "rounds": 2, "clients": 3, "fisher_batches": 1, "eval_batch": 256,
              "model": {**QUICK["model"], "width": 4, "dim": 16}})
SMOKE["data"] = {d: {"source": "synthetic", "num_classes": 4, "side": 8, "n_train": 12, "n_val": 4, "n_test": 6,
                     "singles": {}, "pairs": {"train": 2, "val": 1, "test": 2}} for d in ("cifar10", "dermamnist")}
SMOKE["settings"] = copy.deepcopy(BASE["settings"])
SMOKE["notes"] = ["SMOKE: synthetic 4-class stand-ins (8 px images in 16 px composites), 3 clients, 2 rounds"]

PROFILES = {"smoke": SMOKE, "quick": QUICK, "long": LONG, "paper": PAPER}


def settings(profile: str) -> dict:
    return copy.deepcopy(PROFILES[profile])


def backbone_name(p: dict) -> str:
    m = p["model"]
    if m["backbone"] == "convnet":
        return f"convnet w{m['width']} d{m['dim']}"
    return {"resnet18": "ResNet-18", "resnet18_cifar": "ResNet-18 (CIFAR stem)"}[m["backbone"]]


def subtitle(p: dict, dataset: str) -> str:
    pre = p["model"]["pretrained"][dataset] if isinstance(p["model"]["pretrained"], dict) else p["model"]["pretrained"]
    init = "ImageNet weights" if pre else "random init" + (" (paper: ImageNet weights)" if dataset != "cifar10" else "")
    return f"{p['profile']} profile: backbone {backbone_name(p)}, {init}, {p['rounds']} rounds, {len(p['seeds'])} seed(s)"
