"""Mixup and pseudo-labels as parts: mixup adds y2/lam to the batch; pseudo-labels label each
slot's unlabeled rows once per round and append a batch of them to every step."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from part_harness import make_ctx

from fedpaper.algorithms.semisup import Mixup, PseudoLabels


def test_mixup_part_adds_targets():
    batch = {"x": torch.zeros(2, 4, 1), "y": torch.arange(8).view(2, 4), "mask": torch.ones(2, 4)}
    rngs = [np.random.default_rng(0), np.random.default_rng(1)]
    assert Mixup(0.75).augment(None, batch, np.ones((2, 4), bool), rngs, None, None, 0) is None
    assert {"y2", "lam"} <= set(batch) and batch["lam"].shape == (2,)


def test_pseudo_labels_part():
    x = torch.arange(6, dtype=torch.float32).view(6, 1)
    pools = SimpleNamespace(x_train=x, y_train=torch.zeros(6, dtype=torch.int64))
    feds = [SimpleNamespace(client_unlabeled_indices=[np.array([4, 5])])]
    # a "model" whose logits make row 4 confidently class 1 and row 5 uncertain
    logits = {4: [0.0, 9.0], 5: [0.0, 0.1]}
    predict = lambda params, xp, rows, buffers=None: [torch.tensor([logits[i] for i in r]) for r in rows]  # noqa
    ctx = make_ctx(np.ones((1, 1, 2)), pools=pools, feds=feds, predict=predict)
    p = PseudoLabels(0.9, weight=0.5)
    assert p.unlabeled_weight == 0.5
    data = p.prepare_round(ctx, {}, None, np.array([[0, 0]]), {})
    assert data["y"].tolist() == [[1, 1]] and data["keep"].tolist() == [[True, False]]
    assert p.min_steps(data, 1) == 2
    epoch = p.begin_epoch(data, 2, [np.random.default_rng(0)], 1, "cpu")
    batch = {"x": torch.zeros(1, 1, 1), "y": torch.zeros(1, 1, dtype=torch.int64), "mask": torch.ones(1, 1)}
    active = p.augment(ctx, batch, None, None, data, epoch, 0)
    assert batch["x"].shape == (1, 2, 1) and batch["x"][0, 1, 0].item() in (4.0, 5.0) and active.tolist() == [True]


def test_objective_unlabeled_term_is_the_mean_over_real_unlabeled_rows():
    """FixMatch eq. 4 as the Objective adds it: unlabeled_weight * sum(kept rows' CE) / (real
    unlabeled rows), by hand, for a batch of two labelled rows and a single real unlabeled row (its
    CE counted once, not halved) and for one with two real unlabeled rows, one kept."""
    from fedpaper.algorithms.base import Objective

    def ce(z, y):  # cross-entropy of one row, by hand
        return float(torch.logsumexp(z, 0) - z[y])

    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.3, -0.2, 1.1], [1.0, 1.0, -2.0]])
    y, yu = torch.tensor([0, 2]), torch.tensor([2, 1])
    labelled = (ce(logits[0], 0) + ce(logits[1], 2)) / 2
    one = {"x": torch.zeros(3, 1), "y": y, "mask": torch.ones(2), "yu": yu[:1], "ukeep": torch.ones(1),
           "umask": torch.ones(1)}
    loss, _ = Objective()(logits[:3], one, None, {}, {})
    assert float(loss) == pytest.approx(labelled + ce(logits[2], 2), rel=1e-6)
    two = {"x": torch.zeros(4, 1), "y": y, "mask": torch.ones(2), "yu": yu, "ukeep": torch.tensor([0.0, 1.0]),
           "umask": torch.ones(2)}
    loss, _ = Objective()(logits, two, None, {}, {})
    assert float(loss) == pytest.approx(labelled + ce(logits[3], 1) / 2, rel=1e-6)
