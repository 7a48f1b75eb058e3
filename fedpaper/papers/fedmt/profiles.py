"""The smoke, quick, long and paper profiles of the FedMT artifacts (targets/fedmt.md sections 2 and 4).

`settings(profile)` holds everything a run needs; `notes(profile)` lists every difference from the
paper (provenance, figure footnotes). Sizing: on a 2-core CPU the Table 5 ResNet-18 trains far too
slowly (benchmarks/fedmt_backbones.py measures it), so quick and long use a small BatchNorm convnet
(blocks.nets.resnet.BNConvNet, chosen at equal CPU seconds by benchmarks/fedmt_backbone_study.py)
and smoke a LeNet-size CNN, the same for every method, named on every figure. With BatchNorm,
SemiFL/FedMT's static BN recomputes its statistics as in the paper; without it (smoke) it has
nothing to recompute (noted). ImageNet weights are not available offline: every profile here runs
from random initialisation (Table 2's baselines use ImageNet weights in the paper; Table 6's
random-init column is the paper's number to compare them with).
"""
from __future__ import annotations

import copy

from fedpaper.blocks.models import build_model, has_batchnorm

PAPER_N = [5, 10, 15, 20, 25]

_PAPER = {
    "backbone": "resnet18_fedmt", "backbone_kwargs": {}, "backbone_label": "ResNet-18 (Table 5), random init",
    "num_clients": 10, "samples_per_client": 4000, "n_values": PAPER_N,  # Sec. 4.1
    "rounds": 200, "local_epochs": 5, "server_epochs": 5, "baseline_epochs": 1,  # App. C.1, vague-1
    "batch_size": 10,  # vague-2 (SemiFL's client batch; one batch size for clients and server here)
    "lr": 0.03, "momentum": 0.9, "weight_decay": 5e-4, "lr_schedule": "cosine",  # App. C.1
    "threshold": 0.95, "lambda1": 1.0, "lambda2": 1 / 16, "mix_alpha": 0.75,  # vague-3/-4
    "single_rounds": 200, "finetune_epochs": 100, "finetune_lr": 0.01, "finetune_batch": 250,  # vague-17/-19
    "seeds": 3, "test_cap": None,  # vague-24; the full 10,000-image test set
    "n_default": 25,  # vague-13
    "gammas": [0.1, 0.9, 0.99], "client_counts": [10, 20, 40, 80], "client_total": 40000,  # vague-12/-14
    "thresholds": [0.7, 0.8, 0.9, 0.95], "lambda2s": [1, 1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64],
    "fig3_sizes": [500, 1000, 2000, 4000],  # vague-15
    "eval_every": 1, "stand_in": None, "precision": "fp32",
}

# Sized for long <= 60 min and quick <= 20 min wall on one CPU core from an empty cache
# (benchmarks/fedmt_sizing.py; the measured times are in the README's profile table), with the
# BatchNorm convnet that the equal-CPU-second study chose. xi = 0.7 (Table 7's lowest value, the
# paper's best at a fixed number of rounds) instead of 0.95: at 0.95 no client row is confident
# until the server model has trained many epochs, so the clients would never train within these
# rounds (FedMT (T) = (E)).
_LONG = dict(
    _PAPER, backbone="bn_convnet", backbone_kwargs={"in_channels": 3, "width": 16, "dim": 64},
    backbone_label="BatchNorm convnet (16-32-64-64 conv, BN, GAP, FC), random init",
    samples_per_client=400, rounds=6, local_epochs=2, server_epochs=3, baseline_epochs=2, batch_size=32,
    threshold=0.7, single_rounds=18, finetune_epochs=10, finetune_batch=32, seeds=3, test_cap=1000,
    client_total=4000, client_counts=[10, 40], fig3_sizes=[100, 200, 400], eval_every=1,
    thresholds=[0.7, 0.95], lambda2s=[1, 1 / 16, 1 / 64],
)

# quick: long's settings with 2 rounds instead of 6 (Single 6 epochs) and fewer grid points: the
# BatchNorm convnet costs several times a LeNet per run, and at equal CPU seconds its first two
# rounds already beat a LeNet's best FedMT (E) accuracy.
_QUICK = dict(
    _LONG, rounds=2, single_rounds=6, n_values=[5, 25], gammas=[0.99], fig3_sizes=[100, 400],
    lambda2s=[1, 1 / 16],
)

_SMOKE = dict(
    _QUICK, num_clients=3, samples_per_client=24, n_values=[2, 4], rounds=2, single_rounds=2, finetune_epochs=1,
    batch_size=8, test_cap=None, n_default=4, seeds=1, local_epochs=1, server_epochs=1, baseline_epochs=1,
    finetune_batch=250, client_counts=[2, 3], client_total=48, fig3_sizes=[12, 24],
    gammas=[0.1, 0.9], thresholds=[0.055, 0.08], lambda2s=[1, 1 / 16], threshold=0.055, eval_every=1,
    backbone="lenet", backbone_kwargs={"in_channels": 3, "image_size": 16}, backbone_label="LeNet-size CNN (smoke)",
    stand_in={"num_classes": 20, "coarse_classes": 5, "n_train": 640, "n_test": 60, "shape": [3, 16, 16], "seed": 0},
)

