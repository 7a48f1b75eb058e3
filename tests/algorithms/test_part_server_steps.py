"""Server steps: server training trains the global models on the labelled server rows through the
Context's train_slots (FedMT Alg. 1 procedure A); central tuning's losses vanish at agreement
(privlabels eqs. 5-6)."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from part_harness import make_ctx

from fedpaper.algorithms.server_training import ServerTraining
from fedpaper.algorithms.tuning import tuning_loss
from fedpaper.ground.errors import BadParameterError


def test_server_training_uses_server_rows_and_plain_objective():
    calls = {}

    def train_slots(params, rows, present, rngs, algo, epochs, bufs):
        calls.update(rows=rows, present=present, algo=algo, epochs=epochs)
        return {k: v + 1 for k, v in params.items()}, None, None, None

    feds = [SimpleNamespace(server_indices=np.array([3, 4])), SimpleNamespace(server_indices=np.array([5]))]
    ctx = make_ctx(np.ones((2, 1, 3)), feds=feds, train_slots=train_slots)
    glob, bufs = ServerTraining(2).server_step(ctx, {}, {"w": torch.zeros(2, 1)}, {}, None, rngs=None)
    assert torch.equal(glob["w"], torch.ones(2, 1)) and calls["epochs"] == 2 and bool(calls["present"].all())
    assert [list(r) for r in calls["rows"]] == [[3, 4], [5]]
    assert [type(p).__name__ for p in calls["algo"].parts] == ["FedAvgWeights"]  # no penalties, no mixup
    with pytest.raises(BadParameterError, match="server_indices"):
        ServerTraining(1).check(make_ctx(np.ones((1, 1, 3)), feds=[SimpleNamespace(server_indices=None)]))


def test_tuning_losses_vanish_when_model_agrees():
    present = torch.tensor([[True, True, False]])
    h_k = torch.tensor([[[0.6, 0.4, 0.0]]])
    for kind in ("mse", "pairwise", "pairwise_all"):
        assert tuning_loss(torch.tensor([[0.6, 0.4, 0.0]]), h_k, torch.tensor([1.0]), present, kind) < 1e-12
