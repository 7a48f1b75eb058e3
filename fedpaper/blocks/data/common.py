"""Helpers shared by the loaders: finding the data root, one-line errors, arrays -> ImageDataset."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from fedpaper.ground.errors import BadParameterError, DataMissingError
from fedpaper.ground.paths import data_root
from fedpaper.blocks.data.base import ImageDataset


def resolve_root(root=None, download: bool = False) -> Path:
    """The data root (see fedpaper.ground.paths.data_root); an explicit root that does not exist is an error.

    With ``download=True`` a missing root is created (torchvision downloads into it).
    """
    path = data_root(root)
    if path.is_dir():
        return path
    if path.exists():
        raise BadParameterError(f"data root {path} is not a folder; pass root=<folder with the data sets>")
    if download:
        path.mkdir(parents=True, exist_ok=True)
        return path
    if root is not None:
        raise BadParameterError(
            f"root={str(root)!r} does not exist ({path}); pass an existing folder holding the data sets"
        )
    if os.environ.get("FEDPAPER_DATA"):
        raise BadParameterError(
            f"FEDPAPER_DATA={os.environ['FEDPAPER_DATA']!r} does not exist; point it at the folder holding the data sets"
        )
    return path  # the default ~/.fedpaper/data: the loaders report the data set as missing


def missing_error(name: str, looked: list[Path], how: str) -> DataMissingError:
    """A one-line DataMissingError naming the data set, the paths looked at and how to get it."""
    paths = ", ".join(str(p) for p in looked)
    return DataMissingError(f"{name} not found (looked at: {paths}); {how}")


def to_tensor_dataset(name: str, arrays: dict[str, np.ndarray], meta: dict, **extra) -> ImageDataset:
    """Build an ImageDataset from cached uint8/int64 numpy arrays (no copies: torch.from_numpy)."""
    ds = ImageDataset(
        name=name,
        x_train=torch.from_numpy(arrays["x_train"]),
        y_train=torch.from_numpy(arrays["y_train"].astype(np.int64, copy=False)),
        x_test=torch.from_numpy(arrays["x_test"]),
        y_test=torch.from_numpy(arrays["y_test"].astype(np.int64, copy=False)),
        classes=list(meta["classes"]),
        source=meta["source"],
        synthetic=bool(meta.get("synthetic", False)),
        lossy=bool(meta.get("lossy", False)),
    )
    ds.extra.update(extra)
    return ds


def fixed_permutation(n: int, seed: int = 0) -> np.ndarray:
    """The fixed row order used for sources stored grouped by class (so x[:k] mixes classes)."""
    return np.random.default_rng(seed).permutation(n)
