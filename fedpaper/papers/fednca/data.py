"""FedNCA-ML's data pools and client layout (Sec. 5.1-5.2, App. C; targets vague-1 to -4, -12).

Pools (registered as pools builders, one per source so the store key names the data copy read):

- "fednca-cifar10": multi-label CIFAR-10 composites (lossy offline JPEG copy where that is what is
  read). Training composites come from the first `train_fraction` of each class's training images,
  validation composites ("val_small" in the official code) from the rest, test composites from the
  test set.
- "fednca-dermamnist": multi-label DermaMNIST composites from the official train / val / test
  splits (all single-label images kept, as the paper says; the offline copy is LOSSY).
- "fednca-synthetic": the same construction on synthetic class-prototype images (smoke only).

Pools are compact (fedpaper.blocks.data.compact): the uint8 canvases at their native size, standardised and
resized to options["input_size"] per batch on the device (224 px at the paper profile: 0.5 GB of
64 px canvases instead of 24 GB of float32). x_train holds the training rows followed by the validation rows (`pools.fednca_split` gives their
counts); labels are multi-hot float [N, K], so the engine trains with BCE. The composite data and
the partition are built once with seed 0 and shared by all runs (vague-12); a run's seed changes
the model initialisation and data order.

Layouts: "fednca" (class_presence_partition over the training rows: Dirichlet beta with class-
presence ratio gamma) and "fednca-central" (one client holding every training row: the
Centralized upper bound).
"""
from __future__ import annotations

import numpy as np
import torch

from fedpaper.blocks.data.compact import compact_images
from fedpaper.engine import Federation, Pools
from fedpaper.blocks.partition import class_presence_partition
from fedpaper.blocks.data.multilabel import composite_counts, composite_split
from fedpaper.blocks.data import load_dataset, synthetic_images
from fedpaper.blocks.data.dermamnist import CLASSES, load_splits
from fedpaper.blocks.data.label_tables import VOC_CLASSES
from fedpaper.blocks.data.multilabel_images import load_chestxray14, load_voc

SPLITS = ("train", "val", "test")


def _split_sources(source: str, options: dict, data_root):
    """{split: (x uint8 [N, C, s, s], y int64 [N])}, class names and the data description."""
    if source == "dermamnist":

        splits, desc = load_splits(data_root)
        return splits, list(CLASSES), desc
    if source == "cifar10":

        ds = load_dataset("cifar10", root=data_root)
        x, y = ds.x_train.numpy(), ds.y_train.numpy()
        frac = float(options.get("train_fraction", 0.9))
        train, val = [], []
        for c in range(ds.num_classes):
            idx = np.flatnonzero(y == c)
            cut = int(round(frac * len(idx)))
            train.append(idx[:cut]), val.append(idx[cut:])
        tr, va = np.sort(np.concatenate(train)), np.sort(np.concatenate(val))
        desc = ds.describe()
        return {"train": (x[tr], y[tr]), "val": (x[va], y[va]), "test": (ds.x_test.numpy(), ds.y_test.numpy())}, \
            list(ds.classes), desc
    if source == "synthetic":

        k, side = int(options.get("num_classes", 4)), int(options.get("side", 8))
        n = {s: int(options.get(f"n_{s}", 12)) * k for s in SPLITS}
        ds = synthetic_images(num_classes=k, n_train=n["train"] + n["val"], n_test=n["test"], shape=(3, side, side),
                              seed=int(options.get("data_seed", 0)), noise=float(options.get("noise", 30.0)))
        x, y = ds.x_train.numpy(), ds.y_train.numpy()
        desc = ds.describe()
        return {"train": (x[:n["train"]], y[:n["train"]]), "val": (x[n["train"]:], y[n["train"]:]),
                "test": (ds.x_test.numpy(), ds.y_test.numpy())}, [f"class {c}" for c in range(k)], desc
    raise ValueError(f"unknown composite source {source!r}")


def build_composites(source: str, options: dict, data_root=None) -> dict:
    """The three composite splits (multilabel.CompositeSplit) of `source` with `options`:
    singles (per split: single-label images kept per class, None = all), pairs (per split:
    composites per class pair), seed, max_offset, canvas. Returns {"splits", "classes", "data",
    "counts"}."""
    src, classes, desc = _split_sources(source, options, data_root)
    singles, pairs = options.get("singles", {}), options["pairs"]
    out, counts = {}, {}
    for i, s in enumerate(SPLITS):
        x, y = src[s]
        out[s] = composite_split(x, y, len(classes), singles_per_class=singles.get(s), pairs_per_class_pair=pairs[s],
                                 seed=int(options.get("seed", 0)) * 10 + i, max_offset=int(options.get("max_offset", 7)),
                                 canvas=options.get("canvas"))
        counts[s] = composite_counts(y, singles.get(s), pairs[s], len(classes))
    return {"splits": out, "classes": classes, "data": desc, "counts": counts}