SETTINGS = {"paper": _PAPER, "long": _LONG, "quick": _QUICK, "smoke": _SMOKE}


def settings(profile: str) -> dict:
    p = copy.deepcopy(SETTINGS[profile])
    p["notes"] = notes(profile)
    return p


def notes(profile: str) -> list[str]:
    """Every difference from the paper's setting, in words."""
    p, q = SETTINGS[profile], _PAPER
    out = ["random initialisation for every method: torchvision ImageNet weights are not available offline "
           "(the paper starts Single, FedTrans and FedRep from ImageNet weights in Table 2)",
           "server procedure A runs after each aggregation (same sequence as Algorithm 1 except round 1)",
           "one batch size for clients and server (vague-2); FedTrans/Single without augmentation"]
    if p["stand_in"]:
        out.insert(0, f"SYNTHETIC stand-in for CIFAR-100 ({p['stand_in']['num_classes']} fine / "
                      f"{p['stand_in']['coarse_classes']} coarse classes, {p['stand_in']['shape']} images)")
    if p["backbone"] != q["backbone"]:
        bn = "BatchNorm, so SemiFL/FedMT's static BN recomputes its statistics as in the paper" \
            if _has_batchnorm(p) else "no BatchNorm, so static BN is a no-op"
        out.append(f"backbone {p['backbone_label']} instead of ResNet-18 (CPU budget, chosen at equal CPU seconds: "
                   f"benchmarks/results/fedmt_backbone_study_b300.md; {bn})")
    if p["threshold"] != q["threshold"] and p["stand_in"]:
        out.append(f"pseudo-label threshold xi = {p['threshold']} (paper: {q['threshold']}; stand-in scale)")
    elif p["threshold"] != q["threshold"]:
        out.append(f"pseudo-label threshold xi = {p['threshold']} (paper: {q['threshold']}; Table 7's lowest value): "
                   "at 0.95 no client row was confident before the server's LeNet had trained about 25-30 epochs, so "
                   "the clients would not train within these rounds (benchmarks/results/fedmt_sizing.md; kept for "
                   "the BatchNorm convnet, whose clients pass 0.7 from round 2-4: fedmt_backbone_study_b300.md)")
    if p["single_rounds"] != q["single_rounds"] and p["single_rounds"] == p["rounds"] * p["server_epochs"]:
        out.append(f"Single trains {p['single_rounds']} epochs = rounds x server epochs, the server passes FedMT's "
                   f"procedure A gets (paper's default reading: {q['single_rounds']} epochs, vague-19)")
    if profile in ("quick", "long"):
        out.append("sized for this 2-core CPU: long <= 2.5 h, quick <= 30 min wall from an empty cache (measured "
                   "times: the README's profile table)")
    for key, what in [("samples_per_client", "images per client N_c"), ("rounds", "rounds"),
                      ("local_epochs", "local epochs (FedMT/SemiFL)"), ("server_epochs", "server epochs per round"),
                      ("baseline_epochs", "local epochs of FedTrans/FedRep (and FedRep's server epochs)"),
                      ("batch_size", "batch size"), ("n_values", "server images per class n"),
                      ("finetune_batch", "FedTrans fine-tuning batch"), ("thresholds", "threshold grid (table7)"),
                      ("gammas", "non-IID gamma grid (fig2b, table9)"),
                      ("single_rounds", "Single epochs"), ("finetune_epochs", "FedTrans fine-tuning epochs"),
                      ("test_cap", "test images (None: all 10,000)"), ("client_counts", "client counts C (fig2c)"),
                      ("client_total", "N_c x C (fig2c)"), ("lambda2s", "lambda2 grid (table8)"),
                      ("fig3_sizes", "N_c values (fig3)")]:
        if p[key] != q[key]:
            out.append(f"{what}: {p[key]} (paper: {q[key]})")
    out.append(f"seeds: {p['seeds']} (paper: {q['seeds']})")
    return out


def subtitle(p: dict) -> str:
    return f"{p['backbone_label']}; {p['profile']} profile: C={p['num_clients']}, N_c={p['samples_per_client']}, " \
           f"{p['rounds']} rounds, {len(p['seeds'])} seed(s)"


def _has_batchnorm(p: dict) -> bool:
    """Does the profile's backbone have BatchNorm layers? (built and asked: models.has_batchnorm)"""
    return has_batchnorm(build_model(p["backbone"], num_classes=10, **p.get("backbone_kwargs", {})))
