"""DermaMNIST (MedMNIST v2; Yang et al. 2023): 10,015 dermatoscopic 28x28 RGB images, 7 classes,
official split 7,007 train / 1,003 val / 2,005 test (FedNCA-ML Sec. 5.1, Table 2).

Read from `<root>/dermamnist/dermamnist.npz` (the medmnist npz layout: `{train,val,test}_images`
[N, 28, 28, 3] uint8 and `*_labels` [N, 1]). The project's offline copy is LOSSY (rebuilt from JPEG
copies at about quality 75; split sizes and class counts match the official set): results made
from it say so in their provenance. With internet, `pip install medmnist` and
`medmnist.DermaMNIST(split="train", download=True, root="<root>/dermamnist")` writes the original.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from fedpaper.blocks.data.base import ImageDataset
from fedpaper.blocks.data.common import missing_error, resolve_root

CLASSES = ["actinic keratoses", "basal cell carcinoma", "benign keratosis-like lesions", "dermatofibroma",
           "melanoma", "melanocytic nevi", "vascular lesions"]
SPLITS = ("train", "val", "test")
FILES = ("dermamnist.npz", "dermamnist_28.npz")
OFFLINE_SIZE = 19737522  # the project's lossy offline copy (../shared/data/dermamnist/dermamnist.npz)
HOW = ("set FEDPAPER_DATA to the offline copies (../shared/data) or `pip install medmnist` and run "
       "medmnist.DermaMNIST(split='train', download=True, root='<data root>/dermamnist')")


def find_file(root: Path) -> Path | None:
    for name in FILES:
        p = root / "dermamnist" / name
        if p.is_file():
            return p
    return None


def available(root: Path) -> bool:
    return find_file(root) is not None


def is_offline_copy(path: Path) -> bool:
    return path.stat().st_size == OFFLINE_SIZE


def copy_identity(root: Path) -> dict | None:
    p = find_file(root)
    if p is None:
        return None
    return {"copy": "offline JPEG rebuild (lossy)" if is_offline_copy(p) else "medmnist npz",
            "files": [[p.name, p.stat().st_size]]}


def load_splits(root=None) -> tuple[dict, dict]:
    """{split: (x uint8 [N, 3, 28, 28], y int64 [N])} for train, val, test, and a description
    (source, lossy)."""
    r = resolve_root(root)
    path = find_file(r)
    if path is None:
        raise missing_error("DermaMNIST", [r / "dermamnist" / f for f in FILES], HOW)
    with np.load(path) as z:
        out = {s: (np.ascontiguousarray(z[f"{s}_images"].transpose(0, 3, 1, 2)),
                   z[f"{s}_labels"].reshape(-1).astype(np.int64)) for s in SPLITS}
    lossy = is_offline_copy(path)
    desc = {"name": "dermamnist", "source": f"{path.name} ({'offline JPEG rebuild, LOSSY' if lossy else 'medmnist'})",
            "lossy": lossy, "synthetic": False, **{f"n_{s}": int(len(out[s][1])) for s in SPLITS},
            "num_classes": len(CLASSES)}
    return out, desc


def load(root=None, download: bool = False) -> ImageDataset:
    """DermaMNIST as an ImageDataset (train, test; the official val split in extra["x_val"/"y_val"])."""
    splits, desc = load_splits(root)
    ds = ImageDataset("dermamnist", torch.from_numpy(splits["train"][0]), torch.from_numpy(splits["train"][1]),
                      torch.from_numpy(splits["test"][0]), torch.from_numpy(splits["test"][1]), list(CLASSES),
                      desc["source"], lossy=desc["lossy"])
    ds.extra.update(x_val=torch.from_numpy(splits["val"][0]), y_val=torch.from_numpy(splits["val"][1]))
    return ds
