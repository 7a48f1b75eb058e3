"""FedRep adapted to mixed-type labels (Collins et al. 2021; FedMT Sec. 4.1, App. C.1, targets vague-18).

One shared body, averaged over the clients with FedAvg weights; each client keeps its own J-class
head (FC(d, J)) that never leaves it (declared per-client state, handed to the client's slot at the
broadcast and stored back at the aggregation, never averaged); the server's K-class head
(`classifier`) is trained only by the server. Clients train body and own head on the
cross-entropy of their coarse labels (the pool's "coarse" label space); the server then trains body
and K-class head on its fine labels (`ServerTraining`, alternate training: after the average rather
than inside it, a deviation from vague-18 stated in the profiles). Evaluation: the global model's
K-class head (100-class accuracy); 20-class accuracy = the mean over the clients' heads on the
global body (App. D.2).

Model: a two-head network (fedpaper.blocks.nets.resnet.TwoHead: outputs "logits" and "coarse").
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from fedpaper.algorithms.base import Part
from fedpaper.algorithms.server_training import ServerTraining

HEAD = ("coarse_head.weight", "coarse_head.bias")


class CoarseObjective:
    """Mean cross-entropy of the J-class head's outputs ("coarse") on the batch's coarse labels."""

    def __call__(self, outputs, batch, present, params, anchor):
        lg = outputs["coarse"]
        ce = F.cross_entropy(lg.reshape(-1, lg.shape[-1]).float(), batch["y"].reshape(-1),
                             reduction="none").view(batch["y"].shape)
        mask = batch["mask"]
        s = (ce * mask).sum(-1)
        return s / mask.sum(-1).clamp(min=1), s.detach()


def head_accuracy(features: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> float:
    return ((features @ w.T + b).argmax(-1) == y).float().mean().item()


class PersonalHeads(Part):
    """The clients' J-class heads kept on each client (module docstring); the K-class head frozen
    on clients. Reports test_acc_coarse (mean over client heads) after every evaluated round."""

    key = "fedrep"
    label_space = "coarse"
    frozen = ("classifier.weight", "classifier.bias")

    def client_objective(self, classifier):
        return CoarseObjective()

    def init_state(self, ctx):
        return {k: ctx.init_params[k].unsqueeze(1).repeat(1, ctx.M, *([1] * (ctx.init_params[k].dim() - 1)))
                for k in HEAD}

    def broadcast(self, ctx, state, params, slots):
        state = state[self.key]
        params = dict(params)
        for k in HEAD:
            params[k] = state[k][slots[:, 0], slots[:, 1]].clone()
        return params

    def aggregate(self, ctx, state, agg, glob):
        state = state[self.key]
        for k in HEAD:  # each client's head stays its own; the global copy is never used by clients
            state[k][agg.slots[:, 0], agg.slots[:, 1]] = agg.new[k].detach()
            glob[k] = agg.prev[k]
        return glob

    def round_metrics(self, ctx, state, glob, bufs):
        state = state[self.key]
        rows = [f.test_indices for f in ctx.feds]
        out = []
        for r, rr in enumerate(rows):
            feats = _features(ctx, glob, bufs, r, rr)
            y = ctx.pools.labels["coarse"][1][torch.as_tensor(np.asarray(rr), device=ctx.device)]
            accs = [head_accuracy(feats, state[HEAD[0]][r, c], state[HEAD[1]][r, c], y) for c in range(ctx.M)]
            out.append({"test_acc_coarse": float(np.mean(accs))})
        return out


def _features(ctx, glob, bufs, r, rows) -> torch.Tensor:
    """Body features of run r's global model (eval mode) on test rows."""
    from torch.func import functional_call

    p = {k: v[r] for k, v in glob.items()}
    b = {k: v[r] for k, v in bufs.items()}
    idx = torch.as_tensor(np.asarray(rows), device=ctx.device)
    ctx.template.train(False)
    try:
        with torch.no_grad():
            return torch.cat([functional_call(ctx.template, (p, b), (ctx.pools.x_test[idx[i:i + 1024]],))["features"]
                              for i in range(0, len(idx), 1024)])
    finally:
        ctx.template.train(True)


def fedrep_parts(server_epochs=1) -> list:
    return [PersonalHeads(), ServerTraining(server_epochs)]
