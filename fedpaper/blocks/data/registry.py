"""The one registry of the data sets of the four papers: what each is, how to get it, where its
files are, whether the offline copy is lossy, and (for the ones fedpaper loads) its loader.

    DATASETS[name] -> DatasetInfo
    dataset_available(name, root=None)   cheap file check; "none" and "<name>:labels" too
    data_copy(name, root=None)           which copy a loader would read (for the results-cache key)
    how_to_get(name), missing_message(name, root)

Light on purpose (no torch, no loader imported until used), so the artifact catalog and the CLI
can use it without loading the data stack.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional

from fedpaper.ground.errors import UnknownNameError
from fedpaper.ground.paths import data_root


@dataclass(frozen=True)
class DatasetInfo:
    """One data set. `loadable`: fedpaper has a loader for it (see `_loaders`); otherwise the file
    layouts (`files`, `label_files`, `any_dir`, relative to the data root) say whether it is present."""

    name: str
    title: str
    description: str
    how_to_get: str
    copy_note: str = ""  # what the offline copy is (lossy?)
    lossy_offline: Optional[bool] = None  # None: the project has no offline copy
    files: tuple[str, ...] = ()  # any one of these means "available"
    label_files: tuple[str, ...] = ()  # enough for "<name>:labels"
    any_dir: tuple[str, ...] = ()  # a non-empty folder means "available"
    labels_how: str = ""  # how to get the label file alone (for "<name>:labels")
    loadable: bool = False

    def loader(self) -> Optional["Loader"]:
        """The loader's functions (imported on first use), or None when fedpaper has none."""
        return _loaders()[self.name] if self.loadable else None


@dataclass(frozen=True)
class Loader:
    """load(root, download, **options) -> ImageDataset; available(root) and copy_identity(root)
    are cheap file checks (root: the resolved data root)."""

    load: Callable
    available: Callable
    copy_identity: Callable


def _folder_identity(find_dir):
    """Identity of a single-copy data set held in a folder: the size of its metadata.csv."""
    def identity(root):
        folder = find_dir(root)
        if folder is None:
            return None
        meta = folder / "metadata.csv"
        return {"copy": "original", "files": [[meta.name, meta.stat().st_size]] if meta.is_file() else []}
    return identity


@lru_cache(maxsize=1)
def _loaders() -> dict[str, Loader]:
    from fedpaper.blocks.data import cifar, dermamnist, fashion_mnist, iwildcam, pacs, synthetic  # start-up time: they import torch

    def cifar_loader(name):
        return Loader(lambda root=None, download=False: cifar.load(name, root, download),
                      lambda root: cifar.available(root, name), lambda root: cifar.copy_identity(root, name))

    return {
        "fashion-mnist": Loader(lambda root=None, download=False: fashion_mnist.load(root, download),
                                fashion_mnist.available, fashion_mnist.copy_identity),
        "cifar10": cifar_loader("cifar10"),
        "cifar100": cifar_loader("cifar100"),
        "synthetic-images": Loader(lambda root=None, download=False, **kw: synthetic.synthetic_images(**kw),
                                   lambda root: True, lambda root: {"copy": "generated"}),
        "pacs": Loader(lambda root=None, download=False, **kw: pacs.load_pacs(root, **kw), pacs.available,
                       _folder_identity(pacs.find_dir)),
        "iwildcam": Loader(lambda root=None, download=False, **kw: iwildcam.load_iwildcam(root, download=download, **kw),
                           iwildcam.available, _folder_identity(iwildcam.find_dir)),
        "dermamnist": Loader(lambda root=None, download=False: dermamnist.load(root, download), dermamnist.available,
                             dermamnist.copy_identity),
    }


_OFFLINE = "set FEDPAPER_DATA to the offline copies (../shared/data) or "

