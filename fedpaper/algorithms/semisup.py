"""Client-side augmentation and pseudo-labels on stacked slots [G, B, ...]: mixup (Zhang et al.
2018) and confidence-thresholded pseudo-labels (FixMatch, Sohn et al. 2020, as used by SemiFL and
FedMT). Random numbers come from the slots' per-run numpy generators (the engine's `aug_rngs`).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from fedpaper.engine.batching import epoch_batches, gather
from fedpaper.ground.errors import BadParameterError
from fedpaper.algorithms.base import Part


def draw_lambda(rng: np.random.Generator, alpha: float) -> float:
    """lambda ~ Beta(alpha, alpha) (mixup, Zhang et al. 2018, Sec. 2)."""
    return float(rng.beta(alpha, alpha))


def mixup(x: torch.Tensor, y: torch.Tensor, mask: np.ndarray, alpha: float, rngs: list) -> dict:
    """Mixup of each slot's batch with a permutation of its own real rows (Zhang et al. 2018,
    "mixup: Beyond Empirical Risk Minimization", eq. 1; FedMT App C.1 uses alpha = 0.75).

    x: [G, B, ...], y: [G, B] or multi-hot [G, B, K], mask: [G, B] bool (real rows). Per slot g,
    lambda_g ~ Beta(alpha, alpha) and a permutation pi_g of its real rows (padding rows map to
    themselves) are drawn from rngs[g]; returns x = lambda x + (1 - lambda) x[pi], y2 = y[pi] and
    lam [G], for the loss lambda * l(y) + (1 - lambda) * l(y2) (algorithms.base.Objective)."""
    G, B = mask.shape
    lam = np.array([draw_lambda(rng, alpha) for rng in rngs])
    perm = np.tile(np.arange(B), (G, 1))
    for g, rng in enumerate(rngs):
        real = np.flatnonzero(mask[g])
        perm[g, real] = real[rng.permutation(len(real))]
    perm_t = torch.as_tensor(perm, device=x.device)
    lam_t = torch.as_tensor(lam, dtype=x.dtype, device=x.device)
    lx = lam_t.view(G, *([1] * (x.dim() - 1)))
    x2 = torch.take_along_dim(x, perm_t.view(G, B, *([1] * (x.dim() - 2))), dim=1)
    y2 = torch.take_along_dim(y, perm_t.view(G, B, *([1] * (y.dim() - 2))), dim=1)
    return {"x": lx * x + (1 - lx) * x2, "y2": y2, "lam": lam_t}


def pseudo_labels(logits: torch.Tensor, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    """FixMatch pseudo-labels (Sohn et al. 2020, Sec. 2.2 and eq. 4; SemiFL, Diao et al. 2022;
    FedMT Alg. 1 lines 9-10): y_hat = argmax_k p_k(x) of the broadcast global model's softmax, kept
    where max_k p_k(x) >= threshold. logits: [N, K]; returns y_hat [N] and keep [N] (bool)."""
    conf, y_hat = torch.softmax(logits, -1).max(-1)
    return y_hat, conf >= threshold


# ----------------------------------------------------------------------------- as parts of an algorithm

class Mixup(Part):
    """Mixup of every client batch (`mixup` above); the objective mixes the two losses."""

    key = "mixup"

    def __init__(self, alpha: float):
        self.alpha = alpha

    def augment(self, ctx, batch, mask_np, aug_rngs, data, epoch, step):
        batch.update(mixup(batch["x"], batch["y"], mask_np, self.alpha, aug_rngs))
        return None


class PseudoLabels(Part):
    """FixMatch pseudo-labels on each client's unlabeled rows (Federation.client_unlabeled_indices),
    labelled once per round by the broadcast model (FedMT Alg. 1 line 9, SemiFL: the broadcast model
    is fixed during the round, so per-batch labelling would give the same labels), in eval mode
    (no dropout, BatchNorm running statistics). Every local step also trains on a batch of the
    slot's pseudo-labelled rows, kept where confident (`pseudo_labels`), with weight `weight`; an
    epoch is one pass over both row sets, the longer one setting the steps. The unlabeled batches'
    order comes from the runs' augmentation generators."""

    key = "pseudo_labels"

    def __init__(self, threshold: float, weight: float = 1.0):
        self.threshold, self.weight = threshold, weight

    @property
    def unlabeled_weight(self):
        return self.weight

    def check(self, ctx):
        if any(f.client_unlabeled_indices is None or len(f.client_unlabeled_indices) != ctx.M for f in ctx.feds):
            raise BadParameterError("pseudo_label_threshold needs Federation.client_unlabeled_indices "
                                    "(one row list per client)")
        if ctx.pools.y_train.dim() == 2:
            raise BadParameterError("pseudo-labels need single-label data; these labels are multi-hot")

    def prepare_round(self, ctx, state, params, slots, buffers):
        """Padded to [G, N]: rows, y (pseudo-labels), keep; and the slots' row counts."""
        urows = [np.asarray(ctx.feds[r].client_unlabeled_indices[c], dtype=np.int64) for r, c in slots]
        logits = ctx.predict(params, ctx.pools.x_train, urows, buffers=buffers)
        G, N = len(urows), max(1, max(len(u) for u in urows))
        out = {"rows": torch.zeros(G, N, dtype=torch.int64), "y": torch.zeros(G, N, dtype=torch.int64),
               "keep": torch.zeros(G, N, dtype=torch.bool)}
        for g, (u, lg) in enumerate(zip(urows, logits)):
            y_hat, keep = pseudo_labels(lg, self.threshold)
            out["rows"][g, :len(u)], out["y"][g, :len(u)], out["keep"][g, :len(u)] = torch.as_tensor(u), y_hat, keep
        out = {k: v.to(ctx.device) for k, v in out.items()}
        out["sizes"] = [len(u) for u in urows]
        return out

    def min_steps(self, data, batch_size):
        return math.ceil(max(data["sizes"]) / batch_size)

    def begin_epoch(self, data, steps, aug_rngs, batch_size, device):
        if data is None:  # trained without this round's pseudo-labels (e.g. a server step)
            return None
        upos, umask = epoch_batches([np.arange(n) for n in data["sizes"]], batch_size, aug_rngs, steps)
        return torch.as_tensor(upos, device=device), torch.as_tensor(umask, device=device)

    def augment(self, ctx, batch, mask_np, aug_rngs, data, epoch, step):
        """Append the unlabeled batch of this step; returns which slots have unlabeled rows in it."""
        if data is None:
            return None
        pos, valid = epoch[0][:, step], epoch[1][:, step]
        batch["x"] = torch.cat([batch["x"], gather(ctx.pools.x_train, torch.gather(data["rows"], 1, pos))], 1)
        batch["yu"] = torch.gather(data["y"], 1, pos)
        batch["ukeep"] = (torch.gather(data["keep"], 1, pos) & valid).float()
        batch["umask"] = valid.float()
        return valid.any(1)
