"""Agnostic Federated Learning (Mohri, Sivek, Suresh 2019, "Agnostic Federated Learning", Alg. 1):
the server keeps a mixture lambda over the clients (uniform at the start), aggregates with it
(restricted to the participants, renormalised) and after each round takes a projected gradient
ascent step of lambda on the clients' losses (weights.afl_step)."""
from __future__ import annotations

import numpy as np

from fedpaper.algorithms import weights as W
from fedpaper.algorithms.base import Part, per_run_weights


class AFLMixture(Part):
    key = "afl"

    def __init__(self, step: float):
        self.step = step

    def init_state(self, ctx):
        return np.full((ctx.R, ctx.M), 1.0 / ctx.M)  # the mixture, per run

    def weights(self, ctx, state, slots, part, losses):
        mix = state[self.key]
        return per_run_weights(ctx, slots, part, lambda r, clients: mix[r, clients] / mix[r, clients].sum())

    def aggregate(self, ctx, state, agg, glob):
        mix, loss = state[self.key], agg.losses.detach().cpu().numpy()
        for r in range(ctx.R):
            sel = agg.slots[:, 0] == r
            full = np.zeros(ctx.M)
            full[agg.slots[sel, 1]] = loss[sel]
            mix[r] = W.afl_step(mix[r], full, self.step)
        return glob
