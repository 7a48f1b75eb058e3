"""Image-level label tables of the multi-label data sets whose images are not here (FedNCA-ML
Sec. 5.1, App. C): PASCAL VOC 2007 and NIH ChestX-ray14. They feed the client class-count figures
(figs 11-12) and the "No Finding" shares of claim-24 from the real labels.

- VOC 2007 (`<root>/voc2007/voc2007-labels.csv.gz`, the official ImageSets/Main files): one column
  per class with 1 present, 0 difficult, -1 absent. An image carries a class when it has at least
  one object of it, difficult ones included (targets vague-17, the official FedNCA-ML parser).
  The paper uses VOC 2012 (train 5,717 images), whose labels are not here: figures made from the
  2007 table say so.
- ChestX-ray14 (`<root>/chestxray14/Data_Entry_2017.csv[.gz]`): `Finding Labels` holds the
  findings separated by "|", or "No Finding" (an all-zero row over the 14 diseases). The official
  train_val/test list files are not here; `patient_split` splits by patient with a fixed seed,
  the test share of images matching the official lists (25,596 of 112,120).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from fedpaper.ground.errors import BadParameterError, DataCorruptError
from fedpaper.blocks.data.common import missing_error, resolve_root

VOC_CLASSES = ["aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow", "diningtable",
               "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor"]
CXR_CLASSES = ["Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia",
               "Pneumothorax", "Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening", "Hernia"]
NO_FINDING = "No Finding"
CXR_OFFICIAL_TEST = 25596
CXR_TOTAL = 112120


def _find(root, folder: str, names) -> Path:
    r = resolve_root(root)
    for n in names:
        if (r / folder / n).is_file():
            return r / folder / n
    raise missing_error(folder, [r / folder / n for n in names],
                        f"set FEDPAPER_DATA to the offline copies (../shared/data), which hold {names[0]}")


def parse_voc_table(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(multi-hot uint8 [N, 20] with difficult objects counted as present, split names [N])."""
    missing = [c for c in ["split", *VOC_CLASSES] if c not in df.columns]
    if missing:
        raise DataCorruptError(f"VOC label table lacks column {missing[0]!r}; replace it with the offline copy")
    y = (df[VOC_CLASSES].to_numpy() >= 0).astype(np.uint8)
    return y, df["split"].to_numpy().astype(str)


def voc2007_labels(root=None, splits=("train", "val")) -> tuple[np.ndarray, list]:
    """VOC 2007 multi-hot labels of the images in `splits` (default trainval, 5,011 images)."""
    df = pd.read_csv(_find(root, "voc2007", ["voc2007-labels.csv.gz", "voc2007-labels.csv"]), dtype={"image_id": str})
    y, split = parse_voc_table(df)
    return y[np.isin(split, list(splits))], list(VOC_CLASSES)


def parse_cxr_findings(findings) -> np.ndarray:
    """'Effusion|Mass' -> multi-hot [N, 14] over CXR_CLASSES ("No Finding" -> all zero)."""
    index = {c: i for i, c in enumerate(CXR_CLASSES)}
    out = np.zeros((len(findings), len(CXR_CLASSES)), dtype=np.uint8)
    for i, f in enumerate(findings):
        if f == NO_FINDING:
            continue
        for name in str(f).split("|"):
            if name not in index:
                raise DataCorruptError(f"ChestX-ray14 finding {name!r} is not one of the 14 classes; replace the "
                                       f"label file with the official Data_Entry_2017.csv")
            out[i, index[name]] = 1
    return out


def chestxray14_table(root=None) -> pd.DataFrame:
    """The official Data_Entry_2017 table (image, findings, patient)."""
    path = _find(root, "chestxray14", ["Data_Entry_2017.csv.gz", "Data_Entry_2017.csv"])
    return pd.read_csv(path, usecols=["Image Index", "Finding Labels", "Patient ID"])


def patient_split(patients, test_images: int | None = None, seed: int = 0) -> np.ndarray:
    """Boolean test mask [N]: whole patients, drawn in a seeded random order, until the test set
    holds at least `test_images` images (default: the official 25,596, scaled by N / 112,120)."""
    p = np.asarray(patients)
    if len(p) == 0:
        raise BadParameterError("patients is empty; pass the table's Patient ID column")
    target = int(round(CXR_OFFICIAL_TEST * len(p) / CXR_TOTAL)) if test_images is None else int(test_images)
    ids, counts = np.unique(p, return_counts=True)
    order = np.random.default_rng(seed).permutation(len(ids))
    take = order[: int(np.searchsorted(np.cumsum(counts[order]), target) + 1)]
    return np.isin(p, ids[take])


def chestxray14_labels(root=None, seed: int = 0) -> dict:
    """{"train": multi-hot [N, 14], "test": ..., "classes": CXR_CLASSES, "split_note": ...}: the
    patient-wise split of `patient_split` (the official lists are not here)."""
    df = chestxray14_table(root)
    y = parse_cxr_findings(df["Finding Labels"].to_numpy())
    test = patient_split(df["Patient ID"].to_numpy(), seed=seed)
    return {"train": y[~test], "test": y[test], "classes": list(CXR_CLASSES),
            "split_note": f"patient-wise random split (seed {seed}; the official train_val/test lists are not in the "
                          f"offline copy): {int((~test).sum())} train / {int(test.sum())} test images"}


def no_finding_share(y: np.ndarray) -> float:
    """Share of rows with no disease label ("No Finding")."""
    y = np.asarray(y)
    return float((y.sum(axis=1) == 0).mean()) if len(y) else float("nan")
