"""Evaluation metrics and seed-level summaries (numpy; torch tensors are accepted everywhere).

Single-label: :func:`accuracy`, :func:`macro_f1`.
Multi-label (FedNCA-ML, Sec. 5.1: "class-wise" = macro, "instance-wise" = micro):
:func:`multilabel_auc`, :func:`multilabel_f1`, plus :func:`binary_auc`.
Across seeds: :func:`bootstrap_ci` (percentile bootstrap of the mean; privlabels vague-14) and
:func:`summarize` (mean, sample std, n, CI) for tidy tables.

All metrics are computed over the whole evaluation set passed in (not averaged over batches), and
are returned as fractions in [0, 1] (multiply by 100 for the papers' percentages).  scikit-learn is
not needed; the conventions follow its defaults where they are noted below.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import rankdata

from fedpaper.ground.errors import BadParameterError

__all__ = [
    "accuracy",
    "macro_f1",
    "binary_auc",
    "multilabel_auc",
    "multilabel_f1",
    "per_batch_mean",
    "bootstrap_ci",
    "summarize",
]

_AVERAGES = ("macro", "micro")


def _to_numpy(x, name):
    if hasattr(x, "detach"):  # torch.Tensor (any device)
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError):
        raise BadParameterError(f"{name} must be an array or tensor; got {type(x).__name__}") from None
    if arr.dtype == object:
        raise BadParameterError(f"{name} must be numeric; got an object array")
    return arr


def _labels_and_preds(y_true, y_pred_or_logits):
    """Integer labels [N] and integer predictions [N] (argmax over the last axis for [N, C] scores)."""
    y = _to_numpy(y_true, "y_true")
    p = _to_numpy(y_pred_or_logits, "y_pred")
    if y.ndim != 1:
        raise BadParameterError(f"y_true must be 1-D class indices; got shape {y.shape}")
    n_scores = None
    if p.ndim == 2:
        n_scores = p.shape[1]
        p = p.argmax(axis=1)
    elif p.ndim != 1:
        raise BadParameterError(f"predictions must be [N] labels or [N, C] scores; got shape {p.shape}")
    if p.shape[0] != y.shape[0]:
        raise BadParameterError(f"y_true has {y.shape[0]} samples but predictions have {p.shape[0]}; they must match")
    if y.shape[0] == 0:
        raise BadParameterError("y_true is empty; pass at least one sample")
    for arr, name in ((y, "y_true"), (p, "y_pred")):
        if not np.issubdtype(arr.dtype, np.integer) and not np.all(arr == np.round(arr)):
            raise BadParameterError(f"{name} must hold integer class indices")
    return y.astype(np.int64), p.astype(np.int64), n_scores


def accuracy(y_true, y_pred_or_logits):
    """Fraction of correct predictions.  ``y_pred_or_logits`` is ``[N]`` labels or ``[N, C]``
    scores/logits/probabilities (argmax taken)."""
    y, p, _ = _labels_and_preds(y_true, y_pred_or_logits)
    return float(np.mean(y == p))


def macro_f1(y_true, y_pred, num_classes=None):
    """Macro-averaged F1 for single-label classification (unweighted mean of per-class F1).

    Per class c: F1_c = 2 TP / (2 TP + FP + FN).  Classes absent from both ``y_true`` and the
    predictions (TP + FP + FN = 0, F1 undefined) are skipped; a class that is predicted but never
    true (or true but never predicted) counts with F1 = 0.  This equals scikit-learn's default
    ``f1_score(average="macro")``, which uses only the labels that occur in y_true or y_pred.
    ``y_pred`` may be ``[N]`` labels or ``[N, C]`` scores (argmax taken).  ``num_classes`` defaults
    to the score width, or to max(label) + 1; labels must lie in [0, num_classes).
    """
    y, p, n_scores = _labels_and_preds(y_true, y_pred)
    if num_classes is None:
        num_classes = n_scores if n_scores is not None else int(max(y.max(), p.max())) + 1
    if not isinstance(num_classes, (int, np.integer)) or num_classes < 1:
        raise BadParameterError(f"num_classes={num_classes!r} must be a positive integer")
    lo, hi = int(min(y.min(), p.min())), int(max(y.max(), p.max()))
    if lo < 0 or hi >= num_classes:
        raise BadParameterError(f"labels must lie in [0, {num_classes - 1}]; found values in [{lo}, {hi}]")
    tp = np.bincount(y[y == p], minlength=num_classes).astype(float)
    fp = np.bincount(p, minlength=num_classes) - tp
    fn = np.bincount(y, minlength=num_classes) - tp
    denom = 2 * tp + fp + fn
    present = denom > 0
    return float(np.mean(2 * tp[present] / denom[present]))


def _check_multilabel(y_true, scores):
    y = _to_numpy(y_true, "y_true")
    s = _to_numpy(scores, "scores")
    if y.ndim != 2:
        raise BadParameterError(f"y_true must be [N, K] multi-hot; got shape {y.shape}")
    if s.shape != y.shape:
        raise BadParameterError(f"scores have shape {s.shape} but y_true has shape {y.shape}; they must match")
    if y.shape[0] == 0:
        raise BadParameterError("y_true is empty; pass at least one sample")
    if not np.all((y == 0) | (y == 1)):
        raise BadParameterError("y_true must be multi-hot (only 0 and 1)")
    s = s.astype(float)
    if not np.all(np.isfinite(s)):
        raise BadParameterError("scores contain NaN or inf")
    return y.astype(bool), s


def _auc_columns(y, s):
    """ROC AUC of every column by the rank (Mann-Whitney) formula, ties getting average ranks.

    AUC = (sum of ranks of positives - P (P + 1) / 2) / (P Q), P positives and Q negatives; this
    equals P(score_pos > score_neg) + 0.5 P(tie).  Columns with P = 0 or Q = 0 give NaN.
    """
    ranks = rankdata(s, method="average", axis=0)
    pos = y.sum(axis=0).astype(float)
    neg = y.shape[0] - pos
    rank_sum = np.where(y, ranks, 0.0).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        auc = (rank_sum - pos * (pos + 1) / 2) / (pos * neg)
    auc[(pos == 0) | (neg == 0)] = np.nan
    return auc


def binary_auc(y_true, scores):
    """ROC AUC of one binary problem (rank formula, ties as 1/2); NaN if only one class occurs."""
    y = _to_numpy(y_true, "y_true").reshape(-1, 1)
    s = _to_numpy(scores, "scores").reshape(-1, 1)
    y, s = _check_multilabel(y, s)
    return float(_auc_columns(y, s)[0])


def multilabel_auc(y_true, scores, average="macro", *, return_skipped=False):
    """ROC AUC for multi-label data: ``y_true`` ``[N, K]`` multi-hot, ``scores`` ``[N, K]`` (any
    monotone score: probabilities or logits give the same AUC).

    ``average="macro"`` (class-wise): unweighted mean of the per-class AUCs; classes whose column
    has only one label value (no positives or no negatives; AUC undefined) are skipped.
    ``average="micro"`` (instance-wise): one AUC over all N*K (label, score) pairs, as
    scikit-learn's ``average="micro"``.  Ties get average ranks (count 1/2).
    Returns NaN when nothing is defined.  With ``return_skipped=True`` returns ``(auc, skipped)``
    where ``skipped`` lists the class indices left out of the macro average (empty for micro).
    """
    if average not in _AVERAGES:
        raise BadParameterError(f"average={average!r} is not allowed; choose one of {list(_AVERAGES)}")
    y, s = _check_multilabel(y_true, scores)
    if average == "micro":
        value = float(_auc_columns(y.reshape(-1, 1), s.reshape(-1, 1))[0])
        skipped = []
    else:
        per_class = _auc_columns(y, s)
        ok = ~np.isnan(per_class)
        skipped = np.flatnonzero(~ok).tolist()
        value = float(per_class[ok].mean()) if ok.any() else math.nan
    return (value, skipped) if return_skipped else value


def multilabel_f1(y_true, scores_or_preds, threshold=0.5, average="macro", *, absent="skip"):
    """F1 for multi-label data; a label is predicted when ``score >= threshold``.

    ``scores_or_preds``: ``[N, K]`` probabilities (sigmoid outputs; default threshold 0.5, FedNCA
    vague-5) or 0/1 predictions; pass ``threshold=0.0`` for logits.
    ``average="micro"``: 2 TP / (2 TP + FP + FN) with counts summed over all classes.
    ``average="macro"``: unweighted mean of per-class F1.  ``absent="skip"`` (default) leaves out
    classes with no true and no predicted positives (F1 = 0/0); ``absent="zero"`` counts them as 0
    (scikit-learn's ``zero_division=0``).  A class predicted but absent from ``y_true`` has F1 = 0
    either way.  Returns NaN when nothing is defined.
    """
    if average not in _AVERAGES:
        raise BadParameterError(f"average={average!r} is not allowed; choose one of {list(_AVERAGES)}")
    if absent not in ("skip", "zero"):
        raise BadParameterError(f"absent={absent!r} is not allowed; choose one of ['skip', 'zero']")
    y, s = _check_multilabel(y_true, scores_or_preds)
    pred = s >= threshold
    tp = (y & pred).sum(axis=0).astype(float)
    fp = (~y & pred).sum(axis=0).astype(float)
    fn = (y & ~pred).sum(axis=0).astype(float)
    if average == "micro":
        denom = 2 * tp.sum() + fp.sum() + fn.sum()
        return float(2 * tp.sum() / denom) if denom > 0 else math.nan
    denom = 2 * tp + fp + fn
    defined = denom > 0
    f1 = np.zeros_like(tp)
    f1[defined] = 2 * tp[defined] / denom[defined]
    if absent == "zero":
        return float(f1.mean())
    return float(f1[defined].mean()) if defined.any() else math.nan


def per_batch_mean(metric, y_true, scores, batch_size=32, **kwargs):
    """The mean over consecutive test batches of ``metric(y_batch, scores_batch, **kwargs)``: how
    FedNCA-ML's official code reports F1 and AUC (PUBLIC-CODE.md; targets vague-5), kept as a second
    column next to the whole-set value. Batches where the metric is undefined (NaN, e.g. a class
    with no positive in the batch for a macro-AUC where every class is undefined) are left out."""
    y = _to_numpy(y_true, "y_true")
    s = _to_numpy(scores, "scores")
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise BadParameterError(f"batch_size={batch_size!r} must be a positive integer")
    vals = [metric(y[i:i + batch_size], s[i:i + batch_size], **kwargs) for i in range(0, len(y), batch_size)]
    vals = [v for v in vals if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def _values_1d(values):
    v = _to_numpy(values, "values").astype(float).ravel()
    if v.size == 0:
        raise BadParameterError("values is empty; pass at least one value")
    if not np.all(np.isfinite(v)):
        raise BadParameterError("values contain NaN or inf; drop undefined runs first")
    return v


def bootstrap_ci(values, n_resamples=1000, confidence=0.95, seed=0):
    """Percentile-bootstrap confidence interval of the mean (privlabels vague-14: 1000 resamples).

    Resamples the values with replacement ``n_resamples`` times (``numpy.random.default_rng(seed)``),
    and returns the (1 - confidence)/2 and (1 + confidence)/2 percentiles of the resampled means
    (linear interpolation, as ``numpy.percentile``).  A single value v gives ``(v, v)``.
    """
    v = _values_1d(values)
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise BadParameterError(f"n_resamples={n_resamples!r} must be a positive integer")
    if not (0 < confidence < 1):
        raise BadParameterError(f"confidence={confidence!r} is out of range; it must lie in (0, 1)")
    if v.size == 1:
        return float(v[0]), float(v[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, v.size, size=(n_resamples, v.size))
    means = v[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.percentile(means, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def summarize(values, *, n_resamples=1000, confidence=0.95, seed=0):
    """Summary of per-seed values for tables: ``dict(mean, std, n, ci_low, ci_high)``.

    ``std`` is the sample standard deviation (ddof=1; 0.0 for a single value, FedPALS vague-13);
    ``ci_low``/``ci_high`` come from :func:`bootstrap_ci` with the given settings.
    """
    v = _values_1d(values)
    low, high = bootstrap_ci(v, n_resamples=n_resamples, confidence=confidence, seed=seed)
    return {
        "mean": float(v.mean()),
        "std": float(v.std(ddof=1)) if v.size > 1 else 0.0,
        "n": int(v.size),
        "ci_low": low,
        "ci_high": high,
    }
