"""SCAFFOLD (Karimireddy et al. 2020, "SCAFFOLD: Stochastic Controlled Averaging for Federated
Learning", Alg. 1, option II). Declared state: the server control variate c [R, ...] and every
client's c_i [R, M, ...] (zero at the start). Each local step's gradient is corrected by c - c_i
(line 10); after the round, c_i+ = c_i - c + (x - y_i) / (K_i lr) with K_i the client's local
steps and lr the round's local learning rate (line 12), and c += (1/N) sum_i (c_i+ - c_i) over
the participants (lines 13-17, N all clients). Aggregation of the models is FedAvg's."""
from __future__ import annotations

import torch

from fedpaper.algorithms.base import Part


class ControlVariates(Part):
    key = "scaffold"

    def init_state(self, ctx):
        glob = ctx.init_params
        return {"c": {k: torch.zeros_like(v) for k, v in glob.items()},
                "c_i": {k: torch.zeros((ctx.R, ctx.M, *v.shape[1:]), device=v.device) for k, v in glob.items()}}

    def grad_correction(self, ctx, state, slots):
        st, r, c = state[self.key], slots[:, 0], slots[:, 1]
        return {k: st["c"][k][r] - st["c_i"][k][r, c] for k in st["c"]}

    def aggregate(self, ctx, state, agg, glob):
        st, lr = state[self.key], ctx.lr
        r, c = agg.slots[:, 0], agg.slots[:, 1]
        run = torch.as_tensor(r, device=ctx.device)
        for k in st["c"]:
            ksteps = agg.steps.clamp(min=1).view(-1, *([1] * (agg.new[k].dim() - 1)))
            ci_old = st["c_i"][k][r, c]
            ci_new = ci_old - st["c"][k][r] + (agg.anchor[k] - agg.new[k]) / (ksteps * lr)
            st["c_i"][k][r, c] = ci_new
            st["c"][k] = st["c"][k] + torch.zeros_like(st["c"][k]).index_add_(0, run, ci_new - ci_old) / ctx.M
        return glob
