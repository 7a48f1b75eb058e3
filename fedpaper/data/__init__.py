"""Data sets of the four papers, loaded once into memory as uint8 image tensors (ImageDataset).

    load_dataset(name, root=None, download=False, **options) -> ImageDataset
    dataset_available(name, root=None) -> bool
    DATASETS: name -> DatasetInfo(description, obtain, offline_lossy)

Data are looked for under fedpaper.paths.data_root (explicit root, $FEDPAPER_DATA, ../shared/data,
~/.fedpaper/data); parsed arrays are cached under fedpaper.paths.cache_dir("data").
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import UnknownNameError
from ..paths import data_root
from . import cifar, fashion_mnist, iwildcam, pacs, synthetic
from .base import ImageDataset
from .iwildcam import iwildcam_metadata, load_iwildcam
from .pacs import load_pacs
from .synthetic import GaussianTask, gaussian_task, sample_gaussian, synthetic_images, target_marginal


@dataclass(frozen=True)
class DatasetInfo:
    """Registry entry: what the data set is, how to obtain it, whether the offline copy is lossy.

    ``offline_lossy`` is None when the project has no offline copy. Entries also read like dicts
    (``DATASETS["cifar10"]["obtain"]``).
    """

    name: str
    description: str
    obtain: str
    offline_lossy: bool | None
    loader: Callable = None
    probe: Callable = None
    identity: Callable = None  # root -> which copy the loader would read (see data_copy), or None


    def __getitem__(self, key):
        return getattr(self, key)


def _synthetic_loader(root=None, download=False, **kw):
    return synthetic.synthetic_images(**kw)


def _pacs_loader(root=None, download=False, **kw):
    return pacs.load_pacs(root, **kw)


def _folder_identity(find_dir):
    """Identity of a single-copy data set held in a folder: the size of its metadata.csv."""
    def identity(root):
        folder = find_dir(root)
        if folder is None:
            return None
        meta = folder / "metadata.csv"
        return {"copy": "original", "files": [[meta.name, meta.stat().st_size]] if meta.is_file() else []}
    return identity


def _iwildcam_loader(root=None, download=False, **kw):
    return iwildcam.load_iwildcam(root, download=download, **kw)


DATASETS: dict[str, DatasetInfo] = {
    "fashion-mnist": DatasetInfo(
        "fashion-mnist", "Fashion-MNIST: 60,000 train + 10,000 test grey 28x28 images, 10 clothing classes",
        fashion_mnist.HOW, False,
        lambda root=None, download=False: fashion_mnist.load(root, download), fashion_mnist.available,
        fashion_mnist.copy_identity),
    "cifar10": DatasetInfo(
        "cifar10", "CIFAR-10: 50,000 train + 10,000 test RGB 32x32 images, 10 classes",
        cifar.how_to_get("cifar10"), True,
        lambda root=None, download=False: cifar.load("cifar10", root, download),
        lambda root: cifar.available(root, "cifar10"), lambda root: cifar.copy_identity(root, "cifar10")),
    "cifar100": DatasetInfo(
        "cifar100", "CIFAR-100: 50,000 train + 10,000 test RGB 32x32 images, 100 fine classes in 20 superclasses",
        cifar.how_to_get("cifar100"), True,
        lambda root=None, download=False: cifar.load("cifar100", root, download),
        lambda root: cifar.available(root, "cifar100"), lambda root: cifar.copy_identity(root, "cifar100")),
    "synthetic-images": DatasetInfo(
        "synthetic-images", "Synthetic class-prototype images plus noise (smoke/test only, never a paper result)",
        "generated on the fly (no download)", None, _synthetic_loader, lambda root: True,
        lambda root: {"copy": "generated"}),
    "pacs": DatasetInfo(
        "pacs", "PACS: 9,991 images, 7 classes, 4 domains (art_painting, cartoon, photo, sketch)",
        pacs.HOW, None, _pacs_loader, pacs.available, _folder_identity(pacs.find_dir)),
    "iwildcam": DatasetInfo(
        "iwildcam", "iWildCam 2020 (WILDS v2.0): camera-trap images, 182 species, camera locations as domains",
        iwildcam.HOW, None, _iwildcam_loader, iwildcam.available, _folder_identity(iwildcam.find_dir)),
}

_ALIASES = {
    "fashionmnist": "fashion-mnist", "fashion_mnist": "fashion-mnist", "fmnist": "fashion-mnist",
    "cifar-10": "cifar10", "cifar-100": "cifar100", "synthetic": "synthetic-images",
}


def canonical_name(name: str) -> str:
    """The registry name for `name` (case-insensitive, a few aliases); UnknownNameError otherwise."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DATASETS:
        raise UnknownNameError(f"unknown data set {name!r}; known data sets: {', '.join(DATASETS)}")
    return key


def load_dataset(name: str, root=None, download: bool = False, **options) -> ImageDataset:
    """Load a data set by name (see DATASETS) as an ImageDataset.

    ``options`` go to the specific loader: synthetic-images takes the arguments of
    ``synthetic_images`` (num_classes, n_train, n_test, shape, seed, noise); pacs takes
    ``target_domain`` and ``size``; iwildcam takes ``size``, ``max_per_split``, ``seed``.
    Raises UnknownNameError, DataMissingError (with where to get the data) or BadParameterError
    (a root that does not exist).
    """
    info = DATASETS[canonical_name(name)]
    return info.loader(root=root, download=download, **options)


def dataset_available(name: str, root=None) -> bool:
    """Whether the data set's files are present under the data root (a cheap check; nothing is parsed)."""
    info = DATASETS[canonical_name(name)]
    path = data_root(root)
    return bool(info.probe(path)) if path.is_dir() or info.name == "synthetic-images" else False


def data_copy(name: str, root=None) -> dict | None:
    """Which copy of the data set `load_dataset(name, root)` would read (e.g. the lossy offline JPEG
    zip or the original batches), with the names and sizes of its files; None when absent. Cheap:
    nothing is parsed. The results store keys runs by it, so results computed on different copies
    never share a cache entry."""
    info = DATASETS[canonical_name(name)]
    if info.name == "synthetic-images":
        return info.identity(None)
    path = data_root(root)
    return info.identity(path) if path.is_dir() else None


__all__ = [
    "DATASETS", "DatasetInfo", "GaussianTask", "ImageDataset", "canonical_name", "data_copy", "dataset_available",
    "gaussian_task", "iwildcam_metadata", "load_dataset", "load_iwildcam", "load_pacs", "sample_gaussian",
    "synthetic_images", "target_marginal",
]
