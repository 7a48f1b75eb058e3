"""Independent references: what one full-batch round of each method computes, in plain torch/numpy.

Nothing here calls fedpaper's loss, restriction, aggregation or weight code: the client losses are
written out (log-sum-exp minus the true logit), gradients come from torch.autograd on them, and the
aggregation weights are computed from their definitions (the FedPALS QP with cvxpy, the simplex
projection by bisection).
"""
from __future__ import annotations

import itertools

import numpy as np
import torch


# ----------------------------------------------------------------------------- the models, by hand
def forward(params: dict, x: torch.Tensor) -> torch.Tensor:
    """Logits of logreg (classifier only) or TinyMLP (Linear + ReLU body, then the classifier)."""
    h = x
    if "features.0.weight" in params:
        h = torch.relu(h @ params["features.0.weight"].T + params["features.0.bias"])
    return h @ params["classifier.weight"].T + params["classifier.bias"]


def cross_entropy(logits: torch.Tensor, y: torch.Tensor, labels=None) -> torch.Tensor:
    """Mean over rows of log sum_{c in labels} exp(z_c) - z_y (all classes when labels is None)."""
    z = logits if labels is None else logits[:, list(labels)]
    return (torch.logsumexp(z, 1) - logits[torch.arange(len(y)), y]).mean()


def fedrs_logits(logits: torch.Tensor, labels, alpha: float) -> torch.Tensor:
    """FedRS (Li & Zhan 2021 eq. 6): a client's logits of classes it does not hold times alpha."""
    scale = torch.full((logits.shape[1],), alpha)
    scale[list(labels)] = 1.0
    return logits * scale


def sgd(params: dict, loss_fn, lr: float, steps: int, correction: dict | None = None) -> dict:
    """`steps` full-batch SGD steps on loss_fn(params); SCAFFOLD adds `correction` to each gradient."""
    p = {k: v.detach().clone() for k, v in params.items()}
    for _ in range(steps):
        q = {k: v.clone().requires_grad_(True) for k, v in p.items()}
        grads = dict(zip(q, torch.autograd.grad(loss_fn(q), list(q.values()), allow_unused=True)))
        p = {k: p[k] - lr * ((grads[k] if grads[k] is not None else torch.zeros_like(p[k]))
                             + (correction[k] if correction else 0.0)) for k in p}
    return p


def weighted(states: list, weights) -> dict:
    return {k: sum(float(w) * s[k] for w, s in zip(weights, states)) for k in states[0]}


# ----------------------------------------------------------------------------- weights, by definition
def fedpals_qp(S: np.ndarray, n: np.ndarray, T: np.ndarray, lam: float) -> np.ndarray:
    """FedPALS eq. 9 with cvxpy: argmin_{alpha in simplex} ||T - S^T alpha||^2 + lam sum alpha_i^2 / n_i."""
    import cvxpy as cp

    a = cp.Variable(len(n))
    obj = cp.sum_squares(T - S.T @ a) + lam * cp.sum(cp.multiply(1.0 / n, cp.square(a)))
    prob = cp.Problem(cp.Minimize(obj), [a >= 0, cp.sum(a) == 1])
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    assert prob.status == "optimal", prob.status
    alpha = np.clip(a.value, 0, None)
    return alpha / alpha.sum()


def simplex_projection(v: np.ndarray) -> np.ndarray:
    """argmin_{x in simplex} ||x - v||: x = max(v - tau, 0) with tau found by bisection on sum = 1."""
    lo, hi = v.min() - 1.0, v.max()
    for _ in range(200):
        tau = 0.5 * (lo + hi)
        if np.maximum(v - tau, 0).sum() > 1:
            lo = tau
        else:
            hi = tau
    return np.maximum(v - 0.5 * (lo + hi), 0)


# ----------------------------------------------------------------------------- central tuning losses
def tuning_mse(h: torch.Tensor, client_probs: list, w, label_sets: list) -> torch.Tensor:
    """privlabels eq. 6, mean over samples: sum_k w_k sum_{y in Y_k} (h_k(y|x) - h(y|x))^2."""
    total = 0.0
    for hk, wk, Y in zip(client_probs, w, label_sets):
        total = total + float(wk) * sum((hk[:, y] - h[:, y]) ** 2 for y in Y)
    return total.mean()


def tuning_pairwise(h: torch.Tensor, client_probs: list, w, label_sets: list) -> torch.Tensor:
    """privlabels eq. 5, mean over samples: sum_k w_k sum_{y<y' in Y_k} (h_k(y) h(y') - h_k(y') h(y))^2."""
    total = 0.0
    for hk, wk, Y in zip(client_probs, w, label_sets):
        for y, y2 in itertools.combinations(Y, 2):
            total = total + float(wk) * (hk[:, y] * h[:, y2] - hk[:, y2] * h[:, y]) ** 2
    return total.mean()


def softmax_over(logits: torch.Tensor, labels) -> torch.Tensor:
    """Softmax over `labels` only, zero elsewhere (a private client's h_k)."""
    out = torch.zeros_like(logits)
    out[:, list(labels)] = torch.softmax(logits[:, list(labels)], 1)
    return out
