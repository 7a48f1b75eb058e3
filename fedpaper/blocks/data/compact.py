"""Image pools kept compact: uint8 pixels at their native size, standardised (and resized) per batch.

A pool of 40,000 FedNCA-ML composites resized to 224 px and held as float32 takes 24 GB; the same
pool as 64 px uint8 canvases takes 0.5 GB. `CompactImages` keeps the uint8 pixels (on the device
the run trains on, moved there once) and converts only the rows that are read:

    x = pool[idx]                 # float32 [..., C, S, S], standardised, for an index tensor/array/slice
    x = pool.index_select(0, idx) # the same rows (engine.batching.gather's whole-row read)
    pool.shape                    # (N, C, S, S): what a model sees (S = `size`, or the native side)

The conversion is the one the pools were built with up front (`convert`): pixels -> float32,
/ 255, optional bilinear anti-aliased resize to `size` (F.interpolate, per image), minus the
per-channel mean, divided by the per-channel std. Each of these works image by image and element by
element, so a row converted in a batch is the same bits as the same row of the whole pool converted
at once (tests/blocks/test_compact_images.py checks torch.equal on the real data sets' shapes, with and
without a resize); results cached before pools became compact are reproduced exactly.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


class CompactImages:
    """uint8 images [N, C, H, W] read as standardised float32 rows (see the module docstring).

    mean, std: per-channel statistics [C] in [0, 1] units (float32); size: the side the rows are
    resized to (None or the native side: no resize)."""

    dtype = torch.float32

    def __init__(self, pixels, mean, std, size: int | None = None):
        pixels = torch.as_tensor(pixels)
        if pixels.dtype != torch.uint8 or pixels.dim() != 4:
            raise TypeError(f"CompactImages needs uint8 images [N, C, H, W], not {pixels.dtype} {tuple(pixels.shape)}")
        self.pixels = pixels
        self.mean = torch.as_tensor(mean, dtype=torch.float32, device=pixels.device).reshape(-1)
        self.std = torch.as_tensor(std, dtype=torch.float32, device=pixels.device).reshape(-1)
        native = int(pixels.shape[-1])
        self.size = None if size in (None, native) else int(size)
        if len(self.mean) != pixels.shape[1] or len(self.std) != pixels.shape[1]:
            raise ValueError(f"mean/std have {len(self.mean)}/{len(self.std)} entries for {pixels.shape[1]} channels")

    # ---- what a float tensor pool offered
    @property
    def shape(self) -> torch.Size:
        n, c, h, w = self.pixels.shape
        return torch.Size((n, c, self.size, self.size) if self.size else (n, c, h, w))

    @property
    def device(self) -> torch.device:
        return self.pixels.device

    def __len__(self) -> int:
        return int(self.pixels.shape[0])

    def __getitem__(self, idx) -> torch.Tensor:
        """Standardised float32 rows of pool[idx] (idx: an int64 tensor or array of any shape, a
        slice or an int); the result has idx's shape followed by (C, S, S)."""
        if isinstance(idx, np.ndarray):
            idx = torch.from_numpy(np.asarray(idx, dtype=np.int64)).to(self.device)
        elif isinstance(idx, torch.Tensor) and idx.device != self.device:
            idx = idx.to(self.device)
        return self.convert(self.pixels[idx])

    def index_select(self, dim: int, idx: torch.Tensor) -> torch.Tensor:
        if dim != 0:
            raise ValueError("CompactImages selects rows only (dim 0)")
        return self.convert(self.pixels.index_select(0, idx))

    def full(self) -> torch.Tensor:
        """Every row as float32 (the whole pool: for small pools and tests only)."""
        return self[:]

    def to(self, device=None, **_) -> "CompactImages":
        """This pool on `device` (self when it is there already): the pixels move once."""
        device = torch.device(device) if device is not None else self.device
        if device == self.device:
            return self
        return CompactImages(self.pixels.to(device), self.mean.to(device), self.std.to(device), self.size)

    def select(self, rows) -> "CompactImages":
        """A compact pool of some rows (same statistics and size)."""
        return CompactImages(self.pixels[torch.as_tensor(np.asarray(rows), dtype=torch.int64, device=self.device)],
                             self.mean, self.std, self.size)

    @property
    def nbytes(self) -> int:
        """Bytes held (the uint8 pixels)."""
        return self.pixels.numel() * self.pixels.element_size()

    def float_nbytes(self) -> int:
        """Bytes the same pool would take as float32 at the training size (what it used to hold)."""
        return int(np.prod(self.shape)) * 4

    def row_bytes(self) -> int:
        """Bytes of one converted float32 row (a batch of B rows takes B times this)."""
        return int(np.prod(self.shape[1:])) * 4

    # ---- the conversion
    def convert(self, x: torch.Tensor) -> torch.Tensor:
        """uint8 rows [..., C, H, W] -> standardised float32 [..., C, S, S]: float, / 255, resize
        (size set), - mean, / std; outside any autocast (the pools were float32 before training)."""
        with torch.autocast(x.device.type, enabled=False):
            t = x.float().div_(255)
            if self.size:
                lead = t.shape[:-3]
                t = F.interpolate(t.reshape(-1, *t.shape[-3:]), size=(self.size, self.size), mode="bilinear",
                                  align_corners=False, antialias=True)
                t = t.reshape(*lead, *t.shape[-3:])
            return (t - self.mean.view(-1, 1, 1)) / self.std.view(-1, 1, 1)

    def __repr__(self):
        return (f"CompactImages({len(self)} x {tuple(self.pixels.shape[1:])} uint8 on {self.device}"
                f"{f', resized to {self.size} px' if self.size else ''})")


def compact_images(x, mean, std, size=None, device=None) -> CompactImages:
    """A CompactImages of uint8 images `x` (tensor or array) on `device` (default: where x is)."""
    pixels = torch.from_numpy(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x
    return CompactImages(pixels, mean, std, size).to(device)
