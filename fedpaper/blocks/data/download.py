"""Fetch the public data sets into a data root, so `fedpaper reproduce` works on a fresh machine.

    download(name, root)                      -> Path of <root>/<name> (DownloadError on failure)
    ensure_datasets(needs, root, opt_in=())   -> {name: outcome}, one printed line per problem
    copy_kind(name, root)                     -> "original download" | "offline copy" | ...

Each fetcher uses the library that documents the data set's source and keeps its checksum check:
torchvision for Fashion-MNIST, CIFAR-10/100 and PASCAL VOC 2007 (md5 of every archive), the
`medmnist` package's URL and md5 for DermaMNIST, `wilds` for iWildCam (WILDS checks no checksum).
PACS, Fitzpatrick 17k and ChestX-ray14 have no scriptable public source a library fetches; for them
the one-line message says how to get them.

Placement is atomic: a fetcher writes into a staging folder ``<root>/.fedpaper-download-<name>-*``
(which no loader looks at), then each finished entry is renamed into ``<root>/<name>/`` (a rename
within one file system), and a marker ``<root>/<name>/.fedpaper-download.json`` records what was
fetched from where. An interrupted or failed download removes its staging folder; even when the
process is killed, only the staging folder is left, and nothing a loader reads.
"""
from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import os
import shutil
import socket
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from fedpaper.ground.errors import FedpaperError, UnknownNameError
from fedpaper.ground.files import atomic_write_text
from fedpaper.ground.jsonio import now_iso
from fedpaper.ground.procs import pid_alive

MARKER = ".fedpaper-download.json"
STAGING_PREFIX = ".fedpaper-download-"
#: seconds to wait for the first answer of a source (a machine without network fails within this)
PROBE_TIMEOUT_S = 10.0
#: seconds a running download may stall before it is abandoned
READ_TIMEOUT_S = 60.0
MB = 1_000_000


class DownloadError(FedpaperError):
    """A data set could not be downloaded (no network, no library, unwritable root, ...)."""


@dataclass(frozen=True)
class Source:
    """How one data set is fetched.

    ``stage(folder)`` downloads into ``folder`` (the staging copy of ``<root>/<name>``) and returns
    the entries of ``folder`` that make up the loadable copy; everything else it leaves there
    (archives) is deleted with the staging folder. ``urls()`` lists the files the library will
    download (for the size announcement and the fast network check).
    """

    name: str
    title: str
    size_mb: float  # the size the source documents, used when the server announces none
    stage: Callable[[Path], list[str]]
    urls: Callable[[], list[str]]
    library: str = "torchvision"
    install: str = ""
    large: bool = False  # fetched only on explicit opt-in (--download NAME / --download all)
    note: str = ""


# --------------------------------------------------------------------------- fetchers
def _tv_fashion_urls() -> list[str]:
    from torchvision.datasets import FashionMNIST

    return [FashionMNIST.mirrors[0] + fname for fname, _ in FashionMNIST.resources]


def _stage_fashion_mnist(folder: Path) -> list[str]:
    from torchvision.datasets import FashionMNIST

    FashionMNIST(root=str(folder), train=True, download=True)  # all four files, md5-checked
    return ["FashionMNIST"]


def _tv_cifar_class(name: str):
    from torchvision.datasets import CIFAR10, CIFAR100

    return CIFAR10 if name == "cifar10" else CIFAR100


def _stage_cifar(name: str) -> Callable[[Path], list[str]]:
    def stage(folder: Path) -> list[str]:
        cls = _tv_cifar_class(name)
        cls(root=str(folder), train=True, download=True)  # archive md5 + every batch's md5
        return [cls.base_folder]

    return stage


def _dermamnist_info() -> dict:
    import medmnist

    return medmnist.INFO["dermamnist"]


def _stage_dermamnist(folder: Path) -> list[str]:
    """The 28x28 DermaMNIST npz from the URL and md5 the medmnist package lists (its own download
    call is the same torchvision download_url; calling it here keeps its errors readable)."""
    import medmnist
    from torchvision.datasets.utils import download_url

    info = _dermamnist_info()
    folder.mkdir(parents=True, exist_ok=True)
    download_url(info["url"], str(folder), filename="dermamnist.npz", md5=info["MD5"])
    medmnist.DermaMNIST(split="test", root=str(folder), download=False)  # opens: a valid npz
    return ["dermamnist.npz"]


