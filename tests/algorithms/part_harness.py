"""A small Context for testing algorithm parts without a trainer (imported by the tests as
`part_harness`; a unique module name, so it never collides with another folder's conftest)."""
import functools

import numpy as np
import torch

from fedpaper.algorithms.base import Aggregation, Context
from fedpaper.engine.gradients import per_run_grads


def make_ctx(counts, params=None, **kw):
    """counts [R, M, K]: label counts per client; params: the runs' params [R, ...]."""
    counts = np.asarray(counts, dtype=float)
    R, M, K = counts.shape
    params = params or {"classifier.weight": torch.zeros(R, K, 2), "classifier.bias": torch.zeros(R, K)}
    base = dict(cfg=None, pools=None, feds=[None] * R, R=R, M=M, K=K, device=torch.device("cpu"), counts=counts,
                sizes=counts.sum(-1), present=torch.as_tensor(counts > 0), classifier=("classifier.weight",
                                                                                       "classifier.bias"),
                template=None, buffers={}, has_batchnorm=False, init_params=params,
                predict=None, train_slots=None, run_grads=functools.partial(per_run_grads, "loop"),
                grouped_forward=lambda: None)
    base.update(kw)
    return Context(**base)


def full_slots(R, M):
    part = np.tile(np.arange(M), (R, 1))
    return np.array([(r, c) for r in range(R) for c in part[r]]), part


def aggregation(new, slots, part, prev, anchor=None, steps=None, losses=None):
    G = len(slots)
    return Aggregation(new, anchor if anchor is not None else prev, steps if steps is not None else torch.ones(G),
                       losses if losses is not None else torch.zeros(G), slots, part, prev)