DATASETS: dict[str, DatasetInfo] = {d.name: d for d in [
    DatasetInfo(
        "fashion-mnist", "Fashion-MNIST",
        "Fashion-MNIST: 60,000 train + 10,000 test grey 28x28 images, 10 clothing classes",
        _OFFLINE + "let torchvision download it: torchvision.datasets.FashionMNIST(root='<data root>/fashion-mnist', "
        "download=True)",
        copy_note="offline copy: pixels and labels identical, row order differs", lossy_offline=False,
        files=("fashion-mnist/FashionMNIST/raw/train-images-idx3-ubyte.gz",
               "fashion-mnist/FashionMNIST/raw/train-images-idx3-ubyte"),
        loadable=True),
    DatasetInfo(
        "cifar10", "CIFAR-10", "CIFAR-10: 50,000 train + 10,000 test RGB 32x32 images, 10 classes",
        _OFFLINE + "let torchvision download it: torchvision.datasets.CIFAR10(root='<data root>/cifar10', download=True)",
        copy_note="offline copy is LOSSY (JPEG-compressed)", lossy_offline=True,
        files=("cifar10/cifar10-jpeg.zip", "cifar10/cifar-10-batches-py/data_batch_1"), loadable=True),
    DatasetInfo(
        "cifar100", "CIFAR-100",
        "CIFAR-100: 50,000 train + 10,000 test RGB 32x32 images, 100 fine classes in 20 superclasses",
        _OFFLINE + "let torchvision download it: torchvision.datasets.CIFAR100(root='<data root>/cifar100', "
        "download=True)",
        copy_note="offline copy nearly lossless (JPEG quality 95, PSNR ~40 dB)", lossy_offline=True,
        files=("cifar100/cifar100-jpeg95.zip", "cifar100/cifar-100-python/train"), loadable=True),
    DatasetInfo(
        "synthetic-images", "Synthetic images",
        "Synthetic class-prototype images plus noise (smoke/test only, never a paper result)",
        "generated on the fly (no download)", loadable=True),
    DatasetInfo(
        "dermamnist", "DermaMNIST (MedMNIST v2)", "DermaMNIST (MedMNIST v2): 28x28 dermatoscopic images, 7 classes",
        _OFFLINE + "download it with the medmnist package (pip install medmnist; DermaMNIST(split='train', "
        "download=True, root='<data root>/dermamnist'))",
        copy_note="offline copy is LOSSY (rebuilt from JPEG copies, quality ~75)", lossy_offline=True,
        files=("dermamnist/dermamnist.npz", "dermamnist/dermamnist_28.npz"), loadable=True),
    DatasetInfo(
        "pacs", "PACS (Bai et al. 2024 federated split)",
        "PACS: 9,991 images, 7 classes, 4 domains (art_painting, cartoon, photo, sketch)",
        "download PACS (the Bai et al. 2024 federated domain-generalization benchmark, "
        "github.com/inouye-lab/FedDG_Benchmark) and unpack it into <data root>/pacs/",
        any_dir=("pacs",), loadable=True),
    DatasetInfo(
        "iwildcam", "iWildCam (WILDS)",
        "iWildCam 2020 (WILDS v2.0): camera-trap images, 182 species, camera locations as domains",
        "pip install wilds, then wilds.get_dataset('iwildcam', download=True, root_dir='<data root>/iwildcam') "
        "(about 11 GB)",
        any_dir=("iwildcam",), loadable=True),
    DatasetInfo(
        "voc2007", "PASCAL VOC", "PASCAL VOC 2007/2012: multi-label images, 20 classes",
        "the offline copies hold VOC 2007 labels only; for images run "
        "torchvision.datasets.VOCDetection(root='<data root>/voc2007', year='2012', image_set='trainval', "
        "download=True)",
        copy_note="offline copy: image-level labels only (exact)", lossy_offline=False,
        label_files=("voc2007/voc2007-labels.csv.gz",),
        labels_how="the offline copies hold them as voc2007/voc2007-labels.csv.gz (set FEDPAPER_DATA=../shared/data), "
                   "or download VOC 2007 with torchvision.datasets.VOCDetection(root='<data root>/voc2007', "
                   "year='2007', download=True)",
        any_dir=("voc2007/VOCdevkit/VOC2012/JPEGImages", "voc2007/VOCdevkit/VOC2007/JPEGImages")),
    DatasetInfo(
        "chestxray14", "NIH ChestX-ray14", "NIH ChestX-ray14: 112,120 chest X-rays, 14 finding labels (multi-label)",
        "the offline copies hold the label file only; download the images (about 42 GB) from the NIH Clinical "
        "Center ChestX-ray release (or Kaggle 'NIH Chest X-rays') into <data root>/chestxray14/images/",
        copy_note="offline copy: metadata and labels only (exact)", lossy_offline=False,
        label_files=("chestxray14/Data_Entry_2017.csv.gz", "chestxray14/Data_Entry_2017.csv"),
        labels_how="the offline copies hold them as chestxray14/Data_Entry_2017.csv.gz (set "
                   "FEDPAPER_DATA=../shared/data), or download Data_Entry_2017.csv from the NIH Clinical Center "
                   "ChestX-ray release into <data root>/chestxray14/",
        any_dir=("chestxray14/images",)),
    DatasetInfo(
        "fitzpatrick17k", "Fitzpatrick 17k", "Fitzpatrick 17k: 16,577 clinical skin images, skin-type labels",
        "download fitzpatrick17k.csv from github.com/mattgroh/fitzpatrick17k and the images it lists into "
        "<data root>/fitzpatrick17k/",
        any_dir=("fitzpatrick17k",)),
]}

