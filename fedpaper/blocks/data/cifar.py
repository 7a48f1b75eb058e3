"""CIFAR-10 and CIFAR-100 (Krizhevsky 2009): 50,000 + 10,000 RGB 32x32 images.

Two source layouts are read:
- the project's offline JPEG copies: ``<root>/cifar10/cifar10-jpeg.zip`` (lossy) and
  ``<root>/cifar100/cifar100-jpeg95.zip`` (JPEG quality 95, nearly lossless but still marked lossy),
  zips of an ImageFolder tree ``{train,test}/<class>/<nnnn>.jpg``; CIFAR-100's zip adds ``classes.csv``
  (fine_index, fine_name, coarse_index, coarse_name);
- torchvision's pickled batches ``cifar-10-batches-py`` / ``cifar-100-python`` (a user's own copy, or
  ``download=True``), which are the original pixels and are preferred when both are present.

The zips store images grouped by class; rows are put in a fixed random order (seed 0) on parsing.
"""
from __future__ import annotations

import csv
import io
import pickle
import zipfile
from pathlib import Path

import numpy as np
import torch

from fedpaper.blocks.partition import cifar100_correspondence_matrix
from fedpaper.blocks.data import download as D
from fedpaper.blocks.data.base import ImageDataset
from fedpaper.blocks.data.cache import cached_parse, corrupt_error
from fedpaper.blocks.data.common import fixed_permutation, missing_error, resolve_root, to_tensor_dataset

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer",
                   "dog", "frog", "horse", "ship", "truck"]

_SPEC = {
    "cifar10": {
        "zip": ("cifar10", "cifar10-jpeg.zip"),
        "tv": "cifar-10-batches-py",
        "tv_dir": "cifar10",
        "zip_note": "offline JPEG copy (lossy, about 0.9 KB per image)",
    },
    "cifar100": {
        "zip": ("cifar100", "cifar100-jpeg95.zip"),
        "tv": "cifar-100-python",
        "tv_dir": "cifar100",
        "zip_note": "offline JPEG quality-95 copy (lossy, PSNR about 40 dB)",
    },
}


def how_to_get(name: str) -> str:
    return (f"set FEDPAPER_DATA=<folder holding {_SPEC[name]['zip'][0]}/> (the offline copies, e.g. "
            f"../shared/data) or call load_dataset('{name}', download=True) to fetch it with torchvision")


def candidates(root: Path, name: str) -> list[Path]:
    """Source paths in order of preference: torchvision folders (original pixels), then the zip."""
    spec = _SPEC[name]
    return [root / spec["tv_dir"] / spec["tv"], root / spec["tv"], root.joinpath(*spec["zip"])]


def find_source(root: Path, name: str) -> Path | None:
    for path in candidates(root, name):
        if path.is_file() or (path.is_dir() and any(path.iterdir())):
            return path
    return None


# --------------------------------------------------------------------------- JPEG zip
def _decode_pil(blobs: list[bytes]) -> np.ndarray:
    from PIL import Image

    imgs = [np.asarray(Image.open(io.BytesIO(b)).convert("RGB")) for b in blobs]
    return np.stack(imgs).transpose(0, 3, 1, 2).copy()


def decode_jpegs(blobs: list[bytes]) -> np.ndarray:
    """Decode JPEG byte strings to uint8 [N,3,H,W].

    Large batches use torchvision's batched decoder (faster than PIL, identical pixels on
    the offline copies); small ones use PIL, which avoids importing torchvision.
    """
    if len(blobs) < 2000:
        return _decode_pil(blobs)
    try:
        from torchvision.io import ImageReadMode, decode_jpeg

        tensors = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in blobs]
        out = []
        for start in range(0, len(tensors), 5000):
            out.extend(decode_jpeg(tensors[start:start + 5000], mode=ImageReadMode.RGB))
        return torch.stack(out).numpy()
    except (ImportError, RuntimeError):
        return _decode_pil(blobs)


def read_image_zip(path: Path, class_names: list[str]) -> dict[str, np.ndarray]:
    """Read ``{train,test}/<class>/*.jpg`` from a zip into x_/y_ arrays (fixed random row order)."""
    index = {c: i for i, c in enumerate(class_names)}
    arrays = {}
    with zipfile.ZipFile(path) as zf:
        for split in ("train", "test"):
            members = sorted(
                n for n in zf.namelist() if n.startswith(split + "/") and n.lower().endswith((".jpg", ".jpeg", ".png"))
            )
            labels = np.array([index[n.split("/")[1]] for n in members], dtype=np.int64)
            x = decode_jpegs([zf.read(n) for n in members])
            perm = fixed_permutation(len(members))
            arrays["x_" + split], arrays["y_" + split] = x[perm], labels[perm]
    return arrays


