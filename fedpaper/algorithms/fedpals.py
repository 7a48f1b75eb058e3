"""FedPALS aggregation (Listo Zec, Breitholtz, Johansson, arXiv 2411.03799, eq. 9):
alpha^lambda = argmin_{alpha in simplex} ||T - alpha^T S||^2 + lambda sum_i alpha_i^2 / n_i over
the participating clients' label marginals S and the target marginal T (Federation.
target_marginal), re-solved when the participants change (App B.3) and cached per participant set.
The QP is solved by weights.fedpals_weights.

A client with alpha_i = 0 has no part in the server step theta_{t+1} = sum_i alpha_i theta_{i,t}
(Sec 3), so it is not trained that round (`round_rows`: no rows; its update is its start). The
global model is the same as if it were trained and then weighted by 0, except that such a client,
starting from a model that never learns its labels (the target's other labels), can make its own
update non-finite at the clients' learning rate, and 0 x non-finite is not 0."""
from __future__ import annotations

import numpy as np

from fedpaper.algorithms import weights as W
from fedpaper.algorithms.base import Part, per_run_weights


class FedPALSWeights(Part):
    key = "fedpals"

    def __init__(self, lam: float):
        self.lam = lam

    def init_state(self, ctx):
        return {}  # (run, participants) -> alpha

    def weights(self, ctx, state, slots, part, losses):
        cache = state[self.key]

        def rule(r, clients):
            key = (r, tuple(clients))
            if key not in cache:
                counts = ctx.counts[r, clients]
                S = counts / counts.sum(1, keepdims=True)
                cache[key] = W.fedpals_weights(S, counts.sum(1), ctx.feds[r].target_marginal, self.lam)
            return cache[key]

        return per_run_weights(ctx, slots, part, rule)

    def prepare_round(self, ctx, state, params, slots, buffers):
        """This round's weight of every slot (the same alpha^lambda the aggregation uses)."""
        part = [slots[slots[:, 0] == r, 1] for r in range(ctx.R)]
        return self.weights(ctx, state, slots, part, None)

    def round_rows(self, ctx, data, slots, rows):
        """No rows for a slot of weight 0 (it is not trained); None when every slot has weight."""
        if data is None or (np.asarray(data) > 0).all():
            return None
        return [r if w > 0 else np.asarray(r)[:0] for r, w in zip(rows, data)]