_ALIASES = {
    "fashionmnist": "fashion-mnist", "fashion_mnist": "fashion-mnist", "fmnist": "fashion-mnist",
    "cifar-10": "cifar10", "cifar-100": "cifar100", "synthetic": "synthetic-images",
}


def unknown_message(what: str, name: str, known) -> str:
    """'unknown <what> <name>; did you mean ...?' (or the known names)."""
    known = list(known)
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known[:12])}{' ...' if len(known) > 12 else ''}"
    return f"unknown {what} {name!r}; {hint}"


def canonical_name(name: str) -> str:
    """The registry name for `name` (case-insensitive, a few aliases); UnknownNameError otherwise."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DATASETS:
        raise UnknownNameError(f"unknown data set {name!r}; known data sets: {', '.join(DATASETS)}")
    return key


def split_need(need: str) -> tuple[str, bool]:
    """'voc2007:labels' -> ('voc2007', True); 'cifar10' -> ('cifar10', False)."""
    name, _, part = need.partition(":")
    if part not in ("", "labels"):
        raise UnknownNameError(f"unknown data set part {need!r}; use '<name>' or '<name>:labels'")
    return name, part == "labels"


def dataset_info(name: str) -> DatasetInfo:
    base, _ = split_need(name)
    try:
        return DATASETS[base]
    except KeyError:
        raise UnknownNameError(unknown_message("data set", base, DATASETS)) from None


def _nonempty_dir(p: Path) -> bool:
    try:
        return p.is_dir() and any(p.iterdir())
    except OSError:
        return False


def dataset_available(name: str, root: str | os.PathLike | None = None) -> bool:
    """Cheap on-disk check (no parsing): the loader's own check where fedpaper loads the data set
    (so "available" means the loader will find the files), else the file layouts. "none" is
    always available; "<name>:labels" needs only the label file."""
    if name == "none":
        return True
    base, labels_only = split_need(name)
    info = dataset_info(canonical_name(base) if base.lower() in _ALIASES else base)
    if info.name == "synthetic-images":
        return True
    r = data_root(root)
    if not r.is_dir():
        return False
    if labels_only and any((r / f).is_file() for f in info.label_files):
        return True
    if info.loadable:
        return bool(info.loader().available(r))
    return any((r / f).is_file() for f in info.files) or any(_nonempty_dir(r / d) for d in info.any_dir)


def data_copy(name: str, root=None) -> Optional[dict]:
    """Which copy of the data set `load_dataset(name, root)` would read (e.g. the lossy offline JPEG
    zip or the original batches), with the names and sizes of its files; None when absent. Cheap:
    nothing is parsed. The results store keys runs by it, so results computed on different copies
    never share a cache entry."""
    info = DATASETS[canonical_name(name)]
    if not info.loadable:
        return None
    r = None if info.name == "synthetic-images" else data_root(root)
    if r is not None and not r.is_dir():
        return None
    return info.loader().copy_identity(r)


def dataset_location(name: str, root=None) -> Path:
    """The folder where a data set is looked for."""
    base, _ = split_need(name)
    return data_root(root) / base


def how_to_get(name: str) -> str:
    """'<title> (<name>): how to get it' without machine-specific paths."""
    base, labels_only = split_need(name)
    info = dataset_info(base)
    if labels_only and info.labels_how:
        return f"{info.title} labels (`{base}:labels`): {info.labels_how}"
    return f"{info.title} (`{base}`): {info.how_to_get}"


def missing_message(name: str, root=None) -> str:
    """One line: which data set is missing, where it was looked for, how to get it."""
    base, labels_only = split_need(name)
    info = dataset_info(base)
    what = f"{info.title} labels" if labels_only else info.title
    if info.label_files and not labels_only:
        what = f"{info.title} images"
    how = info.labels_how if (labels_only and info.labels_how) else info.how_to_get
    return (f"data set {what} ({base}) not found under {dataset_location(base, root)}; "
            f"{how} (or pass --data-root / set FEDPAPER_DATA)")


def load_dataset(name: str, root=None, download: bool = False, **options):
    """Load a data set by name (see DATASETS) as an ImageDataset.

    ``options`` go to the specific loader: synthetic-images takes the arguments of
    ``synthetic_images`` (num_classes, n_train, n_test, shape, seed, noise); pacs takes
    ``target_domain`` and ``size``; iwildcam takes ``size``, ``max_per_split``, ``seed``.
    Raises UnknownNameError, DataMissingError (with where to get the data) or BadParameterError
    (a root that does not exist).
    """
    info = DATASETS[canonical_name(name)]
    if not info.loadable:
        raise UnknownNameError(f"data set {info.name!r} has no loader in fedpaper yet; loadable: "
                               f"{', '.join(n for n, d in DATASETS.items() if d.loadable)}")
    return info.loader().load(root=root, download=download, **options)

