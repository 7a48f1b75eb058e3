"""privlabels App B as numbers: the tuning losses when one label (9) is held by no client.

App B (l.267-325) argues symbolically that with label 9 absent from every client, the client
probabilities h_k(9|x) are 0, so every term of the pairwise loss that involves label 9 reduces to
(h_k(y_j|x) p_9)^2 and its gradient pushes the central p_9 to 0. That argument needs the pairwise
loss over ALL label pairs (vague-7); eq. (5) sums only over pairs inside Y_k and never touches
label 9, and the MSE loss (eq. 6) has no term for it either.

We evaluate `fedpaper.algorithms.tuning.tuning_loss` (the losses the engine trains with) exactly,
with torch autograd, on fixed synthetic client probabilities: 10 labels, four private clients with
label sets covering 0-8 (softmax over Y_k of fixed random logits, 0 outside), central model
h = [(1 - p_9) q, p_9] with q the clients' average prediction over labels 0-8, p_9 on a grid.
Reported per loss and p_9: the loss, dL/dp_9 with the other central probabilities held fixed (App
B's view) and dL/dz_9, the gradient w.r.t. the central logit of label 9 through the softmax (what
training sees). For the all-pairs loss we also check the identity of App B: the label-9 terms equal
sum_k w_k sum_j (h_k(j) p_9)^2.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from fedpaper.algorithms.tuning import tuning_loss

K, ABSENT = 10, 9
LABEL_SETS = [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7], [6, 7, 8, 0]]
LOSSES = {"pairwise_all": "Pairwise, all pairs (App B)", "pairwise": "Pairwise, pairs in Y_k (eq. 5)",
          "mse": "MSE (eq. 6)"}
P9_GRID = [round(x, 3) for x in np.linspace(0.0, 0.9, 19)]


def client_setup(seed: int = 0, samples: int = 4):
    """Client probabilities [M, B, K] (softmax over Y_k, 0 elsewhere), weights, presence [M, K]."""
    g = torch.Generator().manual_seed(seed)
    M = len(LABEL_SETS)
    present = torch.zeros(M, K, dtype=torch.bool)
    for k, s in enumerate(LABEL_SETS):
        present[k, s] = True
    logits = torch.randn(M, samples, K, generator=g, dtype=torch.float64) * 1.5
    logits = torch.where(present[:, None, :], logits, torch.full_like(logits, -torch.inf))
    probs = torch.softmax(logits, -1)
    w = torch.full((M,), 1.0 / M, dtype=torch.float64)
    return probs, w, present


def _central(q: torch.Tensor, p9: torch.Tensor) -> torch.Tensor:
    """h = [(1 - p9) q, p9] over a batch; q [B, K-1] rows summing to one."""
    return torch.cat([(1 - p9) * q, p9.expand(q.shape[0], 1)], dim=1)


def evaluate(p9: float, kind: str, probs, w, present) -> dict:
    """Loss, dL/dp9 (others fixed) and dL/dz9 (through the softmax) at one p9."""
    q = probs[..., :ABSENT].mean(0)
    q = q / q.sum(-1, keepdim=True)
    # others fixed: h_j = (1 - p9_0) q_j stay constant while p9 moves
    p = torch.tensor(p9, dtype=torch.float64, requires_grad=True)
    h_fixed = torch.cat([(1 - p9) * q, p.expand(q.shape[0], 1)], dim=1)
    loss = tuning_loss(h_fixed, probs, w, present, kind)
    (g_fixed,) = torch.autograd.grad(loss, p)
    # through the softmax: z = [log q + c, z9] with softmax(z)_9 = p9
    z9 = torch.tensor(float(np.log(max(p9, 1e-12) / max(1 - p9, 1e-12))), dtype=torch.float64, requires_grad=True)
    z = torch.cat([torch.log(q), z9.expand(q.shape[0], 1)], dim=1)
    h = torch.softmax(z, -1)
    (g_z,) = torch.autograd.grad(tuning_loss(h, probs, w, present, kind), z9)
    return {"loss": float(loss.detach()), "dloss_dp9_others_fixed": float(g_fixed), "dloss_dz9_softmax": float(g_z)}


def label9_terms(p9: float, probs, w, present) -> tuple[float, float]:
    """(label-9 terms of the all-pairs loss, App B's formula sum_k w_k sum_j (h_k(j) p9)^2)."""
    q = probs[..., :ABSENT].mean(0)
    q = q / q.sum(-1, keepdim=True)
    h = _central(q, torch.tensor(p9, dtype=torch.float64))
    full = tuning_loss(h, probs, w, present, "pairwise_all")
    without = tuning_loss(h[:, :ABSENT], probs[..., :ABSENT], w, present[:, :ABSENT], "pairwise_all")
    formula = (w.view(-1, 1) * ((probs[..., :ABSENT] * p9) ** 2).sum(-1)).sum(0).mean()
    return float(full - without), float(formula)


def compute(p9_grid=P9_GRID, seed: int = 0) -> pd.DataFrame:
    probs, w, present = client_setup(seed)
    rows = []
    for kind, label in LOSSES.items():
        for p9 in p9_grid:
            for metric, v in evaluate(p9, kind, probs, w, present).items():
                rows.append({"method": label, "loss": kind, "p9": p9, "metric": metric, "value": v})
    for p9 in p9_grid:
        terms, formula = label9_terms(p9, probs, w, present)
        rows.append({"method": LOSSES["pairwise_all"], "loss": "pairwise_all", "p9": p9,
                     "metric": "label9_terms", "value": terms})
        rows.append({"method": LOSSES["pairwise_all"], "loss": "pairwise_all", "p9": p9,
                     "metric": "label9_terms_appB_formula", "value": formula})
    return pd.DataFrame(rows)


def draw(table: pd.DataFrame, sub: str = ""):
    import matplotlib.pyplot as plt

    panels = [("loss", "tuning loss"), ("dloss_dp9_others_fixed", "dL/dp_9 (other h(y) fixed)"),
              ("dloss_dz9_softmax", "dL/dz_9 (through the softmax)")]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, (metric, ylabel) in zip(axes, panels):
        for i, (kind, label) in enumerate(LOSSES.items()):
            t = table[(table["loss"] == kind) & (table["metric"] == metric)]
            ax.plot(t["p9"], t["value"], marker="o", ms=3, color=f"C{i + 3}", label=label)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xlabel("central probability p_9 of the label no client holds")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("App B: label 9 held by no client (4 clients, label sets cover 0-8; exact, autograd)"
                 + (f"\n{sub}" if sub else ""), fontsize=10)
    fig.tight_layout()
    return fig
