"""The server's own training step (FedMT, Zhang et al. 2024, Alg. 1 procedure A, lines 2-5:
f_s <- f, then SGD steps on the cross-entropy over the server's labelled data D_s).

After aggregation (and before central tuning), each run's global model trains for `epochs` epochs
over Federation.server_indices WITH their labels: plain CE (no client penalties, mixup or
pseudo-labels), the clients' optimiser, lr and batch size, a fresh optimiser state each round,
batches from the runs' generators. FedMT runs it at the start of a round, which differs only in
that our first round's clients start from the initial model. BatchNorm running statistics are
updated by the server's batches (loop backend)."""
from __future__ import annotations

import numpy as np
import torch

from fedpaper.ground.errors import BadParameterError
from fedpaper.algorithms.base import Algorithm, Part


class ServerTraining(Part):
    key = "server_train"

    def __init__(self, epochs: int):
        self.epochs = epochs

    def check(self, ctx):
        if any(f.server_indices is None or not len(f.server_indices) for f in ctx.feds):
            raise BadParameterError("server_train_epochs > 0 needs labelled server rows in Federation.server_indices")

    def server_step(self, ctx, state, glob, bufs, agg, rngs):
        rows = [np.asarray(f.server_indices, dtype=np.int64) for f in ctx.feds]
        present = torch.ones(ctx.R, ctx.K, dtype=torch.bool, device=ctx.device)
        bufs = {k: v.clone() for k, v in bufs.items()}
        params, *_ = ctx.train_slots(glob, rows, present, rngs, Algorithm("server"), self.epochs, bufs)
        return params, bufs
