"""FedAvg (fedpals eq. 4): alpha_i = n_i / N; the aggregate is the weighted average per run."""
import numpy as np
import torch
from part_harness import aggregation, full_slots, make_ctx

from fedpaper.algorithms.base import Algorithm, FedAvgWeights


def test_weights_are_sample_shares_per_run():
    ctx = make_ctx([[[3, 1], [0, 4]], [[1, 0], [0, 1]]])  # run 0: n = 4, 4; run 1: n = 1, 1
    slots, part = full_slots(2, 2)
    w = FedAvgWeights().weights(ctx, {}, slots, part, None)
    np.testing.assert_allclose(w, [0.5, 0.5, 0.5, 0.5])
    ctx = make_ctx([[[6, 0], [1, 1]]])
    slots, part = full_slots(1, 2)
    np.testing.assert_allclose(FedAvgWeights().weights(ctx, {}, slots, part, None), [0.75, 0.25])


def test_aggregate_is_weighted_average():
    ctx = make_ctx([[[6, 0], [1, 1]]])
    slots, part = full_slots(1, 2)
    prev = {"w": torch.zeros(1, 3)}
    new = {"w": torch.tensor([[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]])}
    glob = Algorithm("fedavg").aggregate(ctx, {}, aggregation(new, slots, part, prev))
    torch.testing.assert_close(glob["w"], torch.tensor([[2.0, 3.0, 4.0]]))
