"""Macro/micro AUC and F1 (FedNCA-ML Sec. 5.1) against scikit-learn's, and the official per-batch
average."""
import numpy as np
import pytest
from sklearn.metrics import f1_score, roc_auc_score

from fedpaper.engine.evaluate import EXTRA_METRICS
from fedpaper.blocks.metrics import multilabel_auc, multilabel_f1, per_batch_mean


def _data(seed, n=200, k=6):
    rng = np.random.default_rng(seed)
    y = (rng.random((n, k)) < 0.3).astype(int)
    y[0], y[1] = 1, 0  # every class has positives and negatives
    logits = rng.normal(size=(n, k)) + 1.5 * y
    logits[:5] = np.round(logits[:5])  # some ties
    return y, logits


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("average", ["macro", "micro"])
def test_auc_and_f1_match_scikit_learn(seed, average):
    y, lg = _data(seed)
    assert multilabel_auc(y, lg, average) == pytest.approx(roc_auc_score(y, lg, average=average), abs=1e-12)
    pred = (lg >= 0).astype(int)
    assert multilabel_f1(y, lg, threshold=0.0, average=average) == pytest.approx(
        f1_score(y, pred, average=average, zero_division=0), abs=1e-12)
    assert EXTRA_METRICS[f"{average}_auc"](y, lg) == pytest.approx(roc_auc_score(y, lg, average=average))


def test_per_batch_mean_differs_from_whole_set_and_matches_by_hand():
    y, lg = _data(3, n=70)
    batches = [(0, 32), (32, 64), (64, 70)]
    by_hand = np.mean([roc_auc_score(y[a:b][:, (y[a:b].min(0) != y[a:b].max(0))],
                                     lg[a:b][:, (y[a:b].min(0) != y[a:b].max(0))], average="macro")
                       for a, b in batches])
    got = per_batch_mean(multilabel_auc, y, lg, 32, average="macro")
    assert got == pytest.approx(by_hand, abs=1e-12)
    assert got != pytest.approx(multilabel_auc(y, lg, "macro"), abs=1e-6)
    assert EXTRA_METRICS["batch_macro_auc"](y, lg) == pytest.approx(got)
    f1s = [f1_score(y[a:b], (lg[a:b] >= 0).astype(int), average="micro") for a, b in batches]
    assert EXTRA_METRICS["batch_micro_f1"](y, lg) == pytest.approx(np.mean(f1s))
