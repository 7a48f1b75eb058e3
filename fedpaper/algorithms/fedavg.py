"""FedAvg's aggregation (McMahan et al. 2017, Alg. 1): theta_{t+1} = sum_i n_i / N theta_i, with N
the participating clients' total (fedpals eq. 4). The client side of FedAvg is the plain objective
(base.Objective) with the clients' optimiser."""
from __future__ import annotations

import numpy as np

from . import weights as W
from .base import Part


def per_run_weights(ctx, slots, part, rule) -> np.ndarray:
    """Weights [G] of the slots, run by run: rule(r, clients) for run r's participants part[r]
    (its slots are in that order)."""
    w = np.zeros(len(slots))
    for r in range(ctx.R):
        sel = np.nonzero(slots[:, 0] == r)[0]
        w[sel] = rule(r, part[r])
    return w


class FedAvgWeights(Part):
    """alpha_i = n_i / N over the participants (fedpals eq. 4)."""

    key = "fedavg"

    def weights(self, ctx, state, slots, part, losses):
        return per_run_weights(ctx, slots, part, lambda r, clients: W.fedavg_weights(ctx.sizes[r, clients]))
