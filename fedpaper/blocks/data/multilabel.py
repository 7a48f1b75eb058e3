"""Multi-label composites of single-label images (FedNCA-ML Sec. 5.1, App. C, after Li et al. 2023a).

FedNCA-ML builds multi-label CIFAR-10 and DermaMNIST by keeping single-label images and adding
"an equal number of composites for each class pair", each composite merging two images of
different classes and carrying the union of their labels. The paper gives neither counts nor
geometry; the defaults follow targets/fednca.md vague-1 (Li et al. 2023a, `Exp_CIFAR.ipynb`):

- every image (single or part of a composite) is zero-padded into a canvas twice its side
  (CIFAR-10: 32 -> 64 px; DermaMNIST: 28 -> 56 px), placed near one corner with a random offset
  of 0..max_offset pixels (default 7) from that corner;
- a composite places its two images in opposite corners (top-left/bottom-right or
  top-right/bottom-left, drawn at random) and merges them by the pixel-wise maximum;
- single-label images keep their one-hot label; a composite's label is the union (two-hot).

`composite_split` builds one split; `composite_counts` states how many rows of each kind it holds.
Source images of composites are drawn with replacement within each class (vague-1).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from fedpaper.ground.errors import BadParameterError, check_range

CORNERS = ("tl", "tr", "bl", "br")
OPPOSITE = {"tl": "br", "br": "tl", "tr": "bl", "bl": "tr"}


@dataclass
class CompositeSplit:
    """One split of a composite data set.

    x: uint8 [N, C, S, S] (S the canvas side); y: float32 multi-hot [N, K]; parts: int64 [N, 2]
    the source-image rows of each row (-1 in the second column for single-label rows); corners:
    [N, 2] corner codes (index into CORNERS; -1 unused), so a test can rebuild any row."""

    x: np.ndarray
    y: np.ndarray
    parts: np.ndarray
    corners: np.ndarray

    @property
    def n_single(self) -> int:
        return int((self.parts[:, 1] < 0).sum())

    @property
    def n_composite(self) -> int:
        return int((self.parts[:, 1] >= 0).sum())


def _corner_origin(corner: str, side: int, canvas: int, offset: int) -> tuple[int, int]:
    top = offset if corner[0] == "t" else canvas - side - offset
    left = offset if corner[1] == "l" else canvas - side - offset
    return top, left


def place(img: np.ndarray, corner: str, offset: tuple[int, int], canvas: int) -> np.ndarray:
    """img [C, s, s] zero-padded into a [C, canvas, canvas] canvas at `corner`, `offset` pixels
    (rows, columns) in from that corner."""
    c, s, _ = img.shape
    out = np.zeros((c, canvas, canvas), dtype=img.dtype)
    top, _ = _corner_origin(corner, s, canvas, offset[0])
    _, left = _corner_origin(corner, s, canvas, offset[1])
    out[:, top:top + s, left:left + s] = img
    return out


def composite_counts(labels, singles_per_class, pairs_per_class_pair: int, num_classes: int) -> dict:
    """How many rows a split built by `composite_split` holds: singles per class (all if None),
    composites (pairs_per_class_pair for each of the K(K-1)/2 pairs) and the total."""
    counts = np.bincount(np.asarray(labels), minlength=num_classes)
    single = counts if singles_per_class is None else np.minimum(counts, singles_per_class)
    n_pairs = num_classes * (num_classes - 1) // 2
    return {"singles": int(single.sum()), "composites": int(pairs_per_class_pair * n_pairs),
            "pairs": n_pairs, "total": int(single.sum() + pairs_per_class_pair * n_pairs),
            "singles_per_class": single.tolist()}


def composite_split(images, labels, num_classes: int, *, singles_per_class: int | None,
                    pairs_per_class_pair: int, seed: int, max_offset: int = 7, canvas: int | None = None
                    ) -> CompositeSplit:
    """Single-label images [N, C, s, s] (uint8) with labels [N] -> a multi-label composite split.

    singles_per_class: how many single-label images of each class are kept (None: all, as for
    DermaMNIST; the first ones of a seeded permutation otherwise); pairs_per_class_pair: composites
    per unordered class pair; canvas: the canvas side (default 2 s). Rows are shuffled (seeded)."""
    x = np.asarray(images)
    y = np.asarray(labels).reshape(-1).astype(np.int64)
    if x.ndim != 4 or x.shape[2] != x.shape[3] or len(x) != len(y):
        raise BadParameterError(f"images have shape {x.shape} for {len(y)} labels; expected [N, C, s, s] square "
                                f"images, one per label")
    check_range("pairs_per_class_pair", pairs_per_class_pair, 0)
    check_range("max_offset", max_offset, 0)
    side = x.shape[2]
    canvas = 2 * side if canvas is None else int(canvas)
    if canvas < side + max_offset:
        raise BadParameterError(f"canvas={canvas} cannot hold a {side}px image {max_offset}px from a corner; "
                                f"use canvas >= {side + max_offset}")
    rng = np.random.default_rng(seed)
    by_class = [np.flatnonzero(y == c) for c in range(num_classes)]
    if pairs_per_class_pair and any(len(b) == 0 for b in by_class):
        raise BadParameterError(f"class {[c for c, b in enumerate(by_class) if len(b) == 0][0]} has no image; "
                                f"composites need every class")
    singles = []
    for c in range(num_classes):
        perm = rng.permutation(by_class[c])
        singles.append(perm if singles_per_class is None else perm[:singles_per_class])
    single_rows = np.concatenate(singles) if singles else np.zeros(0, np.int64)
    pairs = [(a, b) for a, b in combinations(range(num_classes), 2) for _ in range(pairs_per_class_pair)]
    n = len(single_rows) + len(pairs)
    out_x = np.zeros((n, x.shape[1], canvas, canvas), dtype=x.dtype)
    out_y = np.zeros((n, num_classes), dtype=np.float32)
    parts = np.full((n, 2), -1, dtype=np.int64)
    corners = np.full((n, 2), -1, dtype=np.int64)
    for i, r in enumerate(single_rows):
        k = int(rng.integers(4))
        out_x[i] = place(x[r], CORNERS[k], tuple(rng.integers(0, max_offset + 1, size=2)), canvas)
        out_y[i, y[r]] = 1
        parts[i, 0], corners[i, 0] = r, k
    for j, (a, b) in enumerate(pairs):
        i = len(single_rows) + j
        ra, rb = int(rng.choice(by_class[a])), int(rng.choice(by_class[b]))
        ka = int(rng.integers(4))
        kb = CORNERS.index(OPPOSITE[CORNERS[ka]])
        pa = place(x[ra], CORNERS[ka], tuple(rng.integers(0, max_offset + 1, size=2)), canvas)
        pb = place(x[rb], CORNERS[kb], tuple(rng.integers(0, max_offset + 1, size=2)), canvas)
        out_x[i] = np.maximum(pa, pb)
        out_y[i, [a, b]] = 1
        parts[i], corners[i] = (ra, rb), (ka, kb)
    order = rng.permutation(n)
    return CompositeSplit(out_x[order], out_y[order], parts[order], corners[order])


def union_labels(parts: np.ndarray, source_labels, num_classes: int) -> np.ndarray:
    """The multi-hot union of the source labels of each row's parts (what a row must carry)."""
    src = np.asarray(source_labels).reshape(-1)
    out = np.zeros((len(parts), num_classes), dtype=np.float32)
    for i, (a, b) in enumerate(parts):
        out[i, src[a]] = 1
        if b >= 0:
            out[i, src[b]] = 1
    return out
