"""Fashion-MNIST (Xiao et al. 2017): 60,000 + 10,000 grey 28x28 images, 10 classes.

Read straight from the IDX files of torchvision's raw layout (gzip or unzipped), so the project's
offline copy (``<root>/fashion-mnist/FashionMNIST/raw``) and a user's own torchvision copy
(``<root>/FashionMNIST/raw``) both work; ``download=True`` lets torchvision fetch the originals.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from fedpaper.blocks.data import download as D
from fedpaper.blocks.data.base import ImageDataset
from fedpaper.blocks.data.cache import cached_parse, corrupt_error
from fedpaper.blocks.data.common import missing_error, resolve_root, to_tensor_dataset

NAME = "fashion-mnist"
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
_STEMS = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
HOW = ("set FEDPAPER_DATA=<folder holding fashion-mnist/> (the offline copies, e.g. ../shared/data) "
       "or call load_dataset('fashion-mnist', download=True) to fetch it with torchvision")


def candidate_dirs(root: Path) -> list[Path]:
    """Folders that may hold the raw IDX files, in order of preference."""
    return [root / "fashion-mnist" / "FashionMNIST" / "raw", root / "FashionMNIST" / "raw"]


def _idx_file(folder: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        if (folder / name).is_file():
            return folder / name
    return None


def find_files(root: Path) -> dict[str, Path] | None:
    """The four IDX files in the first folder holding all of them, else None."""
    for folder in candidate_dirs(root):
        files = {k: _idx_file(folder, stem) for k, stem in _STEMS.items()}
        if all(files.values()):
            return files
    return None


def read_idx(path: Path) -> np.ndarray:
    """Parse one IDX file (magic 0x00000801 labels, 0x00000803 images), gzip or plain."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            data = fh.read()
        magic = int.from_bytes(data[0:4], "big")
        ndim = magic & 0xFF
        if magic >> 8 != 0x08 or ndim not in (1, 3):
            raise ValueError(f"not a uint8 IDX file (magic {magic:#x})")
        dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
        if len(data) != 4 + 4 * ndim + int(np.prod(dims)):
            raise EOFError(f"{len(data)} bytes for an array of shape {tuple(dims)}")
        return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)
    except (OSError, EOFError, ValueError) as e:  # truncated or garbled gzip / IDX
        raise corrupt_error(NAME, path, e) from e


def _parse(files: dict[str, Path]):
    arrays = {k: read_idx(p) for k, p in files.items()}
    arrays["x_train"] = arrays["x_train"][:, None].copy()
    arrays["x_test"] = arrays["x_test"][:, None].copy()
    arrays["y_train"] = arrays["y_train"].astype(np.int64)
    arrays["y_test"] = arrays["y_test"].astype(np.int64)
    folder = files["x_train"].parent
    meta = {"classes": CLASSES, "lossy": False, "source": f"Fashion-MNIST IDX files at {folder}"}
    return arrays, meta


def load(root=None, download: bool = False) -> ImageDataset:
    """Fashion-MNIST as uint8 [N,1,28,28] images and int64 labels (parsed once, then cached)."""
    root = resolve_root(root, download)
    files = find_files(root)
    if files is None and download:
        D.download(NAME, root)  # torchvision's files, placed atomically
        files = find_files(root)
    if files is None:
        raise missing_error(NAME, candidate_dirs(root), HOW)
    arrays, meta = cached_parse(NAME, list(files.values()), lambda: _parse(files))
    return to_tensor_dataset(NAME, arrays, meta)


def copy_identity(root: Path) -> dict | None:
    """Which copy `load` would read: the IDX files' names and sizes plus the SHA-256 of the training
    labels (the offline copy holds the same images in another row order); None when absent."""
    files = find_files(root)
    if files is None:
        return None
    import hashlib

    labels = hashlib.sha256(files["y_train"].read_bytes()).hexdigest()[:16]
    return {"copy": "IDX files", "files": [[f.name, f.stat().st_size] for f in files.values()],
            "train_labels_sha256": labels}


def available(root: Path) -> bool:
    return find_files(root) is not None