VOC_CLASSES = ["aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
               "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa",
               "train", "tvmonitor"]


def _voc_urls() -> list[str]:
    from torchvision.datasets.voc import DATASET_YEAR_DICT

    return [DATASET_YEAR_DICT["2007"]["url"], DATASET_YEAR_DICT["2007-test"]["url"]]


def voc_label_table(devkit: Path) -> str:
    """The image-level label CSV of the offline copy (image_id, split, one column per class with
    1 present, 0 difficult, -1 absent) built from VOC 2007's ImageSets/Main files."""
    main = devkit / "ImageSets" / "Main"
    rows: dict[str, dict] = {}
    for split in ("train", "val", "test"):
        for cls in VOC_CLASSES:
            for line in (main / f"{cls}_{split}.txt").read_text().split("\n"):
                if line.strip():
                    image_id, flag = line.split()
                    rows.setdefault(image_id, {"image_id": image_id, "split": split})[cls] = int(flag)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["image_id", "split", *VOC_CLASSES], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows[k] for k in sorted(rows))
    return out.getvalue()


def _stage_voc2007(folder: Path) -> list[str]:
    from torchvision.datasets import VOCDetection

    for image_set in ("trainval", "test"):  # two tar archives, md5-checked by torchvision
        VOCDetection(root=str(folder), year="2007", image_set=image_set, download=True)
    table = voc_label_table(folder / "VOCdevkit" / "VOC2007")
    (folder / "voc2007-labels.csv.gz").write_bytes(gzip.compress(table.encode(), mtime=0))
    return ["VOCdevkit", "voc2007-labels.csv.gz"]


def _iwildcam_urls() -> list[str]:
    from wilds.datasets.iwildcam_dataset import IWildCamDataset

    return [IWildCamDataset._versions_dict["2.0"]["download_url"]]


def _stage_iwildcam(folder: Path) -> list[str]:
    import wilds

    folder.mkdir(parents=True, exist_ok=True)
    wilds.get_dataset(dataset="iwildcam", root_dir=str(folder), download=True)
    return ["iwildcam_v2.0"]


# Sizes (MB = 10^6 bytes) as the sources document them, shown when a server announces none:
# Fashion-MNIST's four gzip files (26.4 + 0.03 + 4.4 + 0.005 MB, its README); the CIFAR python
# tarballs (170,498,071 and 169,001,437 bytes; "163 MB"/"161 MB" in MiB on the CIFAR page);
# DermaMNIST's 28x28 npz (about 20 MB, Zenodo record 10519652); VOC 2007 trainval + test tars
# (about 0.9 GB together); iWildCam v2.0 (about 11 GB, WILDS).
SOURCES: dict[str, Source] = {s.name: s for s in [
    Source("fashion-mnist", "Fashion-MNIST", 30.9, _stage_fashion_mnist, _tv_fashion_urls),
    Source("cifar10", "CIFAR-10", 170.5, _stage_cifar("cifar10"),
           lambda: [_tv_cifar_class("cifar10").url]),
    Source("cifar100", "CIFAR-100", 169.0, _stage_cifar("cifar100"),
           lambda: [_tv_cifar_class("cifar100").url]),
    Source("dermamnist", "DermaMNIST (MedMNIST v2, 28x28)", 20.0, _stage_dermamnist,
           lambda: [_dermamnist_info()["url"]], library="medmnist", install="pip install medmnist"),
    Source("voc2007", "PASCAL VOC 2007 (images and labels)", 900.0, _stage_voc2007, _voc_urls,
           large=True, note="the label files come only inside the image archives"),
    Source("iwildcam", "iWildCam 2020 (WILDS v2.0)", 11_000.0, _stage_iwildcam, _iwildcam_urls,
           library="wilds", install="pip install wilds", large=True),
]}

