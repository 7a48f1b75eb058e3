"""Tests for fedpaper.blocks.metrics: hand-computed cases and an O(n^2) AUC reference."""

import math

import numpy as np
import pytest

from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.metrics import (
    accuracy,
    binary_auc,
    bootstrap_ci,
    macro_f1,
    multilabel_auc,
    multilabel_f1,
    summarize,
)


def pairwise_auc(y, s):
    """O(n^2) reference: P(score_pos > score_neg) + 0.5 P(tie) over all positive/negative pairs."""
    pos, neg = s[y == 1], s[y == 0]
    if len(pos) == 0 or len(neg) == 0:
        return math.nan
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


# ------------------------------------------------------------------------------ single-label


def test_accuracy_labels_and_logits():
    assert accuracy([0, 1, 2, 1], [0, 2, 2, 1]) == 0.75
    logits = np.array([[2.0, 0.1, 0.0], [0.0, 0.1, 3.0], [0.0, 0.0, 1.0], [0.2, 0.9, 0.1]])
    assert accuracy([0, 1, 2, 1], logits) == 0.75


def test_macro_f1_hand_computed():
    # class 0: TP 1, FP 1, FN 1 -> 0.5; class 1: TP 2, FP 1 -> 0.8; class 2: FN 1 -> 0;
    # class 3 absent from both -> skipped
    y, p = [0, 0, 1, 1, 2], [0, 1, 1, 1, 0]
    assert macro_f1(y, p, num_classes=4) == pytest.approx((0.5 + 0.8 + 0.0) / 3)
    assert macro_f1(y, p) == pytest.approx((0.5 + 0.8 + 0.0) / 3)
    assert macro_f1([0, 1, 2], [0, 1, 2], 3) == 1.0
    logits = np.eye(4)[p] * 5.0
    assert macro_f1(y, logits) == pytest.approx((0.5 + 0.8 + 0.0) / 3)


def test_single_label_bad_inputs():
    with pytest.raises(BadParameterError):
        accuracy([0, 1], [0, 1, 1])
    with pytest.raises(BadParameterError):
        macro_f1([0, 5], [0, 1], num_classes=3)
    with pytest.raises(BadParameterError):
        accuracy([], [])


# ------------------------------------------------------------------------------ AUC


def test_auc_hand_computed_with_ties():
    assert binary_auc([1, 0, 1, 0], [0.9, 0.8, 0.3, 0.1]) == pytest.approx(0.75)
    # ties count 1/2: pairs (tie, win, tie, win)
    assert binary_auc([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.1]) == pytest.approx(0.75)
    assert binary_auc([1, 1, 0], [0.2, 0.2, 0.2]) == pytest.approx(0.5)
    assert math.isnan(binary_auc([1, 1, 1], [0.1, 0.2, 0.3]))


def test_multilabel_auc_macro_skips_single_valued_classes():
    y = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 0]])
    s = np.array([[0.9, 0.1, 0.5], [0.8, 0.7, 0.2], [0.3, 0.6, 0.9], [0.1, 0.2, 0.1]])
    # class 0: 0.75 (see above); class 1: positives {0.7, 0.6} vs negatives {0.1, 0.2} -> 1.0;
    # class 2 has no positives -> skipped
    value, skipped = multilabel_auc(y, s, "macro", return_skipped=True)
    assert value == pytest.approx((0.75 + 1.0) / 2)
    assert skipped == [2]
    assert multilabel_auc(y, s, "micro") == pytest.approx(pairwise_auc(y.ravel(), s.ravel()))


def test_auc_matches_pairwise_reference_on_random_data():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n, k = int(rng.integers(5, 60)), int(rng.integers(1, 6))
        y = (rng.random((n, k)) < rng.uniform(0.1, 0.6)).astype(int)
        s = np.round(rng.random((n, k)) + 0.5 * y, 1)  # rounding creates ties
        ref = [pairwise_auc(y[:, c], s[:, c]) for c in range(k)]
        ref = [r for r in ref if not math.isnan(r)]
        got = multilabel_auc(y, s, "macro")
        if ref:
            assert got == pytest.approx(np.mean(ref), abs=1e-12)
        else:
            assert math.isnan(got)
        assert multilabel_auc(y, s, "micro") == pytest.approx(pairwise_auc(y.ravel(), s.ravel()), abs=1e-12)


def test_auc_is_invariant_to_monotone_transforms():
    rng = np.random.default_rng(1)
    y = (rng.random((40, 3)) < 0.4).astype(int)
    logits = rng.normal(size=(40, 3)) + y
    probs = 1 / (1 + np.exp(-logits))
    assert multilabel_auc(y, logits) == pytest.approx(multilabel_auc(y, probs))


