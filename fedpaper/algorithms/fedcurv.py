"""FedCurv (Shoham et al. 2019, "Overcoming Forgetting in Federated Learning on Non-IID Data",
Sec. 4, eq. 7): Elastic Weight Consolidation (Kirkpatrick et al. 2017) between clients. Client i
minimises its loss plus

    lam * sum_{j != i} sum_k F_{j,k} (theta_k - theta_{j,k})^2
  = lam * sum_k [theta_k^2 A_k - 2 theta_k B_k] + lam * Q,   A = sum_{j!=i} F_j,
                                                             B = sum_{j!=i} F_j theta_j,
                                                             Q = sum_{j!=i} sum_k F_{j,k} theta_{j,k}^2,

where theta_j and F_j (the diagonal empirical Fisher information of client j's loss at theta_j)
are what client j sent the last time it took part (zero before). Targets vague-10: lam = 0.01;
F_j is estimated on one pass over client j's data after its local training, as the mean over
minibatches (the clients' batch size) of the squared minibatch gradient of the client loss
(an approximation of the per-sample Fisher; it is fixed by `fisher_batches`, None = all batches).
Aggregation is FedAvg's. The server keeps, per run and client, F_j, F_j * theta_j and Q_j.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call

from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.models import logits_of
from fedpaper.algorithms.base import Part, row_loss

_PREFIX = "fedcurv:"


def _sum_per_slot(t, lead):
    return t.sum() if lead == 0 else t.flatten(1).sum(1)


def others_sum(t: torch.Tensor, r, c) -> torch.Tensor:
    """[G, ...]: for each slot g = (r[g], c[g]) the sum of t[r[g]] over all clients minus t[r[g], c[g]]
    (t: [R, M, ...]). Each run's client sum is taken once and then picked per slot: t[r].sum(1), the
    same numbers, first copied every run's [M, ...] block once per slot (slots x M parameter copies,
    a transient that grows with the clients and their model's size). Bitwise equal to it
    (tests/engine/test_cpu_release.py)."""
    return t.sum(1)[r] - t[r, c]


class FedCurvPenalty(Part):
    key = "fedcurv"

    def __init__(self, lam: float = 0.01, fisher_batches: int | None = None):
        if lam < 0:
            raise BadParameterError(f"fedcurv lam={lam} must be >= 0")
        self.lam, self.fisher_batches = float(lam), fisher_batches

    def init_state(self, ctx):
        z = lambda v: torch.zeros((ctx.R, ctx.M, *v.shape[1:]), device=v.device)  # noqa: E731
        return {"F": {k: z(v) for k, v in ctx.init_params.items()}, "P": {k: z(v) for k, v in ctx.init_params.items()},
                "Q": torch.zeros(ctx.R, ctx.M, device=ctx.device)}

    # ---- client side: the other clients' sums ride along with the batch
    def prepare_round(self, ctx, state, params, slots, buffers):
        st, r, c = state[self.key], slots[:, 0], slots[:, 1]
        A = {k: others_sum(st["F"][k], r, c) for k in st["F"]}
        B = {k: others_sum(st["P"][k], r, c) for k in st["P"]}
        return {"A": A, "B": B, "Q": st["Q"][r].sum(1) - st["Q"][r, c]}

    def augment(self, ctx, batch, mask_np, aug_rngs, data, epoch, step):
        for k in data["A"]:
            batch[f"{_PREFIX}A:{k}"], batch[f"{_PREFIX}B:{k}"] = data["A"][k], data["B"][k]
        batch[f"{_PREFIX}Q"] = data["Q"]
        return None

    def batch_loss(self, outputs, batch, params, anchor, lead):
        if not self.lam:
            return None
        total = batch[f"{_PREFIX}Q"]
        for k, p in params.items():
            A, B = batch[f"{_PREFIX}A:{k}"], batch[f"{_PREFIX}B:{k}"]
            total = total + _sum_per_slot(p * p * A - 2 * p * B, lead)
        return self.lam * total

    # ---- server side: the participants' Fisher information at their new parameters
    def fisher(self, ctx, params: dict, rows) -> dict:
        """Diagonal empirical Fisher of the client loss at `params` (one model) over `rows`."""
        tmpl, bs = ctx.template, ctx.cfg.batch_size
        bufs = {k: v.clone() for k, v in ctx.buffers.items()}
        p = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        acc = {k: torch.zeros_like(v) for k, v in params.items()}
        rows = np.asarray(rows, dtype=np.int64)
        starts = list(range(0, len(rows), bs))[: self.fisher_batches]
        for s in starts:
            idx = torch.as_tensor(rows[s:s + bs], device=ctx.device)
            out = logits_of(functional_call(tmpl, (p, bufs), (ctx.pools.x_train[idx],)))
            loss = row_loss(out, ctx.pools.y_train[idx]).mean()
            for k, g in zip(p, torch.autograd.grad(loss, list(p.values()), allow_unused=True)):
                if g is not None:
                    acc[k] += g.detach() ** 2
        return {k: v / max(1, len(starts)) for k, v in acc.items()}

    def aggregate(self, ctx, state, agg, glob):
        st = state[self.key]
        for g, (r, c) in enumerate(agg.slots):
            theta = {k: v[g].detach() for k, v in agg.new.items()}
            F = self.fisher(ctx, theta, ctx.feds[r].client_indices[c])
            for k in F:
                st["F"][k][r, c] = F[k]
                st["P"][k][r, c] = F[k] * theta[k]
            st["Q"][r, c] = sum((F[k] * theta[k] ** 2).sum() for k in F)
        return glob
