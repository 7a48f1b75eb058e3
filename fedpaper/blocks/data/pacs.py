"""PACS (Li et al. 2017): 9,991 images of 7 classes in 4 domains (art_painting, cartoon, photo, sketch).

Not among the offline copies. Two layouts are read:
- the Bai et al. (2024) federated domain-generalization benchmark layout (WILDS style): a folder with
  ``metadata.csv`` (columns ``path``, ``split``, ``y``, ``domain_remapped``) whose ``split`` column gives
  the official source ("train", "val", "id_val", ...) and target ("test") splits (FedPALS App. A.6,
  vague-14 default);
- a DomainBed-style ImageFolder tree ``<root>/pacs/<domain>/<class>/*.jpg``, where the caller picks
  the target domain and all other domains form the source (training) set.

Class order is DomainBed's alphabetical order (FedPALS vague-14): 0 dog, 1 elephant, 2 giraffe,
3 guitar, 4 horse, 5 house, 6 person.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import torch

from fedpaper.ground.errors import BadParameterError, check_range
from fedpaper.blocks.data.base import ImageDataset
from fedpaper.blocks.data.cache import cached_parse
from fedpaper.blocks.data.common import missing_error, resolve_root, to_tensor_dataset

NAME = "pacs"
CLASSES = ["dog", "elephant", "giraffe", "guitar", "horse", "house", "person"]
DOMAINS = ["art_painting", "cartoon", "photo", "sketch"]
_EXTS = (".jpg", ".jpeg", ".png")
HOW = ("download PACS as used by the Bai et al. 2024 FedDG benchmark (https://github.com/inouye-lab/FedDG_Benchmark, "
       "with its metadata.csv) or via DomainBed (https://github.com/facebookresearch/DomainBed, "
       "python -m domainbed.scripts.download) and place it at <root>/pacs as <domain>/<class>/*.jpg")


def candidate_dirs(root: Path) -> list[Path]:
    return [root / "pacs", root / "PACS", root / "pacs" / "PACS", root / "pacs_v1.0"]


def find_dir(root: Path) -> Path | None:
    """The first candidate folder holding metadata.csv or at least one domain/class folder."""
    for folder in candidate_dirs(root):
        if (folder / "metadata.csv").is_file() or _domains_in(folder):
            return folder
    return None


def _domains_in(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(d.name for d in folder.iterdir()
                  if d.is_dir() and any((d / c).is_dir() for c in CLASSES))


def _read_images(paths: list[Path], size: int) -> np.ndarray:
    """Decode images, convert to RGB and resize to size x size: uint8 [N, 3, size, size]."""
    from PIL import Image

    out = np.empty((len(paths), 3, size, size), dtype=np.uint8)
    for i, p in enumerate(paths):
        with Image.open(p) as img:
            img = img.convert("RGB").resize((size, size), Image.BILINEAR)
            out[i] = np.asarray(img).transpose(2, 0, 1)
    return out


def _tree_records(folder: Path) -> list[tuple[Path, int, str]]:
    """(path, label, domain) for every image of the domain/class tree, sorted by path."""
    recs = []
    for domain in _domains_in(folder):
        for label, cls in enumerate(CLASSES):
            d = folder / domain / cls
            if d.is_dir():
                recs += [(p, label, domain) for p in sorted(d.iterdir()) if p.suffix.lower() in _EXTS]
    return recs


def _metadata_records(folder: Path) -> list[tuple[Path, int, str, str]]:
    """(path, label, domain id as text, split) rows of a Bai et al. / WILDS metadata.csv."""
    with open(folder / "metadata.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [(folder / r["path"], int(r["y"]), str(r.get("domain_remapped", r.get("domain", ""))), r["split"])
            for r in rows]


def _split_arrays(recs, is_test, size, domain_names):
    train = [r for r, t in zip(recs, is_test) if not t]
    test = [r for r, t in zip(recs, is_test) if t]
    dom = {d: i for i, d in enumerate(domain_names)}
    arrays = {}
    for split, rows in (("train", train), ("test", test)):
        arrays["x_" + split] = _read_images([r[0] for r in rows], size)
        arrays["y_" + split] = np.array([r[1] for r in rows], dtype=np.int64)
        arrays["domain_" + split] = np.array([dom[r[2]] for r in rows], dtype=np.int64)
    return arrays


def load_pacs(root=None, target_domain: str | None = None, size: int = 224) -> ImageDataset:
    """PACS as source-domain training images (x_train) and target-domain test images (x_test).

    With a Bai et al. ``metadata.csv`` and ``target_domain=None``, its ``test`` split is the target and
    every other split the source. Otherwise ``target_domain`` names the held-out domain folder.
    Images are resized to size x size (224 for the ImageNet ResNet-50 of FedPALS). ``extra`` holds
    ``domain_train``, ``domain_test`` (int64 tensors indexing ``domains``), ``domains`` and
    ``target_domain``. Parsed once, then cached.
    """
    check_range("size", size, 8, 1024)
    root = resolve_root(root)
    folder = find_dir(root)
    if folder is None:
        raise missing_error(NAME, candidate_dirs(root), HOW)
    use_meta = (folder / "metadata.csv").is_file() and target_domain is None
    if use_meta:
        recs = _metadata_records(folder)
        domains = sorted({r[2] for r in recs})
        is_test = [r[3] == "test" for r in recs]
        target = "metadata split 'test'"
        sources = [folder / "metadata.csv"]
        note = f"Bai et al. metadata split at {folder}"
    else:
        domains = _domains_in(folder)
        if target_domain not in domains:
            raise BadParameterError(
                f"target_domain={target_domain!r} is not allowed; choose one of {domains} (PACS folders in {folder})"
            )
        recs = _tree_records(folder)
        is_test = [r[2] == target_domain for r in recs]
        target = target_domain
        sources = [folder] + [folder / d for d in domains]
        note = f"PACS image folders at {folder}, target domain {target_domain}"
    if not any(is_test) or all(is_test):
        raise BadParameterError(f"PACS at {folder}: the split leaves no source or no target images")

    def parse():
        arrays = _split_arrays(recs, is_test, size, domains)
        return arrays, {"classes": CLASSES, "lossy": False, "source": f"{note} (resized to {size}px)",
                        "n_files": len(recs)}

    key_name = f"{NAME}-{size}-{target}".replace(" ", "_").replace("'", "")
    arrays, meta = cached_parse(key_name, sources, parse)
    if meta.get("n_files") != len(recs):  # the tree changed without touching folder mtimes
        arrays, meta = parse()
    return to_tensor_dataset(
        NAME, arrays, meta,
        domain_train=torch.from_numpy(arrays["domain_train"]),
        domain_test=torch.from_numpy(arrays["domain_test"]),
        domains=domains, target_domain=target,
    )


def available(root: Path) -> bool:
    return find_dir(root) is not None
