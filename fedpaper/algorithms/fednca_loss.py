"""FedNCA-ML's client objective (Peng et al., "Neural Collapse-Inspired Multi-Label Federated
Learning under Label-Distribution Skew", Sec. 4.2-4.3, eqs. 10-14):

    L_total = L_BCE + lambda1 L_Neg + lambda2 L_Pos                                   (eq. 14)

with z_icr the score of class-wise feature h_ic against prototype m_r (the model's `pair_logits`
[B, C, C], nets.ladm; z_icc is the logit of eq. 9):

- L_BCE (eq. 10): binary cross-entropy averaged over samples AND classes (bce="mean"; the official
  code sums over classes, bce="sum", the engine's default row_loss);
- L_Neg (eqs. 11-12): for each negative class c of sample i and each other prototype r != c,
  s_icr = sigmoid(z_icr); L_Neg = -(1/N) sum_i (1/|C_i^-|) sum_{c in C_i^-} (1/(C-1))
  sum_{r != c} 1(s_icr > tau) log(1 - s_icr), tau = 0.3 (the indicator is not differentiated);
- L_Pos (eq. 13): -(1/N) sum_i (1/|C_i^+|) sum_{c in C_i^+} log softmax_r(z_icr)[c].

A sample with no negative (no positive) class adds 0 to L_Neg (L_Pos); N counts the batch's real
rows (mask). The paper's eqs. use z = h^T m; with the official code's logit scale and bias
(nets.etf.ETFClassifier) z = s h^T m_r + b_r, the classifier applied to every class-wise feature.
The official code's variants (hinge on the top-K hardest negatives; cosine/temperature 0.07
contrast) are not implemented: targets vague-8 takes the printed equations as the default.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from fedpaper.ground.errors import BadParameterError
from fedpaper.algorithms.base import Part, row_loss


def bce_mean_over_classes(logits, y):
    """Per-row BCE averaged over the C classes (eq. 10 before the mean over samples)."""
    return row_loss(logits, y) / logits.shape[-1]


def _masked_mean(per_row, mask):
    return (per_row * mask).sum(-1) / mask.sum(-1).clamp(min=1)


def negative_rejection(pair, y, mask, tau: float = 0.3):
    """L_Neg of eq. 12 per slot (pair [.., B, C, C] scores z_icr, y [.., B, C] multi-hot, mask [.., B])."""
    C = pair.shape[-1]
    off = 1.0 - torch.eye(C, device=pair.device, dtype=pair.dtype)
    on = (torch.sigmoid(pair) > tau).to(pair.dtype).detach()
    term = on * -F.logsigmoid(-pair) * off  # -log(1 - sigmoid(z)), stable
    per_c = term.sum(-1) / (C - 1)
    neg = 1.0 - y
    per_row = (per_c * neg).sum(-1) / neg.sum(-1).clamp(min=1)
    return _masked_mean(per_row, mask)


def positive_contrast(pair, y, mask):
    """L_Pos of eq. 13 per slot."""
    logp = torch.diagonal(F.log_softmax(pair, dim=-1), dim1=-2, dim2=-1)  # [.., B, C]: log p(r = c | h_ic)
    per_row = -(logp * y).sum(-1) / y.sum(-1).clamp(min=1)
    return _masked_mean(per_row, mask)


class FedNCALoss(Part):
    """The eq. 14 objective as a part: the BCE reduction (label_loss) and lambda1 L_Neg +
    lambda2 L_Pos (batch_loss). lam_neg = lam_pos = 0 with bce="mean" is the plain eq. 10 model."""

    key = "fednca_loss"

    def __init__(self, lam_neg: float = 1.0, lam_pos: float = 1.0, tau: float = 0.3, bce: str = "mean"):
        if bce not in ("mean", "sum"):
            raise BadParameterError(f"bce={bce!r}; choose 'mean' (eq. 10) or 'sum' (the official code)")
        if lam_neg < 0 or lam_pos < 0 or not 0 <= tau < 1:
            raise BadParameterError(f"lam_neg={lam_neg}, lam_pos={lam_pos} must be >= 0 and tau={tau} in [0, 1)")
        self.lam_neg, self.lam_pos, self.tau, self.bce = float(lam_neg), float(lam_pos), float(tau), bce

    def label_loss(self, logits, y):
        return bce_mean_over_classes(logits, y) if self.bce == "mean" else row_loss(logits, y)

    def check(self, ctx):
        if ctx.pools.y_train.dim() != 2:
            raise BadParameterError("FedNCA-ML's loss needs multi-hot labels [N, K]; this pool is single-label")

    def batch_loss(self, outputs, batch, params, anchor, lead):
        if not (self.lam_neg or self.lam_pos):
            return None
        if not isinstance(outputs, dict) or "pair_logits" not in outputs:
            raise BadParameterError("L_Neg / L_Pos need class-wise features: use model 'fednca_net' with head='ladm'")
        pair, y, mask = outputs["pair_logits"], batch["y"], batch["mask"]
        total = 0.0
        if self.lam_neg:
            total = total + self.lam_neg * negative_rejection(pair, y, mask, self.tau)
        if self.lam_pos:
            total = total + self.lam_pos * positive_contrast(pair, y, mask)
        return total
