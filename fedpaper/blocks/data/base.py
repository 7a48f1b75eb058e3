"""The in-memory form of every data set: uint8 images and int64 labels, loaded once."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from fedpaper.blocks.data.compact import CompactImages


@dataclass
class ImageDataset:
    """A labelled image data set held as tensors.

    x_*: uint8 [N, C, H, W]; y_*: int64 [N]. `source` says which copy was read (and whether it is
    lossy or synthetic), so provenance can record it. `extra` holds dataset-specific arrays, e.g.
    CIFAR-100's superclass labels `y_train_coarse`, `y_test_coarse` and `coarse_classes`.
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: list[str]
    source: str
    synthetic: bool = False
    lossy: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.x_train.shape[1:])

    def channel_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-channel mean and std of the training images, in [0, 1] units."""
        x = self.x_train.float().div_(255)
        return x.mean(dim=(0, 2, 3)), x.std(dim=(0, 2, 3))

    def compact(self, x: torch.Tensor, size: int | None = None):
        """uint8 images as a compact pool (fedpaper.blocks.data.compact.CompactImages) standardised per
        channel with the training statistics (and resized to `size` per batch, if given)."""
        return CompactImages(x, *self.channel_stats_cached(), size=size)

    def standardize(self, x: torch.Tensor) -> torch.Tensor:
        """uint8 images -> float32, standardised per channel with the training statistics (all
        rows at once; training pools stay compact: `compact`)."""
        return self.compact(x).full()

    def channel_stats_cached(self):
        if "_stats" not in self.extra:
            self.extra["_stats"] = self.channel_stats()
        return self.extra["_stats"]

    def describe(self) -> dict:
        """A small dict for provenance files."""
        return {
            "name": self.name,
            "source": self.source,
            "synthetic": self.synthetic,
            "lossy": self.lossy,
            "n_train": int(self.y_train.numel()),
            "n_test": int(self.y_test.numel()),
            "num_classes": self.num_classes,
        }
