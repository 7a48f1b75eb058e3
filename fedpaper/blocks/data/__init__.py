"""Data sets of the four papers, loaded once into memory as uint8 image tensors (ImageDataset).

    load_dataset(name, root=None, download=False, **options) -> ImageDataset
    dataset_available(name, root=None) -> bool
    data_copy(name, root=None) -> which copy the loader would read (results-cache key)
    DATASETS: name -> DatasetInfo (the one registry, fedpaper.blocks.data.registry)

Data are looked for under fedpaper.ground.paths.data_root (explicit root, $FEDPAPER_DATA, ../shared/data,
~/.fedpaper/data); parsed arrays are cached under fedpaper.ground.paths.cache_dir("data"). Importing this
package is cheap: the loaders (and torch) are imported when first used.
"""
from __future__ import annotations

import importlib

from fedpaper.blocks.data.registry import (
    DATASETS,
    DatasetInfo,
    canonical_name,
    data_copy,
    dataset_available,
    dataset_info,
    how_to_get,
    load_dataset,
    missing_message,
)

#: Names served from the loader modules on first use (PEP 562), so the registry stays light.
_LAZY = {
    "ImageDataset": "base", "GaussianTask": "synthetic", "gaussian_task": "synthetic",
    "sample_gaussian": "synthetic", "synthetic_images": "synthetic", "target_marginal": "synthetic",
    "iwildcam_metadata": "iwildcam", "load_iwildcam": "iwildcam", "load_pacs": "pacs",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DATASETS", "DatasetInfo", "GaussianTask", "ImageDataset", "canonical_name", "data_copy", "dataset_available",
    "dataset_info", "gaussian_task", "how_to_get", "iwildcam_metadata", "load_dataset", "load_iwildcam",
    "load_pacs", "missing_message", "sample_gaussian", "synthetic_images", "target_marginal",
]
