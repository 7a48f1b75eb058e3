"""FedPALS aggregation (Listo Zec, Breitholtz, Johansson, arXiv 2411.03799, eq. 9):
alpha^lambda = argmin_{alpha in simplex} ||T - alpha^T S||^2 + lambda sum_i alpha_i^2 / n_i over
the participating clients' label marginals S and the target marginal T (Federation.
target_marginal), re-solved when the participants change (App B.3) and cached per participant set.
The QP is solved by weights.fedpals_weights."""
from __future__ import annotations

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
