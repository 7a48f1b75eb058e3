"""privlabels Tables 1 and 2: the configuration actually used, next to the paper's.

Table 1 (App A.1) lists Conv, Conv, 2x2 max-pool, Conv, Conv, 2x2 max-pool, Flatten, Fully
connected, Dropout(0.5) with "# Filters = 3" per convolution; we read 3 as the 3x3 kernel and use
the Keras CIFAR-10 example widths 32-32-64-64 and 512 hidden units (vague-2). Our rows are printed
from the model the profile builds (`privlabels_cnn`), layer by layer, with output shapes and
parameter counts. Table 2 (App A) lists the hyperparameters.
"""
from __future__ import annotations

import pandas as pd
import torch
from torch import nn

from fedpaper.blocks.models import build_model

from fedpaper.papers.privlabels.profiles import client_steps

PAPER_TABLE1 = [("Conv", "3"), ("Conv", "3"), ("Max-pool 2x2", ""), ("Conv", "3"), ("Conv", "3"),
                ("Max-pool 2x2", ""), ("Flatten", ""), ("Fully connected", ""), ("Dropout 0.5", ""),
                ("(classifier psi, Sec 3)", "")]
SHAPES = {"fashion-mnist": (1, 28), "cifar10": (3, 32)}


def _layers(model: nn.Module, ch: int, size: int) -> list[dict]:
    rows, x = [], torch.zeros(1, ch, size, size)
    mods = [m for m in model.features if not isinstance(m, nn.ReLU)] + [model.classifier]
    relu_after = {id(m) for i, m in enumerate(model.features[:-1]) if isinstance(model.features[i + 1], nn.ReLU)}
    with torch.no_grad():
        for m in list(model.features) + [model.classifier]:
            x = m(x) if not isinstance(m, nn.Dropout) else x
            if isinstance(m, nn.ReLU):
                continue
            if isinstance(m, nn.Conv2d):
                d = f"Conv {m.kernel_size[0]}x{m.kernel_size[1]}, {m.out_channels} ch, pad {m.padding[0]}"
            elif isinstance(m, nn.MaxPool2d):
                d = "Max-pool 2x2"
            elif isinstance(m, nn.Flatten):
                d = "Flatten"
            elif isinstance(m, nn.Linear):
                d = f"Linear {m.in_features} -> {m.out_features}" + (" (classifier psi)" if m is model.classifier else "")
            elif isinstance(m, nn.Dropout):
                d = f"Dropout {m.p}"
            else:
                d = type(m).__name__
            if id(m) in relu_after:
                d += " + ReLU"
            rows.append({"ours": d, "output_shape": "x".join(map(str, x.shape[1:])),
                         "params": sum(p.numel() for p in m.parameters())})
    assert len(rows) == len(mods)
    return rows


def table1(p: dict) -> pd.DataFrame:
    out = []
    for ds, (ch, size) in SHAPES.items():
        model = build_model("privlabels_cnn", in_channels=ch, num_classes=10, image_size=size,
                            widths=tuple(p["widths"]), hidden=p["hidden"], dropout=p["dropout"])
        for i, (r, (pl, pf)) in enumerate(zip(_layers(model, ch, size), PAPER_TABLE1)):
            out.append({"dataset": ds, "layer": i + 1, "paper_layer": pl, "paper_filters": pf, **r})
    return pd.DataFrame(out)


def _count(seeds) -> int:
    return len(seeds) if isinstance(seeds, (list, tuple)) else int(seeds)


def table2(p: dict) -> pd.DataFrame:
    e = p["epochs"]
    rows = [
        ("learning rate", "1e-3", f"{p['lr']:g} ({p['optimizer']})"),
        ("batch size", "64", p["batch_size"]),
        ("epochs per round", "1", f"{p['local_epochs']} (ablation: {e['E']})"),
        ("communication rounds", "100", f"{p['rounds']} (ablation: {e['rounds']})"),
        ("FedProx mu", "1e-2", f"{p['mu']:g}"),
        ("FedRS alpha", "0.5", p["fedrs_alpha"]),
        ("clients m", "n.g. (vague-1)", p["num_clients"]),
        ("samples per client", "2000", p["samples_per_client"]),
        ("unlabeled server set", "5000 / 6000", " / ".join(str(p["server_size"][d]) for d in ("cifar10", "fashion-mnist"))),
        ("central tuning", "3 epochs, Adam (SGD in App C.3)",
         f"{p['tuning_epochs']} epochs, Adam lr {p['lr']:g} (ablation: {e['tuning_optimizer']} lr {e['tuning_lr']:g})"),
        ("labels per client L", "2..10", ", ".join(map(str, p["labels"]))),
        ("seeds", "10 (ablation 3)", f"{_count(p['seeds'])} (ablation {_count(e['seeds'])})"),
        ("CNN widths / hidden", "n.g. ('3', vague-2)", f"{'-'.join(map(str, p['widths']))} / {p['hidden']}"),
        ("precision", "n.g. (fp32 assumed)", p.get("precision", "fp32")
         + (" autocast (fp32 weights)" if p.get("precision", "fp32") != "fp32" else "")),
        ("local steps per client per run", "3200 (2000 / 64 x 100)", client_steps(p)),
        ("validation / test images per seed", "all (20% split) / all (official test set)",
         f"{p['val_eval'] or 'all'} / {p['test_eval'] or 'all'}"),
    ]
    return pd.DataFrame([{"hyperparameter": a, "paper": b, "ours": str(c)} for a, b, c in rows])
