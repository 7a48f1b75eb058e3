"""Central tuning (privlabels Sec 4.2): after aggregation the server trains the global model h
for `epochs` epochs over its unlabeled set so that its predictions match the round's client models
h_k on their label sets, with Adam (App A) or SGD (App C.3), a fresh optimiser each round.

Losses per sample x, with client weights w_k = n_k / sum n (`tuning_loss`):
  "mse", eq. (6):      sum_k w_k sum_{y in Y_k} (h_k(y|x) - h(y|x))^2;
  "pairwise", eq. (5): sum_k w_k sum_{y<y' in Y_k} (h_k(y|x) h(y'|x) - h_k(y'|x) h(y|x))^2;
  "pairwise_all":      eq. (5) with y' over all labels, the form App B analyses (targets vague-7).
"""
from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call, grad

from fedpaper.engine.batching import epoch_batches
from fedpaper.engine.evaluate import autocast
from fedpaper.engine.optim import opt_init, opt_step
from fedpaper.engine.randomness import generator_at
from fedpaper.ground.errors import BadParameterError
from fedpaper.algorithms.base import Part

KINDS = ("mse", "pairwise", "pairwise_all")


def tuning_loss(probs_model, client_probs, client_w, present, kind) -> torch.Tensor:
    """The tuning objective for one batch, averaged over samples (module docstring).

    probs_model h: [B, K]; client_probs h_k: [M, B, K] (zero outside Y_k); client_w w_k: [M];
    present: [M, K]. The pairwise forms use Lagrange's identity |a|^2|b|^2 - (a.b)^2."""
    pres = present.to(probs_model.dtype).unsqueeze(1)  # [M, 1, K]
    a = client_probs
    if kind == "mse":
        per = ((a - probs_model.unsqueeze(0) * pres) ** 2 * pres).sum(-1)
    else:
        b = probs_model.unsqueeze(0) * pres if kind == "pairwise" else probs_model.unsqueeze(0).expand_as(a)
        per = (a * a).sum(-1) * (b * b).sum(-1) - (a * b).sum(-1) ** 2
    return (client_w.view(-1, 1) * per).sum(0).mean()


def client_probabilities(ctx, new, slots, private: bool) -> torch.Tensor:
    """h_k(y|x) of each participating client model on its run's unlabeled server set: [G, N_u, K],
    zero outside Y_k (private clients: softmax over Y_k; public: the full softmax's entries)."""
    rows = [ctx.feds[r].server_indices for r in slots[:, 0]]
    present = ctx.present[slots[:, 0], slots[:, 1]]
    logits = ctx.predict(new, ctx.pools.x_train, rows)
    out = []
    for lg, pr in zip(logits, present):
        if private:
            lg = torch.where(pr, lg, torch.full_like(lg, -1e9))
        out.append(torch.softmax(lg, -1) * pr)
    return torch.stack(out)


class CentralTuning(Part):
    """kind: "mse", "pairwise" or "pairwise_all"; private: the clients' softmax runs over Y_k."""

    key = "tuning"

    def __init__(self, kind, epochs=3, optimizer="adam", lr=None, private=False):
        self.kind, self.epochs, self.optimizer, self.lr, self.private = kind, epochs, optimizer, lr, private

    def check(self, ctx):
        if ctx.has_batchnorm:
            raise BadParameterError("central tuning of a BatchNorm model is not supported; use a model without BatchNorm")

    def server_step(self, ctx, state, glob, bufs, agg, rngs):
        return central_tuning(ctx, glob, agg.new, agg.slots, agg.part, rngs, self), bufs


def central_tuning(ctx, glob, new, slots, part, rngs, spec: CentralTuning) -> dict:
    """Tune the aggregated models `glob` [R, ...] towards the clients' `new` models."""
    cfg, R, K = ctx.cfg, ctx.R, ctx.K
    sizes = {len(f.server_indices) for f in ctx.feds}
    if len(sizes) != 1:
        raise ValueError("runs tuned together need unlabeled server sets of one size")
    probs = client_probabilities(ctx, new, slots, spec.private)  # [G, N_u, K]
    Mp = part.shape[1]
    probs = probs.view(R, Mp, *probs.shape[1:])
    present = ctx.present[slots[:, 0], slots[:, 1]].view(R, Mp, K)
    n = torch.as_tensor(ctx.sizes[slots[:, 0], slots[:, 1]], dtype=torch.float32, device=ctx.device).view(R, Mp)
    w = n / n.sum(1, keepdim=True)
    server_rows = torch.as_tensor(np.stack([np.asarray(f.server_indices) for f in ctx.feds]), device=ctx.device)
    params = {k: v.clone() for k, v in glob.items()}
    opt = opt_init(params, spec.optimizer)
    lr = spec.lr if spec.lr is not None else cfg.lr
    local = [np.arange(server_rows.shape[1])] * R

    def loss_fn(p, x, cp, cw, pres, mask):
        with autocast(cfg.precision, ctx.device):  # bf16: the forward pass only; the loss in fp32
            logits = functional_call(ctx.template, (p, ctx.buffers), (x,))
        h = torch.softmax(logits.float(), -1)
        return tuning_loss(h[mask], cp[:, mask], cw, pres, spec.kind)

    gfn = grad(loss_fn)
    gens = [generator_at(r, ctx.device) for r in rngs]  # each run's dropout stream (engine/randomness.py)
    grouped = ctx.grouped_forward()  # None unless all runs' tuning steps go in one grouped pass
    for _ in range(spec.epochs):
        pos, bmask = epoch_batches(local, cfg.batch_size, rngs)
        for s in range(pos.shape[1]):
            p_s = torch.as_tensor(pos[:, s], device=ctx.device)  # [R, B] positions in the server set
            mk = torch.as_tensor(bmask[:, s], device=ctx.device)
            x = ctx.pools.x_train[torch.gather(server_rows, 1, p_s)]
            cp = torch.stack([probs[r][:, p_s[r]] for r in range(R)])  # [R, M', B, K]
            if grouped is not None:
                grads = _grouped_grads(grouped, params, x, cp, w, present, mk, spec.kind, cfg.precision, ctx.device)
            else:  # as the backend computes the clients' steps; masks: the epoch's last, partial batch
                masks = None if bool(mk.all()) else [mk[r] for r in range(R)]
                grads = ctx.run_grads(gfn, params, (x, cp, w, present), masks, gens)
            params, opt = opt_step(params, grads, opt, spec.optimizer, lr,
                                   torch.ones(R, dtype=torch.bool, device=ctx.device))
    return params


def _grouped_grads(grouped, params, x, cp, w, present, mask, kind, precision, device) -> dict:
    """Every run's tuning gradient from one grouped forward/backward pass (backends.py "grouped"):
    the runs' losses are independent, so the gradient of their sum holds each run's own gradient.
    mask [R, B]: the rows of the batch each run uses (the epoch's last batch may be partial)."""
    p = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    with autocast(precision, device):
        logits = grouped(p, x, train=True)  # [R, B, K]
    h = torch.softmax(logits.float(), -1)
    total = sum(tuning_loss(h[r][mask[r]], cp[r][:, mask[r]], w[r], present[r], kind) for r in range(x.shape[0]))
    return dict(zip(p, torch.autograd.grad(total, list(p.values()))))