def read_cifar100_classes(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """classes.csv from the CIFAR-100 zip: fine names, coarse names, fine_to_coarse [100]."""
    with zipfile.ZipFile(path) as zf:
        rows = list(csv.DictReader(io.StringIO(zf.read("classes.csv").decode())))
    rows.sort(key=lambda r: int(r["fine_index"]))
    fine = [r["fine_name"] for r in rows]
    f2c = np.array([int(r["coarse_index"]) for r in rows], dtype=np.int64)
    coarse = [""] * (f2c.max() + 1)
    for r in rows:
        coarse[int(r["coarse_index"])] = r["coarse_name"]
    return fine, coarse, f2c


# --------------------------------------------------------------------------- torchvision pickles
def _unpickle(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh, encoding="latin1")
    except (OSError, EOFError, ValueError, pickle.UnpicklingError) as e:
        raise corrupt_error(path.parent.parent.name or "cifar", path, e) from e


def _tv_files(folder: Path, name: str) -> list[Path]:
    if name == "cifar10":
        names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]
    else:
        names = ["train", "test", "meta"]
    return [folder / n for n in names]


def read_torchvision_cifar(folder: Path, name: str) -> tuple[dict[str, np.ndarray], dict]:
    """Read torchvision's pickled CIFAR batches (original pixels)."""
    files = _tv_files(folder, name)
    label_key = "labels" if name == "cifar10" else "fine_labels"
    *train_files, test_file, meta_file = files
    train = [_unpickle(f) for f in train_files]
    test = _unpickle(test_file)
    meta = _unpickle(meta_file)
    arrays = {
        "x_train": np.concatenate([d["data"] for d in train]).reshape(-1, 3, 32, 32),
        "y_train": np.concatenate([d[label_key] for d in train]).astype(np.int64),
        "x_test": np.asarray(test["data"]).reshape(-1, 3, 32, 32),
        "y_test": np.asarray(test[label_key], dtype=np.int64),
    }
    info = {"lossy": False, "source": f"torchvision CIFAR batches (original pixels) at {folder}"}
    if name == "cifar10":
        info["classes"] = list(meta["label_names"])
    else:
        info["classes"] = list(meta["fine_label_names"])
        info["coarse_classes"] = list(meta["coarse_label_names"])
        arrays["y_train_coarse"] = np.concatenate([d["coarse_labels"] for d in train]).astype(np.int64)
        arrays["y_test_coarse"] = np.asarray(test["coarse_labels"], dtype=np.int64)
        f2c = np.zeros(len(info["classes"]), dtype=np.int64)
        f2c[arrays["y_train"]] = arrays["y_train_coarse"]
        arrays["fine_to_coarse"] = f2c
    return arrays, info


# --------------------------------------------------------------------------- parse + load
def _parse_zip(path: Path, name: str):
    note = _SPEC[name]["zip_note"]
    info = {"lossy": True, "source": f"{note} at {path}"}
    if name == "cifar10":
        info["classes"] = CIFAR10_CLASSES
        return read_image_zip(path, CIFAR10_CLASSES), info
    fine, coarse, f2c = read_cifar100_classes(path)
    arrays = read_image_zip(path, fine)
    arrays["fine_to_coarse"] = f2c
    arrays["y_train_coarse"] = f2c[arrays["y_train"]]
    arrays["y_test_coarse"] = f2c[arrays["y_test"]]
    info.update(classes=fine, coarse_classes=coarse)
    return arrays, info


def _parse(path: Path, name: str):
    return _parse_zip(path, name) if path.is_file() else read_torchvision_cifar(path, name)


def _download(root: Path, name: str) -> None:
    """torchvision's original batches into <root>/<name>/, placed atomically (fedpaper.blocks.data.download)."""
    D.download(name, root)


def load(name: str, root=None, download: bool = False) -> ImageDataset:
    """CIFAR-10 or CIFAR-100 as uint8 [N,3,32,32] images and int64 labels (parsed once, then cached).

    CIFAR-100's ``extra`` holds ``y_train_coarse``, ``y_test_coarse`` (int64 tensors), ``coarse_classes``,
    ``fine_to_coarse`` [100] and the 20x100 correspondence matrix ``M`` (float32 tensor, M[j, k] = 1
    when fine class k belongs to superclass j; FedMT App. C.1.1).
    """
    root = resolve_root(root, download)
    path = find_source(root, name)
    if path is None and download:
        _download(root, name)
        path = find_source(root, name)
    if path is None:
        raise missing_error(name, candidates(root, name), how_to_get(name))
    sources = [path] if path.is_file() else _tv_files(path, name)
    arrays, meta = cached_parse(name, sources, lambda: _parse(path, name))
    ds = to_tensor_dataset(name, arrays, meta)
    if name == "cifar100":
        f2c = arrays["fine_to_coarse"]
        m = cifar100_correspondence_matrix(f2c)
        ds.extra.update(
            y_train_coarse=torch.from_numpy(arrays["y_train_coarse"]),
            y_test_coarse=torch.from_numpy(arrays["y_test_coarse"]),
            coarse_classes=list(meta["coarse_classes"]),
            fine_to_coarse=torch.from_numpy(f2c),
            M=torch.from_numpy(m),
        )
    return ds


def copy_identity(root: Path, name: str) -> dict | None:
    """Which copy `load` would read (lossy offline JPEG zip or original batches) and the names and
    sizes of its files (cheap: nothing is parsed); None when absent."""
    path = find_source(root, name)
    if path is None:
        return None
    files = [path] if path.is_file() else [f for f in _tv_files(path, name) if f.is_file()]
    return {"copy": "offline JPEG zip (lossy)" if path.is_file() else "original torchvision batches",
            "files": [[f.name, f.stat().st_size] for f in files]}


def available(root: Path, name: str) -> bool:
    return find_source(root, name) is not None
