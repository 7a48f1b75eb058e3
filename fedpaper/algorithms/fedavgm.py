"""FedAvgM: FedAvg with server momentum (Hsu, Qi, Brown 2019, "Measuring the Effects of
Non-Identical Data Distribution for Federated Visual Classification", Sec. 3, Alg. 1):
with Delta_t = theta_t - sum_i alpha_i theta_i (the negative averaged update),
v_{t+1} = beta v_t + Delta_t and theta_{t+1} = theta_t - server_lr * v_{t+1}.
beta = 0 and server_lr = 1 is FedAvg. Written as one module on top of the seam, with no
change to the trainer: compose it onto any method, e.g.
`get_method("FedAvg").algorithm().with_parts(ServerMomentum(0.9), name="FedAvgM")`."""
from __future__ import annotations

import torch

from fedpaper.algorithms.base import Part


class ServerMomentum(Part):
    key = "server_momentum"

    def __init__(self, beta: float = 0.9, server_lr: float = 1.0):
        self.beta, self.server_lr = beta, server_lr

    def init_state(self, ctx):
        return {k: torch.zeros_like(v) for k, v in ctx.init_params.items()}  # v_0 = 0, per run

    def aggregate(self, ctx, state, agg, glob):
        v = state[self.key]
        out = {}
        for k, avg in glob.items():
            v[k] = self.beta * v[k] + (agg.prev[k] - avg)
            out[k] = agg.prev[k] - self.server_lr * v[k]
        return out
