"""Private label sets (Breitholtz, Listo Zec, Johansson et al., "privlabels", Sec 4.1, Algorithm 1):
client k holds only the labels Y_k. It receives only the classifier rows of Y_k (`broadcast`: the
other rows are zeroed, so nothing it computes can depend on them), its softmax runs over Y_k
(`restrict`: other logits set to -1e9), and the server averages classifier row y over the clients
holding y with weights n_k / n'_y (Alg. 1 line 11); a row no participant holds keeps its previous
value (targets vague-10). The rest of the model is averaged with the weight rule (FedAvg)."""
from __future__ import annotations

import torch

from fedpaper.algorithms.base import Part, slot_sizes


class PrivateLabels(Part):
    key = "private"

    def broadcast(self, ctx, state, params, slots):
        cls_w, cls_b = ctx.classifier
        present = ctx.present[slots[:, 0], slots[:, 1]].to(params[cls_w].dtype)  # [G, K]
        params = dict(params)
        params[cls_w] = params[cls_w] * present.unsqueeze(-1)
        params[cls_b] = params[cls_b] * present
        return params

    def restrict(self, logits, present):
        return torch.where(present.unsqueeze(-2), logits, torch.full_like(logits, -1e9))

    def aggregate(self, ctx, state, agg, glob):
        slots = agg.slots
        present = ctx.present[slots[:, 0], slots[:, 1]].float()  # [G, K]
        n = slot_sizes(ctx, slots)
        run = torch.as_tensor(slots[:, 0], device=ctx.device)
        wy = n[:, None] * present  # [G, K]
        tot = torch.zeros(ctx.R, ctx.K, device=ctx.device).index_add_(0, run, wy)  # n'_y per run
        held = tot > 0
        wy = wy / tot[run].clamp(min=1e-12)
        glob = dict(glob)
        for k, ndim_extra in ((ctx.classifier[0], 1), (ctx.classifier[1], 0)):
            wk = wy.view(*wy.shape, *([1] * ndim_extra))
            rows = torch.zeros_like(agg.prev[k]).index_add_(0, run, wk * agg.new[k])
            keep = held.view(*held.shape, *([1] * ndim_extra))
            glob[k] = torch.where(keep, rows, agg.prev[k])
        return glob


def restrict_classifier(ctx, params, slots) -> dict:
    """privlabels Alg. 1, broadcast: the classifier rows outside each slot's Y_k zeroed."""
    return PrivateLabels().broadcast(ctx, None, params, slots)