#: data sets no library fetches: why, and how to get them (one line each)
NOT_FETCHABLE: dict[str, str] = {
    "pacs": "no library downloads the Bai et al. 2024 federated PACS split; download it from "
            "https://github.com/inouye-lab/FedDG_Benchmark (or DomainBed's PACS) into <root>/pacs",
    "chestxray14": "the NIH release (label table Data_Entry_2017.csv and about 42 GB of images) is "
                   "served from a Box folder without a stable file URL; download it from "
                   "https://nihcc.app.box.com/v/ChestXray-NIHCC into <root>/chestxray14",
    "fitzpatrick17k": "the images are fetched from the URLs in fitzpatrick17k.csv "
                      "(https://github.com/mattgroh/fitzpatrick17k), many of which are gone; "
                      "download what remains into <root>/fitzpatrick17k",
}


def known_names() -> list[str]:
    return [*SOURCES, *NOT_FETCHABLE]


def check_names(names: Iterable[str]) -> list[str]:
    """Validate --download names ("all" or data set names); UnknownNameError names the known ones."""
    names = [str(n).strip().lower() for n in names]
    bad = [n for n in names if n != "all" and n not in SOURCES and n not in NOT_FETCHABLE]
    if bad:
        raise UnknownNameError(f"unknown data set {bad[0]!r} for --download; use 'all' or one of: "
                               f"{', '.join(known_names())}")
    return names


