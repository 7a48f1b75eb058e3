"""iWildCam 2020 (WILDS v2.0; Beery et al. 2021, Koh et al. 2021): camera-trap images, 182 classes.

Not among the offline copies (about 11 GB). Loaded through the ``wilds`` package (imported lazily):
``pip install wilds`` then ``wilds.get_dataset("iwildcam", root_dir=<root>/iwildcam, download=True)``.
FedPALS (App. A.7, vague-16) uses the WILDS splits: ``train`` for the clients, the OOD ``test`` split
as the target, the OOD ``val`` split for model selection.

The whole training split does not fit in memory as 224 px uint8 images (about 130,000 images,
20 GB), so ``load_iwildcam`` takes ``max_per_split`` to load a uniform random subset; label counts
and domains of every image are read from ``metadata.csv`` alone by ``iwildcam_metadata``.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import torch

from fedpaper.ground.errors import DataMissingError, check_range
from fedpaper.blocks.data.base import ImageDataset
from fedpaper.blocks.data.common import missing_error, resolve_root

NAME = "iwildcam"
FOLDER = "iwildcam_v2.0"
HOW = ("pip install wilds, then run wilds.get_dataset('iwildcam', root_dir='<root>/iwildcam', download=True) "
       "(about 11 GB) and set FEDPAPER_DATA=<root>")


def candidate_dirs(root: Path) -> list[Path]:
    return [root / "iwildcam" / FOLDER, root / FOLDER]


def find_dir(root: Path) -> Path | None:
    """The iwildcam_v2.0 folder holding metadata.csv, else None."""
    return next((d for d in candidate_dirs(root) if (d / "metadata.csv").is_file()), None)


def iwildcam_metadata(root=None) -> dict[str, np.ndarray]:
    """Per-image split, label and camera location from metadata.csv (no images, no wilds needed).

    Returns arrays ``split`` (str), ``y`` (int64) and ``location`` (int64); e.g. the target marginal
    T(Y) of FedPALS Table 3 is ``np.bincount(y[split == "test"], minlength=182)`` normalised.
    """
    root = resolve_root(root)
    folder = find_dir(root)
    if folder is None:
        raise missing_error(NAME, [d / "metadata.csv" for d in candidate_dirs(root)], HOW)
    with open(folder / "metadata.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {
        "split": np.array([r["split"] for r in rows]),
        "y": np.array([int(r["y"]) for r in rows], dtype=np.int64),
        "location": np.array([int(r.get("location_remapped", -1) or -1) for r in rows], dtype=np.int64),
    }


def _import_wilds():
    try:
        import wilds
    except ImportError as exc:
        raise DataMissingError(f"{NAME}: the wilds package is not installed; {HOW}") from exc
    return wilds


def _load_subset(dataset, split: str, size: int, limit: int | None, rng) -> tuple[np.ndarray, ...]:
    """Images (resized), labels and locations of one WILDS split, optionally a random subset."""
    idx = np.flatnonzero(np.asarray(dataset.split_array) == dataset.split_dict[split])
    if limit is not None and limit < idx.size:
        idx = np.sort(rng.choice(idx, size=limit, replace=False))
    x = np.empty((idx.size, 3, size, size), dtype=np.uint8)
    for i, j in enumerate(idx):
        img = dataset.get_input(int(j)).convert("RGB").resize((size, size))
        x[i] = np.asarray(img).transpose(2, 0, 1)
    y = np.asarray(dataset.y_array)[idx].astype(np.int64)
    fields = list(dataset.metadata_fields)
    meta = np.asarray(dataset.metadata_array)
    loc = meta[idx, fields.index("location")] if "location" in fields else np.full(idx.size, -1)
    return x, y, np.asarray(loc, dtype=np.int64), idx


def load_iwildcam(root=None, size: int = 224, max_per_split: int | None = None, seed: int = 0,
                  train_split: str = "train", test_split: str = "test", download: bool = False) -> ImageDataset:
    """iWildCam train (source) and OOD test (target) images via wilds, resized to size x size.

    ``max_per_split`` loads a uniform random subset (seeded) of each split; None loads all (very
    large). ``extra`` holds ``location_train``, ``location_test`` (camera ids, the FL clients' domains),
    ``index_train``, ``index_test`` (rows of the WILDS dataset) and ``max_per_split``.
    """
    check_range("size", size, 8, 1024)
    if max_per_split is not None:
        check_range("max_per_split", max_per_split, 1)
    root = resolve_root(root, download)
    folder = find_dir(root)
    if folder is None and not download:
        raise missing_error(NAME, candidate_dirs(root), HOW)
    wilds = _import_wilds()
    wilds_root = folder.parent if folder is not None else root / "iwildcam"
    dataset = wilds.get_dataset(dataset=NAME, root_dir=str(wilds_root), download=download)
    rng = np.random.default_rng(seed)
    xtr, ytr, ltr, itr = _load_subset(dataset, train_split, size, max_per_split, rng)
    xte, yte, lte, ite = _load_subset(dataset, test_split, size, max_per_split, rng)
    n_classes = int(getattr(dataset, "n_classes", max(ytr.max(initial=0), yte.max(initial=0)) + 1))
    subset = "" if max_per_split is None else f", random subset of at most {max_per_split} per split (seed {seed})"
    return ImageDataset(
        name=NAME,
        x_train=torch.from_numpy(xtr), y_train=torch.from_numpy(ytr),
        x_test=torch.from_numpy(xte), y_test=torch.from_numpy(yte),
        classes=[f"species {k}" for k in range(n_classes)],
        source=f"WILDS iWildCam at {wilds_root / FOLDER} ({train_split}/{test_split}, {size}px{subset})",
        extra={"location_train": torch.from_numpy(ltr), "location_test": torch.from_numpy(lte),
               "index_train": torch.from_numpy(itr), "index_test": torch.from_numpy(ite),
               "max_per_split": max_per_split},
    )


def available(root: Path) -> bool:
    return find_dir(root) is not None
