"""Evaluation of stacked models: logits on pool rows, and per-split metrics (fedpaper.metrics).

Every split reports "acc" and "f1" (single-label: accuracy and macro-F1 over the classes present in
y or the predictions, computed in float32 on the device as they always were, so cached histories
keep their values; multi-label: per-label accuracy, macro-F1 at logit 0 and macro-AUC). Further
metrics by name (TrainConfig.metrics) come from fedpaper.metrics: EXTRA_METRICS.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call

from .. import metrics as M
from ..algorithms.base import logits_of
from ..errors import BadParameterError

EXTRA_METRICS = {
    # single-label: y [N] class indices; multi-label: y [N, K] multi-hot; logits [N, K]
    "micro_f1": lambda y, lg: (M.multilabel_f1(y, lg, threshold=0.0, average="micro") if y.ndim == 2
                               else M.accuracy(y, lg)),  # single-label micro-F1 is accuracy
    "micro_auc": lambda y, lg: M.multilabel_auc(y, lg, average="micro") if y.ndim == 2 else float("nan"),
    "macro_auc": lambda y, lg: M.multilabel_auc(y, lg, average="macro") if y.ndim == 2 else float("nan"),
    "macro_f1_sk": lambda y, lg: (M.multilabel_f1(y, lg, threshold=0.0, average="macro") if y.ndim == 2
                                  else M.macro_f1(y, lg, lg.shape[1])),
}
# FedNCA-ML's official code averages AUC and F1 over test batches of 32 (multi-label only)
for _avg in ("macro", "micro"):
    EXTRA_METRICS[f"batch_{_avg}_auc"] = (lambda a: lambda y, lg: M.per_batch_mean(
        M.multilabel_auc, y, lg, 32, average=a) if y.ndim == 2 else float("nan"))(_avg)
    EXTRA_METRICS[f"batch_{_avg}_f1"] = (lambda a: lambda y, lg: M.per_batch_mean(
        M.multilabel_f1, y, lg, 32, threshold=0.0, average=a) if y.ndim == 2 else float("nan"))(_avg)


def check_metrics(names) -> tuple:
    unknown = [n for n in names if n not in EXTRA_METRICS]
    if unknown:
        raise BadParameterError(f"unknown metric {unknown[0]!r}; known: {tuple(EXTRA_METRICS)}")
    return tuple(names)


def predict(template, params: dict, buffers: dict, x_pool: torch.Tensor, rows: list, K: int, eval_batch: int,
            device, train=False) -> list:
    """Logits of each model (params [n, ...], buffers [n, ...]) on its own rows of x_pool (a model
    whose outputs are a dict gives its "logits")."""
    template.train(train)
    fwd = lambda p, b, x: logits_of(functional_call(template, (p, b), (x,)))  # noqa: E731
    out = []
    for r, rr in enumerate(rows):
        p = {k: v[r] for k, v in params.items()}
        b = {k: v[r] for k, v in buffers.items()}
        rr = torch.as_tensor(np.asarray(rr), device=device)
        with torch.no_grad():
            out.append(torch.cat([fwd(p, b, x_pool[rr[i:i + eval_batch]]) for i in range(0, len(rr), eval_batch)])
                       if len(rr) else torch.zeros(0, K, device=device))
    template.train(True)
    return out


def split_metrics(y, logits, K, extra=()) -> dict:
    """Single-label: accuracy and macro-F1. Multi-label (y multi-hot [N, K]): per-label accuracy,
    macro-F1 (threshold 0.5 on sigmoid) and macro-AUC over the whole split (fedpaper.metrics);
    plus the EXTRA_METRICS named in `extra`."""
    if len(y) == 0:
        return {"acc": float("nan"), "f1": float("nan"), **{n: float("nan") for n in extra}}
    if y.dim() == 1:
        pred = logits.argmax(1)
        out = {"acc": (pred == y).float().mean().item(), "f1": _macro_f1(y, pred, K)}
    else:
        yt, sc = y.cpu().numpy(), logits.cpu().numpy()
        out = {"acc": float(((sc > 0) == (yt > 0.5)).mean()),
               "f1": float(M.multilabel_f1(yt, sc, threshold=0.0, average="macro")),
               "auc": float(M.multilabel_auc(yt, sc, average="macro"))}
    if extra:
        yt, sc = y.cpu().numpy(), logits.float().cpu().numpy()
        out.update({n: float(EXTRA_METRICS[n](yt, sc)) for n in extra})
    return out


def _macro_f1(y, pred, K) -> float:
    """Macro-F1 over the classes present in y or pred (the FedPALS iWildCam metric; the same value as
    fedpaper.metrics.macro_f1, computed in float32 on the device)."""
    if len(y) == 0:
        return float("nan")
    cm = torch.bincount(y * K + pred, minlength=K * K).view(K, K).float()
    tp = cm.diag()
    denom = cm.sum(0) + cm.sum(1)
    seen = denom > 0
    return (2 * tp[seen] / denom[seen]).mean().item()
