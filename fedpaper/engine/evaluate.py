"""Evaluation of stacked models: logits on pool rows, and per-split metrics (fedpaper.blocks.metrics).

Logits come model by model (predict), or, with the grouped backend and BATCHED_OVER_MODELS, for
all models in one grouped forward pass (predict_grouped); both under TrainConfig.precision
("bf16": autocast of the forward pass, logits returned in float32).

Every split reports "acc" and "f1" (single-label: accuracy and macro-F1 over the classes present in
y or the predictions, computed in float32 on the device as they always were, so cached histories
keep their values; multi-label: per-label accuracy, macro-F1 at logit 0 and macro-AUC). Further
metrics by name (TrainConfig.metrics) come from fedpaper.blocks.metrics: EXTRA_METRICS.
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch.func import functional_call

from fedpaper.blocks import metrics as M
from fedpaper.blocks.models import logits_of
from fedpaper.ground.errors import BadParameterError

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


def autocast(precision: str, device) -> contextlib.AbstractContextManager:
    """The forward pass's precision (TrainConfig.precision): "bf16" autocasts to bfloat16 on the
    device (parameters stay float32); "fp32" changes nothing."""
    if precision == "bf16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def predict(template, params: dict, buffers: dict, x_pool: torch.Tensor, rows: list, K: int, eval_batch: int,
            device, train=False, precision="fp32", grouped=None) -> list:
    """Logits of each model (params [n, ...], buffers [n, ...]) on its own rows of x_pool (a model
    whose outputs are a dict gives its "logits"), float32 (computed under `precision`'s autocast).
    With `grouped` (a grouped.GroupedForward of the template) and in eval mode, all models are
    evaluated together (predict_grouped); otherwise model by model."""
    if grouped is not None and not train and len(rows) > 1:
        return predict_grouped(grouped, params, x_pool, rows, K, eval_batch, device, precision)
    template.train(train)

    def fwd(p, b, x):
        with autocast(precision, device):
            return logits_of(functional_call(template, (p, b), (x,))).float()
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


# Evaluation (and central tuning, algorithms/tuning.py) of several models in one grouped pass is
# switched OFF: on the 2-core benchmark CPU it was no faster than model by model for the privlabels
# CNN (benchmarks/bench_eval.py measures both); set True to use it (tests/engine/test_eval.py checks both agree).
BATCHED_OVER_MODELS = False
GROUP_MODELS = 10  # models per grouped evaluation pass (training: GROUPED_SAMPLES / batch 64 = 10 slots)


def predict_grouped(grouped, params: dict, x_pool: torch.Tensor, rows: list, K: int, eval_batch: int, device,
                    precision="fp32") -> list:
    """predict() for G models at once, as local training is batched: each pass gathers the next
    positions of every model's rows ([G, B, ...], B = eval_batch // G, at least 1, so a pass holds
    about eval_batch samples) and runs the G models in one grouped forward pass. Models with fewer
    rows repeat their last row in the padding, whose logits are dropped. More than GROUP_MODELS
    models go in chunks of GROUP_MODELS (a grouped convolution over many groups is slow on CPU)."""
    if len(rows) > GROUP_MODELS:
        return [lg for lo in range(0, len(rows), GROUP_MODELS)
                for lg in predict_grouped(grouped, {k: v[lo:lo + GROUP_MODELS] for k, v in params.items()}, x_pool,
                                          rows[lo:lo + GROUP_MODELS], K, eval_batch, device, precision)]
    G = len(rows)
    n = [len(r) for r in rows]
    if max(n) == 0:
        return [torch.zeros(0, K, device=device) for _ in rows]
    pad = np.zeros((G, max(n)), dtype=np.int64)
    for g, r in enumerate(rows):
        if n[g]:
            pad[g, :n[g]] = r
            pad[g, n[g]:] = r[-1]
    idx = torch.as_tensor(pad, device=device)
    step = max(1, eval_batch // G)
    out = []
    with torch.no_grad(), autocast(precision, device):
        for lo in range(0, idx.shape[1], step):
            out.append(grouped(params, x_pool[idx[:, lo:lo + step]], train=False).float())
    logits = torch.cat(out, 1)  # [G, max(n), K]
    return [logits[g, :n[g]] for g in range(G)]


def split_metrics(y, logits, K, extra=()) -> dict:
    """Single-label: accuracy and macro-F1. Multi-label (y multi-hot [N, K]): per-label accuracy,
    macro-F1 (threshold 0.5 on sigmoid) and macro-AUC over the whole split (fedpaper.blocks.metrics);
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
    fedpaper.blocks.metrics.macro_f1, computed in float32 on the device)."""
    if len(y) == 0:
        return float("nan")
    cm = torch.bincount(y * K + pred, minlength=K * K).view(K, K).float()
    tp = cm.diag()
    denom = cm.sum(0) + cm.sum(1)
    seen = denom > 0
    return (2 * tp[seen] / denom[seen]).mean().item()
