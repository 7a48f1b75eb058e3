"""Fitzpatrick 17k (Groh et al. 2021) for FedMT Table 3 (Sec. 4.3, App. C.2; targets vague-23).

Not in the offline data folder: users download `fitzpatrick17k.csv` from
github.com/mattgroh/fitzpatrick17k and the images it lists (many URLs are dead; FedMT reached 16,526)
into `<data root>/fitzpatrick17k/` as `<md5hash>.jpg` (or `images/<md5hash>.jpg`).

- `read_metadata(root)`: the rows whose image is present, with the 9- and 3-partition labels;
- `fedmt_fitzpatrick_split(nine, r, num_clients, seed)`: 50 test images per 9-class label (450), the
  training set rebalanced (inflammatory subsampled to 5,000; every other class oversampled to 1,000 /
  1,200 / 1,400 / 1,600 images when it has < 200 / 200-499 / 500-1,000 / > 1,000 after the test rows are
  removed: 15,600 in all), then r of it to the server and the rest IID to the clients;
- `load_images(rows, root, size)`: uint8 [N, 3, size, size] (resized; the oversampled copies are
  augmented at training time, not here).
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from fedpaper.ground.errors import BadParameterError, DataMissingError

NINE = ["inflammatory", "malignant epidermal", "genodermatoses", "benign dermal", "benign epidermal",
        "malignant melanoma", "benign melanocyte", "malignant cutaneous lymphoma", "malignant dermal"]
THREE = ["benign", "malignant", "non-neoplastic"]
#: the deterministic 9 -> 3 grouping (targets section 2: reproduces the paper's 3-class totals)
NINE_TO_THREE = {"benign dermal": "benign", "benign epidermal": "benign", "benign melanocyte": "benign",
                 "malignant epidermal": "malignant", "malignant melanoma": "malignant",
                 "malignant cutaneous lymphoma": "malignant", "malignant dermal": "malignant",
                 "inflammatory": "non-neoplastic", "genodermatoses": "non-neoplastic"}
HOW_TO_GET = ("download fitzpatrick17k.csv from github.com/mattgroh/fitzpatrick17k and the images it lists into "
              "<data root>/fitzpatrick17k/ (as <md5hash>.jpg)")


def correspondence_matrix() -> np.ndarray:
    """3 x 9 M of the 9-to-3 grouping (FedMT treats it as unknown: FedMT (E) only)."""
    m = np.zeros((len(THREE), len(NINE)), dtype=np.float32)
    for k, name in enumerate(NINE):
        m[THREE.index(NINE_TO_THREE[name]), k] = 1
    return m


def _image_path(folder: Path, md5: str) -> Path | None:
    for p in (folder / f"{md5}.jpg", folder / "images" / f"{md5}.jpg"):
        if p.is_file():
            return p
    return None


def read_metadata(root) -> dict:
    """{"md5", "path", "nine" (int [N]), "three" (int [N])} of the CSV rows whose image is present."""
    folder = Path(root) / "fitzpatrick17k"
    csv_path = folder / "fitzpatrick17k.csv"
    if not csv_path.is_file():
        raise DataMissingError(f"Fitzpatrick 17k is missing: no {csv_path}; {HOW_TO_GET}")
    md5, paths, nine = [], [], []
    with open(csv_path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            label = row.get("nine_partition_label", "").strip()
            if label not in NINE:
                continue
            p = _image_path(folder, row["md5hash"].strip())
            if p is not None:
                md5.append(row["md5hash"].strip())
                paths.append(p)
                nine.append(NINE.index(label))
    if not md5:
        raise DataMissingError(f"Fitzpatrick 17k: {csv_path} lists no image present in {folder}; {HOW_TO_GET}")
    nine = np.asarray(nine, dtype=np.int64)
    three = np.asarray([THREE.index(NINE_TO_THREE[NINE[k]]) for k in nine], dtype=np.int64)
    return {"md5": md5, "path": paths, "nine": nine, "three": three}


def rebalanced_size(n_left: int, name: str) -> int:
    """App. C.2 (vague-23): inflammatory -> 5,000; others by their count after the test rows."""
    if name == "inflammatory":
        return 5000
    if n_left < 200:
        return 1000
    if n_left < 500:
        return 1200
    if n_left <= 1000:
        return 1400
    return 1600


def fedmt_fitzpatrick_split(nine, r: float, num_clients: int = 10, *, seed: int, test_per_class: int = 50) -> dict:
    """Rows (indices into the metadata; training rows may repeat: oversampled copies) of the test
    set, the server (share r of the rebalanced training set) and the IID clients."""
    if not 0 < r < 1:
        raise BadParameterError(f"r={r} must lie in (0, 1) (the server's share of the training set)")
    nine = np.asarray(nine, dtype=np.int64)
    rng = np.random.default_rng(seed)
    test, train = [], []
    for k, name in enumerate(NINE):
        rows = rng.permutation(np.flatnonzero(nine == k))
        if len(rows) <= test_per_class:
            raise BadParameterError(f"class {name!r} has {len(rows)} images; it needs more than {test_per_class}")
        test.append(rows[:test_per_class])
        left = rows[test_per_class:]
        size = rebalanced_size(len(left), name)
        if size <= len(left):
            train.append(rng.choice(left, size, replace=False))
        else:  # every image once, then copies drawn with replacement (augmented when loaded)
            train.append(np.concatenate([left, rng.choice(left, size - len(left), replace=True)]))
    train = rng.permutation(np.concatenate(train))
    n_server = int(round(r * len(train)))
    server, rest = train[:n_server], train[n_server:]
    clients = np.array_split(rest, num_clients)
    return {"test": np.sort(np.concatenate(test)), "server": server, "clients": clients}


def load_images(paths, size: int = 224) -> np.ndarray:
    """uint8 [N, 3, size, size]: each image read as RGB and resized."""
    from PIL import Image

    out = np.zeros((len(paths), 3, size, size), dtype=np.uint8)
    for i, p in enumerate(paths):
        with Image.open(p) as im:
            out[i] = np.asarray(im.convert("RGB").resize((size, size))).transpose(2, 0, 1)
    return out
