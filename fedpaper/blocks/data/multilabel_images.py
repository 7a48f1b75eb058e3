"""Image loaders of the naturally multi-label data sets of FedNCA-ML Tables 3-4, whose images are
not in the offline copies (only their label tables are; data.label_tables). The code is real and
tested on small generated stand-ins; with the images in place it feeds FedNCA-ML's pools.

- PASCAL VOC (`<root>/voc2007/VOCdevkit/VOC<year>/`: ImageSets/Main/<set>.txt, Annotations/<id>.xml,
  JPEGImages/<id>.jpg, as torchvision.datasets.VOCDetection(download=True) writes them): an image's
  label set is every class with at least one annotated object, difficult ones included (targets
  vague-17). The paper's split (vague-17): VOC 2012 train for the clients, VOC 2012 val as test.
- NIH ChestX-ray14 (`<root>/chestxray14/images/<Image Index>` PNGs and Data_Entry_2017.csv): 14
  disease labels, "No Finding" = all zero, grey images repeated over 3 channels; patient-wise split
  (label_tables.patient_split) since the official lists are not in the offline copy.

Images are resized to `size` x `size` (bilinear, PIL) and returned as uint8 [N, 3, size, size].
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from fedpaper.ground.errors import DataCorruptError
from fedpaper.blocks.data.common import missing_error, resolve_root
from fedpaper.blocks.data.label_tables import CXR_CLASSES, VOC_CLASSES, chestxray14_table, parse_cxr_findings, patient_split

VOC_HOW = ("download it with torchvision.datasets.VOCDetection(root='<data root>/voc2007', year='2012', "
           "image_set='trainval', download=True)")
CXR_HOW = ("download the images (about 42 GB) from the NIH Clinical Center ChestX-ray release (or Kaggle 'NIH Chest "
           "X-rays') into <data root>/chestxray14/images/")


def _read_image(path: Path, size: int) -> np.ndarray:
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB").resize((size, size), Image.BILINEAR)
            return np.asarray(im, dtype=np.uint8).transpose(2, 0, 1)
    except OSError as e:
        raise DataCorruptError(f"cannot read image {path} ({e}); replace it with the original file") from None


def voc_objects(xml_path: Path) -> set:
    """Class names of the objects annotated in one VOC XML file (difficult objects included)."""
    try:
        root = ET.parse(xml_path).getroot()
    except ET.ParseError as e:
        raise DataCorruptError(f"VOC annotation {xml_path} is not valid XML ({e}); replace it") from None
    return {o.findtext("name").strip() for o in root.iter("object") if o.findtext("name")}


def voc_folder(root=None, year: str = "2012") -> Path:
    r = resolve_root(root)
    folder = r / "voc2007" / "VOCdevkit" / f"VOC{year}"
    if not (folder / "JPEGImages").is_dir():
        raise missing_error(f"PASCAL VOC {year} images", [folder / "JPEGImages"], VOC_HOW)
    return folder


def load_voc(root=None, year: str = "2012", image_set: str = "train", size: int = 224, limit: int | None = None):
    """(x uint8 [N, 3, size, size], y float32 multi-hot [N, 20], image ids) of a VOC image set."""
    folder = voc_folder(root, year)
    ids = [s.strip() for s in (folder / "ImageSets" / "Main" / f"{image_set}.txt").read_text().split() if s.strip()]
    ids = ids[:limit] if limit else ids
    index = {c: i for i, c in enumerate(VOC_CLASSES)}
    x = np.zeros((len(ids), 3, size, size), dtype=np.uint8)
    y = np.zeros((len(ids), len(VOC_CLASSES)), dtype=np.float32)
    for i, img_id in enumerate(ids):
        for name in voc_objects(folder / "Annotations" / f"{img_id}.xml"):
            if name not in index:
                raise DataCorruptError(f"VOC annotation {img_id}.xml names an unknown class {name!r}")
            y[i, index[name]] = 1
        x[i] = _read_image(folder / "JPEGImages" / f"{img_id}.jpg", size)
    return x, y, ids


def load_chestxray14(root=None, size: int = 224, seed: int = 0, limit: int | None = None) -> dict:
    """{"train": (x, y), "test": (x, y), "classes"}: ChestX-ray14 images of the patient-wise split
    (at most `limit` images per split, in table order)."""
    r = resolve_root(root)
    folder = r / "chestxray14" / "images"
    if not folder.is_dir():
        raise missing_error("ChestX-ray14 images", [folder], CXR_HOW)
    df = chestxray14_table(r)
    y = parse_cxr_findings(df["Finding Labels"].to_numpy()).astype(np.float32)
    test = patient_split(df["Patient ID"].to_numpy(), seed=seed)
    out = {"classes": list(CXR_CLASSES)}
    for name, mask in (("train", ~test), ("test", test)):
        rows = np.flatnonzero(mask)[:limit] if limit else np.flatnonzero(mask)
        x = np.stack([_read_image(folder / df["Image Index"].iloc[i], size) for i in rows]) if len(rows) else \
            np.zeros((0, 3, size, size), np.uint8)
        out[name] = (x, y[rows])
    return out
