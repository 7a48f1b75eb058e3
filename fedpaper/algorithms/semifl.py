"""SemiFL (Diao, Ding, Tarokh 2022, "SemiFL: Semi-supervised federated learning for unlabeled clients
with alternate training"), the FedMT baseline (FedMT Sec. 4.1, App. C.1; PUBLIC-CODE.md).

Clients are unlabelled: each trains on its confident pseudo-labels (FixMatch threshold, SemiFL Sec.
3.2) with the strong-augmentation loss L_fix plus the MixUp loss L_mix (weight 1), i.e. FedMT's client
step without the projected loss R_p (`fedmt.FixMixClient(projected_weight=0)`); the server trains on its
labelled data each round (alternate training, `ServerTraining`), and BatchNorm statistics are static:
recomputed on the server's data after every server step instead of averaged (SemiFL Sec. 3.3 "sBN").
Client labels are never read (their batches read the pool's coarse label space, unused by the loss).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from fedpaper.algorithms.base import Part
from fedpaper.algorithms.fedmt import FixMixClient
from fedpaper.algorithms.server_training import ServerTraining


def static_bn_buffers(template: nn.Module, params: dict, buffers: dict, x: torch.Tensor, batch: int = 500) -> dict:
    """BatchNorm running statistics of the model (params, buffers of ONE model) recomputed from
    scratch on images x: the exact mean and (unbiased) variance over x's batches in train mode
    (momentum None: a cumulative average), as SemiFL's sBN. Returns new buffers."""
    bns = [m for m in template.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in bns]
    bufs = {}
    for k, v in buffers.items():
        if k.endswith("running_mean"):
            bufs[k] = torch.zeros_like(v)
        elif k.endswith("running_var"):
            bufs[k] = torch.ones_like(v)
        elif k.endswith("num_batches_tracked"):
            bufs[k] = torch.zeros_like(v)
        else:
            bufs[k] = v.clone()
    was_training = template.training
    try:
        for m in bns:
            m.momentum = None
        template.train(True)
        with torch.no_grad():
            for i in range(0, len(x), batch):
                functional_call(template, (params, bufs), (x[i:i + batch],))
    finally:
        for m, mom in zip(bns, momenta):
            m.momentum = mom
        template.train(was_training)
    return bufs


class StaticBatchNorm(Part):
    """After the server steps, every run's BatchNorm statistics are recomputed on its server rows."""

    key = "static_bn"

    def server_step(self, ctx, state, glob, bufs, agg, rngs):
        if not bufs or not ctx.has_batchnorm:
            return glob, bufs
        out = {k: v.clone() for k, v in bufs.items()}
        for r, f in enumerate(ctx.feds):
            rows = torch.as_tensor(np.asarray(f.server_indices, dtype=np.int64), device=ctx.device)
            new = static_bn_buffers(ctx.template, {k: v[r] for k, v in glob.items()},
                                    {k: v[r] for k, v in bufs.items()}, ctx.pools.x_train[rows])
            for k, v in new.items():
                out[k][r] = v
        return glob, out


def semifl_parts(threshold=0.95, mix_alpha=0.75, server_epochs=5, static_bn=True, randaugment=(2, 10)) -> list:
    """SemiFL as parts: the fix/mix client without R_p, server training, static BN."""

    parts = [FixMixClient(threshold, lambda1=1.0, lambda2=1.0, mix_alpha=mix_alpha, estimator="true",
                          projected_weight=0.0, randaugment=randaugment), ServerTraining(server_epochs)]
    return parts + ([StaticBatchNorm()] if static_bn else [])
