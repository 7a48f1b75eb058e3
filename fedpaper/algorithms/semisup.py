"""Client-side augmentation and pseudo-labels on stacked slots [G, B, ...]: mixup (Zhang et al.
2018) and confidence-thresholded pseudo-labels (FixMatch, Sohn et al. 2020, as used by SemiFL and
FedMT). Random numbers come from the slots' per-run numpy generators (the engine's `aug_rngs`).
"""
from __future__ import annotations

import numpy as np
import torch


def draw_lambda(rng: np.random.Generator, alpha: float) -> float:
    """lambda ~ Beta(alpha, alpha) (mixup, Zhang et al. 2018, Sec. 2)."""
    return float(rng.beta(alpha, alpha))


def mixup(x: torch.Tensor, y: torch.Tensor, mask: np.ndarray, alpha: float, rngs: list) -> dict:
    """Mixup of each slot's batch with a permutation of its own real rows (Zhang et al. 2018,
    "mixup: Beyond Empirical Risk Minimization", eq. 1; FedMT App C.1 uses alpha = 0.75).

    x: [G, B, ...], y: [G, B] or multi-hot [G, B, K], mask: [G, B] bool (real rows). Per slot g,
    lambda_g ~ Beta(alpha, alpha) and a permutation pi_g of its real rows (padding rows map to
    themselves) are drawn from rngs[g]; returns x = lambda x + (1 - lambda) x[pi], y2 = y[pi] and
    lam [G], for the loss lambda * l(y) + (1 - lambda) * l(y2) (engine.client_loss)."""
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