# --------------------------------------------------------------------------- size + network check
def reason(exc: BaseException) -> str:
    """A short one-line reason for a failed download."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"network unreachable ({exc.reason})"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "the source did not answer in time"
    text = " ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip())  # one line
    if len(text) > 240:
        text = text[:237] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def announced_size(urls: list[str], timeout: float = PROBE_TIMEOUT_S) -> int | None:
    """The total Content-Length of `urls` from HEAD requests (None when a server announces none).

    Raises DownloadError quickly (within `timeout`) when the first source does not answer, so a
    machine without network fails fast instead of waiting in the library's download. A server
    that answers with an HTTP error (e.g. no HEAD support) gives None: the library's download
    then reports a missing file itself.
    """
    total = 0
    for url in urls:
        try:
            req = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "fedpaper"})
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                length = resp.headers.get("Content-Length")
        except urllib.error.HTTPError:  # the server answers but not to HEAD: size unknown, go on
            return None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise DownloadError(reason(exc)) from exc
        if length is None:
            return None
        total += int(length)
    return total


@contextlib.contextmanager
def _socket_timeout(seconds: float):
    """Stalled downloads raise instead of hanging (torchvision's urlopen takes no timeout)."""
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(old)


# --------------------------------------------------------------------------- staging + placement
def _read_only(path: Path) -> bool:
    """Whether `path` (or, if missing, its nearest existing parent) may not be written.

    A folder without any write permission bit counts as read-only even for root (the offline
    copies are kept that way: "no copy may be modified in place")."""
    existing = next(p for p in [path, *path.parents] if p.exists())
    return not (existing.stat().st_mode & 0o222) or not os.access(existing, os.W_OK)


def _writable_root(root: Path) -> Path:
    if _read_only(root):
        raise DownloadError(f"the data root {root} is read-only (pass --data-root <a writable folder>)")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadError(f"cannot create the data root {root} ({exc.strerror})") from exc
    if not os.access(root, os.W_OK):
        raise DownloadError(f"the data root {root} is not writable (pass --data-root <a writable folder>)")
    return root


def _remove_stale_staging(root: Path, name: str) -> None:
    """Staging folders of the same data set left by a killed process (its pid no longer runs)."""
    for old in root.glob(f"{STAGING_PREFIX}{name}-*"):
        pid = old.name.removeprefix(f"{STAGING_PREFIX}{name}-").split("-")[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)


def place(staged: Path, target: Path, entries: list[str]) -> None:
    """Rename each finished entry of the staging folder into `target` (atomic per entry).

    An existing entry of the same name (a leftover of a download made outside fedpaper) is not
    overwritten: DownloadError says to remove it.
    """
    for entry in entries:
        if not (staged / entry).exists():
            raise DownloadError(f"the download did not produce {entry}")
        if (target / entry).exists():
            raise DownloadError(f"{target / entry} exists but does not hold a complete copy; "
                                "remove it and run again")
    target.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        os.rename(staged / entry, target / entry)


def _write_marker(target: Path, record: dict) -> None:
    atomic_write_text(target / MARKER, json.dumps(record, indent=1, sort_keys=True) + "\n")


def _library_version(module: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return None


def _check_library(src: Source) -> None:
    try:
        __import__(src.library)
    except ImportError as exc:
        raise DownloadError(f"the {src.library} package is not installed ({src.install})") from exc


def download(name: str, root, *, log: Callable[[str], None] = print) -> Path:
    """Fetch data set `name` into ``<root>/<name>`` atomically; returns that folder.

    Announces the size before it starts (HEAD request, else the documented size); the library
    shows one progress bar per file. Raises DownloadError with a one-line reason.
    """
    if name not in SOURCES:
        raise DownloadError(NOT_FETCHABLE.get(name, f"no downloader for {name!r}"))
    src = SOURCES[name]
    _check_library(src)
    root = _writable_root(Path(root))
    try:
        urls = src.urls()
    except Exception as exc:  # e.g. a library version without the attribute read here
        raise DownloadError(f"cannot find the source URL ({reason(exc)})") from exc
    size = announced_size(urls)
    shown = f"{size / MB:,.1f} MB" if size else f"about {human_size(src.size_mb)} (documented size)"
    log(f"downloading {name}: {src.title}, {shown} from {urls[0]}{' and more' if len(urls) > 1 else ''} "
        f"into {root / name}")
    _remove_stale_staging(root, name)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{name}-{os.getpid()}-", dir=root))
    try:
        with _socket_timeout(READ_TIMEOUT_S):
            entries = src.stage(staging / name)
        place(staging / name, root / name, entries)
    except DownloadError:
        raise
    except Exception as exc:  # the library's own error, as one line (KeyboardInterrupt passes)
        raise DownloadError(reason(exc)) from exc
    finally:  # interrupted or failed: nothing of the staging folder stays
        shutil.rmtree(staging, ignore_errors=True)
    _write_marker(root / name, {
        "name": name, "title": src.title, "urls": urls, "bytes": size, "entries": entries,
        "library": src.library, "library_version": _library_version(src.library),
        "checksum": "md5 verified by the library" if src.library != "wilds" else "none published",
        "downloaded_at": now_iso(),
    })
    return root / name


def human_size(mb: float) -> str:
    """'170 MB', '11 GB'."""
    return f"{mb / 1000:,.1f} GB".replace(".0 GB", " GB") if mb >= 1000 else f"{mb:,.0f} MB"


# --------------------------------------------------------------------------- provenance
#: files of the project's offline copies (../shared/data/README.md), relative to the data root
OFFLINE_FILES = {
    "fashion-mnist": "fashion-mnist/FashionMNIST/raw/train-images-idx3-ubyte.gz",
    "cifar10": "cifar10/cifar10-jpeg.zip",
    "cifar100": "cifar100/cifar100-jpeg95.zip",
    "dermamnist": "dermamnist/dermamnist.npz",
    "voc2007": "voc2007/voc2007-labels.csv.gz",
    "chestxray14": "chestxray14/Data_Entry_2017.csv.gz",
}


def download_record(name: str, root) -> dict | None:
    """The marker fedpaper wrote when it downloaded `name` into `root`, else None."""
    try:
        return json.loads((Path(root) / name / MARKER).read_text())
    except (OSError, ValueError):
        return None


def copy_kind(name: str, root) -> str:
    """Which copy of `name` a result under `root` used.

    "original download" (fetched by fedpaper from the source; the loaders prefer these files),
    "offline copy" (the project's copies, some lossy), or "own copy" (files placed by the user).
    """
    if download_record(name, root) is not None:
        return "original download"
    offline = OFFLINE_FILES.get(name)
    if offline and (Path(root) / offline).is_file():
        return "offline copy"
    return "own copy"