# ------------------------------------------------------------------------------ multi-label F1


def test_multilabel_f1_hand_computed():
    y = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [1, 1, 0, 0]])
    s = np.array([[0.9, 0.2, 0.4, 0.1], [0.6, 0.7, 0.1, 0.0], [0.8, 0.4, 0.3, 0.2]])
    # predictions at 0.5: [[1,0,0,0],[1,1,0,0],[1,0,0,0]]
    # class 0: TP 2 FP 1 -> 0.8; class 1: TP 1 FN 1 -> 2/3; class 2: FN 1 -> 0; class 3: 0/0
    assert multilabel_f1(y, s, average="macro") == pytest.approx((0.8 + 2 / 3 + 0) / 3)
    assert multilabel_f1(y, s, average="macro", absent="zero") == pytest.approx((0.8 + 2 / 3 + 0 + 0) / 4)
    assert multilabel_f1(y, s, average="micro") == pytest.approx(6 / 9)  # TP 3, FP 1, FN 2
    preds = (s >= 0.5).astype(int)
    assert multilabel_f1(y, preds) == multilabel_f1(y, s)
    logits = np.log(s + 1e-12) - np.log(1 - s + 1e-12)
    assert multilabel_f1(y, logits, threshold=0.0) == pytest.approx(multilabel_f1(y, s))


def test_multilabel_bad_inputs():
    with pytest.raises(BadParameterError):
        multilabel_auc([[0, 2]], [[0.1, 0.2]])  # not multi-hot
    with pytest.raises(BadParameterError):
        multilabel_auc([[0, 1]], [[0.1, 0.2, 0.3]])
    with pytest.raises(BadParameterError):
        multilabel_f1([[0, 1]], [[0.1, 0.2]], average="weighted")
    with pytest.raises(BadParameterError):
        multilabel_auc([[0, 1]], [[np.nan, 0.2]])


def test_metrics_accept_torch_tensors():
    torch = pytest.importorskip("torch")
    assert accuracy(torch.tensor([0, 1, 2, 1]), torch.tensor([0, 2, 2, 1])) == 0.75
    y = torch.tensor([[1, 0], [0, 1], [1, 1]])
    s = torch.tensor([[0.9, 0.3], [0.2, 0.8], [0.7, 0.4]], requires_grad=True)
    assert multilabel_auc(y, s) == pytest.approx(multilabel_auc(y.numpy(), s.detach().numpy()))
    assert multilabel_f1(y, s, average="micro") == pytest.approx(2 * 3 / (2 * 3 + 0 + 1))


# ------------------------------------------------------------------------------ seeds


def test_bootstrap_ci_contains_mean_and_narrows():
    rng = np.random.default_rng(2)
    small = rng.normal(0.7, 0.05, size=5)
    large = rng.normal(0.7, 0.05, size=200)
    lo_s, hi_s = bootstrap_ci(small)
    lo_l, hi_l = bootstrap_ci(large)
    assert lo_s <= small.mean() <= hi_s
    assert lo_l <= large.mean() <= hi_l
    assert hi_l - lo_l < hi_s - lo_s
    assert bootstrap_ci(small, seed=3) == bootstrap_ci(small, seed=3)  # deterministic
    lo90, hi90 = bootstrap_ci(small, confidence=0.90)
    assert lo_s <= lo90 and hi90 <= hi_s


def test_bootstrap_ci_single_and_constant_values():
    assert bootstrap_ci([0.42]) == (0.42, 0.42)
    assert bootstrap_ci([0.5, 0.5, 0.5]) == pytest.approx((0.5, 0.5))
    with pytest.raises(BadParameterError):
        bootstrap_ci([])
    with pytest.raises(BadParameterError):
        bootstrap_ci([0.1, 0.2], confidence=1.5)
    with pytest.raises(BadParameterError):
        bootstrap_ci([0.1, float("nan")])


def test_summarize():
    out = summarize([1.0, 2.0, 3.0, 4.0])
    assert out["mean"] == 2.5
    assert out["std"] == pytest.approx(math.sqrt(5 / 3))  # ddof=1
    assert out["n"] == 4
    assert out["ci_low"] <= 2.5 <= out["ci_high"]
    single = summarize([0.8])
    assert single == {"mean": 0.8, "std": 0.0, "n": 1, "ci_low": 0.8, "ci_high": 0.8}
