"""FedTrans adapted to mixed-type labels (cited by FedMT as Chen et al. 2021b; FedMT Sec. 4.1, App. C.1,
targets vague-17): FedAvg pre-training of a J-class classifier on the clients' coarse labels, then on
the server a NEW randomly initialised K-class linear layer and fine-tuning of the whole network on its
fine-labelled data (100 epochs, SGD lr 0.01, momentum 0.9, weight decay 5e-4 in the paper).

Phase 1 runs as the rounds of the engine (two-head model, fedpaper.blocks.nets.resnet.TwoHead: clients train
body + `coarse_head`; the K-class `classifier` is frozen); phase 2 is this part's server step after
the last round: a plain centralised torch loop per run. 20-class accuracy: the FedAvg J-class model
before fine-tuning (App. D.2).
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedpaper.algorithms.base import Part
from fedpaper.algorithms.fedrep import CoarseObjective, _features, head_accuracy


def finetune_on_server(template: nn.Module, params: dict, buffers: dict, x: torch.Tensor, y: torch.Tensor,
                       epochs: int, lr: float, batch_size: int, seed: int, momentum=0.9, weight_decay=5e-4,
                       reinit_head: bool = True) -> tuple[dict, dict]:
    """Phase 2 of FedTrans for one model: a new K-class head (seeded), then `epochs` epochs of SGD on
    (x, y) over the whole network in train mode. Returns the new params and buffers."""
    net = copy.deepcopy(template)
    net.load_state_dict({**params, **buffers}, strict=True)
    if reinit_head:
        torch.manual_seed(seed)
        net.classifier.reset_parameters()
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    rng = np.random.default_rng([seed, 31337])
    net.train(True)
    for _ in range(epochs):
        order = torch.as_tensor(rng.permutation(len(x)), device=x.device)
        for i in range(0, len(x), batch_size):
            idx = order[i:i + batch_size]
            out = net(x[idx])
            loss = F.cross_entropy(out["logits"] if isinstance(out, dict) else out, y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return ({k: v.detach().clone() for k, v in net.named_parameters()},
            {k: v.detach().clone() for k, v in net.named_buffers()})


class CoarsePretrainThenFinetune(Part):
    """Clients: body + J-class head on coarse labels (K-class head frozen); after the last round the
    server fine-tunes a new K-class head and the body (`finetune_on_server`)."""

    key = "fedtrans"
    label_space = "coarse"
    frozen = ("classifier.weight", "classifier.bias")

    def __init__(self, finetune_epochs=100, finetune_lr=0.01, finetune_batch=250):
        self.finetune_epochs, self.finetune_lr, self.finetune_batch = finetune_epochs, finetune_lr, finetune_batch

    def client_objective(self, classifier):
        return CoarseObjective()

    def init_state(self, ctx):
        return {"coarse_acc": [float("nan")] * ctx.R}

    def server_step(self, ctx, state, glob, bufs, agg, rngs):
        state = state[self.key]
        if ctx.round < ctx.cfg.rounds:  # phase 2 runs once, after the last round's aggregation
            return glob, bufs
        glob = {k: v.clone() for k, v in glob.items()}
        bufs = {k: v.clone() for k, v in bufs.items()}
        for r, f in enumerate(ctx.feds):
            test = f.test_indices
            feats = _features(ctx, glob, bufs, r, test)
            yc = ctx.pools.labels["coarse"][1][torch.as_tensor(np.asarray(test), device=ctx.device)]
            state["coarse_acc"][r] = head_accuracy(feats, glob["coarse_head.weight"][r], glob["coarse_head.bias"][r], yc)
            rows = torch.as_tensor(np.asarray(f.server_indices, dtype=np.int64), device=ctx.device)
            p, b = finetune_on_server(ctx.template, {k: v[r] for k, v in glob.items()},
                                      {k: v[r] for k, v in bufs.items()}, ctx.pools.x_train[rows],
                                      ctx.pools.y_train[rows], self.finetune_epochs, self.finetune_lr,
                                      self.finetune_batch, seed=int(f.seed))
            for k in glob:
                glob[k][r] = p[k].to(glob[k].dtype)
            for k in bufs:
                bufs[k][r] = b[k]
        return glob, bufs

    def round_metrics(self, ctx, state, glob, bufs):
        state = state[self.key]
        if ctx.round < ctx.cfg.rounds:
            return None
        return [{"test_acc_coarse": a} for a in state["coarse_acc"]]


def fedtrans_parts(finetune_epochs=100, finetune_lr=0.01, finetune_batch=250) -> list:
    return [CoarsePretrainThenFinetune(finetune_epochs, finetune_lr, finetune_batch)]
