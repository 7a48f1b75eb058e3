"""Minibatches of stacked slots: per-slot shuffled, padded rows and masks, and row gathering."""
from __future__ import annotations

import math

import numpy as np
import torch


def epoch_batches(client_rows: list, batch_size: int, rngs: list,
                  steps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-slot shuffled minibatches for one epoch, padded: rows [G, S, B] and mask [G, S, B]
    (S: enough steps for the largest slot, or `steps` when that is more).

    Slot g uses rngs[g] (its run's generator), so its order never depends on the other slots."""
    sizes = [len(r) for r in client_rows]
    steps = max(1, math.ceil(max(sizes) / batch_size), steps or 1)
    rows = np.zeros((len(client_rows), steps * batch_size), dtype=np.int64)
    mask = np.zeros_like(rows, dtype=bool)
    for g, (r, rng) in enumerate(zip(client_rows, rngs)):
        rows[g, : len(r)] = r[rng.permutation(len(r))]
        mask[g, : len(r)] = True
    shape = (len(client_rows), steps, batch_size)
    return rows.reshape(shape), mask.reshape(shape)



def gather(pool: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """pool[idx] for an index tensor [G, B], as one index_select of whole rows (a plain memcpy
    per row; advanced indexing is several times slower on CPU)."""
    return pool.index_select(0, idx.reshape(-1)).view(*idx.shape, *pool.shape[1:])


_gather = gather  # the name used before the engine became a package
