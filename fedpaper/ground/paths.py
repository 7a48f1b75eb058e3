"""Where fedpaper finds data, keeps its caches and writes figures.

Data root, in order: an explicit argument, the FEDPAPER_DATA environment variable, the
project's sibling folder ../shared/data (the offline copies), else ~/.fedpaper/data (where
torchvision downloads go when a user allows downloads).
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The folder holding the data sets (see the module docstring for the search order)."""
    if root is not None:
        return Path(root).expanduser().resolve()
    env = os.environ.get("FEDPAPER_DATA")
    if env:
        return Path(env).expanduser().resolve()
    shared = REPO_ROOT.parent / "shared" / "data"
    if shared.is_dir():
        return shared.resolve()
    return Path.home() / ".fedpaper" / "data"


def cache_dir(*parts: str) -> Path:
    """A cache folder (parsed arrays, run results); FEDPAPER_CACHE overrides <repo>/.cache."""
    base = Path(os.environ.get("FEDPAPER_CACHE", REPO_ROOT / ".cache"))
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def dry_run_scratch() -> Path:
    """Where a dry run writes unless --out-dir says otherwise: <cache>/dry-run/figures (never figures/)."""
    return cache_dir("dry-run") / "figures"


def figures_dir() -> Path:
    """The committed artifact folder, <repo>/figures (FEDPAPER_FIGURES overrides)."""
    return Path(os.environ.get("FEDPAPER_FIGURES", REPO_ROOT / "figures"))


#: Free space an output folder must have before a run starts (an artifact's four files are a few MB).
MIN_FREE_BYTES = 50 * 2**20


def unwritable_reason(folder: str | os.PathLike, min_free: int = MIN_FREE_BYTES) -> str | None:
    """Why results could not be written under `folder` (None when they can): its nearest existing
    ancestor must be a folder in which a file can be created, with `min_free` bytes free. Probes by
    creating and removing a temporary file (permission bits alone miss read-only mounts), creates
    no folder."""
    import shutil
    import tempfile

    p = Path(folder).expanduser().absolute()
    existing = next((a for a in (p, *p.parents) if a.exists()), None)
    if existing is None or not existing.is_dir():
        return f"{existing} is not a folder"
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".fedpaper-write-probe-"):
            pass
    except OSError as e:
        return f"{existing} is not writable ({e.strerror or e})"
    free = shutil.disk_usage(existing).free
    if free < min_free:
        return f"{existing} has {free / 2**20:.0f} MiB free (needs at least {min_free / 2**20:.0f} MiB)"
    return None