def channel_stats(x: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and std (clamped at 1e-6) of uint8 images [N, C, H, W], in [0, 1] units."""
    ref = torch.from_numpy(x).float().div_(255)
    return ref.mean(dim=(0, 2, 3)), ref.std(dim=(0, 2, 3)).clamp(min=1e-6)


def composite_pools(source: str, options: dict, data_root, device) -> Pools:
    """Compact pools (uint8 canvases; per-channel statistics of the training composites; resized to
    options["input_size"] per batch) with the validation rows after the training rows."""
    built = build_composites(source, options, data_root)
    sp = built["splits"]
    mean, std = channel_stats(sp["train"].x)
    size = options.get("input_size")
    x_train = compact_images(np.concatenate([sp["train"].x, sp["val"].x]), mean, std, size, device)
    y_train = np.concatenate([sp["train"].y, sp["val"].y])
    pools = Pools.from_arrays(x_train, y_train, compact_images(sp["test"].x, mean, std, size, device), sp["test"].y,
                              len(built["classes"]), device=device)
    pools.fednca_split = {"train": len(sp["train"].y), "val": len(sp["val"].y), "test": len(sp["test"].y)}
    pools.classes = built["classes"]
    pools.composite_counts = built["counts"]
    pools.description = {**built["data"], "composites": built["counts"], "n_train": len(sp["train"].y),
                         "n_val": len(sp["val"].y), "n_test": len(sp["test"].y)}
    return pools


def _cifar10(options, data_root, device):
    return composite_pools("cifar10", options, data_root, device)


def _dermamnist(options, data_root, device):
    return composite_pools("dermamnist", options, data_root, device)


def _synthetic(options, data_root, device):
    return composite_pools("synthetic", options, data_root, device)


def train_labels(pools) -> np.ndarray:
    """The training rows' multi-hot labels (validation rows excluded)."""
    return pools.y_train[: pools.fednca_split["train"]].cpu().numpy().astype(int)


def partition_of(pools, p: dict):
    """The class-presence Dirichlet partition of the training rows (built once: partition_seed)."""
    return class_presence_partition(train_labels(pools), int(p["clients"]), float(p["beta"]), float(p["gamma"]),
                                    seed=int(p.get("partition_seed", 0)))


def _val_test(pools):
    n_tr, n_va = pools.fednca_split["train"], pools.fednca_split["val"]
    return np.arange(n_tr, n_tr + n_va), np.arange(pools.fednca_split["test"])


def _federated(spec, pools, data_root) -> Federation:
    part = partition_of(pools, spec.partition)
    val, test = _val_test(pools)
    return Federation(client_indices=[np.asarray(c) for c in part.client_indices], test_indices=test,
                      val_indices=val, seed=spec.seed)


def _central(spec, pools, data_root) -> Federation:
    val, test = _val_test(pools)
    return Federation(client_indices=[np.arange(pools.fednca_split["train"])], test_indices=test, val_indices=val,
                      seed=spec.seed)


def _natural_pools(x_tr, y_tr, x_val, y_val, x_te, y_te, classes, device, description) -> Pools:
    mean, std = channel_stats(x_tr)
    x_train = compact_images(np.concatenate([x_tr, x_val]), mean, std, None, device)
    pools = Pools.from_arrays(x_train, np.concatenate([y_tr, y_val]), compact_images(x_te, mean, std, None, device), y_te,
                              len(classes), device=device)
    pools.fednca_split = {"train": len(y_tr), "val": len(y_val), "test": len(y_te)}
    pools.classes, pools.description = list(classes), description
    return pools


def _hold_out(n: int, fraction: float, seed: int = 0):
    perm = np.random.default_rng(seed).permutation(n)
    k = int(round(fraction * n))
    return np.sort(perm[k:]), np.sort(perm[:k])


def _voc(options, data_root, device):
    """Table 3 (not regenerated here: images absent): VOC 2012 train for the clients with 10% held
    out for validation, VOC 2012 val as the test set (targets vague-4, -17)."""

    size, limit = int(options.get("size", 224)), options.get("limit")
    x, y, _ = load_voc(data_root, "2012", "train", size, limit)
    xt, yt, _ = load_voc(data_root, "2012", "val", size, limit)
    tr, va = _hold_out(len(y), float(options.get("val_fraction", 0.1)))
    return _natural_pools(x[tr], y[tr], x[va], y[va], xt, yt, VOC_CLASSES, device,
                          {"name": "voc2007", "source": "VOC 2012 images", "lossy": False})


def _cxr(options, data_root, device):
    """Table 4 (not regenerated here: images absent): the patient-wise split, 10% of the training
    images held out for validation (targets vague-18 fallback)."""

    d = load_chestxray14(data_root, int(options.get("size", 224)), limit=options.get("limit"))
    (x, y), (xt, yt) = d["train"], d["test"]
    tr, va = _hold_out(len(y), float(options.get("val_fraction", 0.1)))
    return _natural_pools(x[tr], y[tr], x[va], y[va], xt, yt, d["classes"], device,
                          {"name": "chestxray14", "source": "ChestX-ray14 images", "lossy": False})
