"""AFL (Mohri et al. 2019): weights are the mixture over participants; the mixture moves toward
the client with the larger loss and stays on the simplex."""
import numpy as np
import torch
from part_harness import aggregation, full_slots, make_ctx

from fedpaper.algorithms.afl import AFLMixture


def test_mixture_ascends_on_losses():
    ctx = make_ctx([[[5, 0], [0, 1]]])
    part_ = AFLMixture(0.1)
    state = {part_.key: part_.init_state(ctx)}
    slots, part = full_slots(1, 2)
    np.testing.assert_allclose(part_.weights(ctx, state, slots, part, None), [0.5, 0.5])
    prev = {"w": torch.zeros(1, 1)}
    part_.aggregate(ctx, state, aggregation({"w": torch.zeros(2, 1)}, slots, part, prev,
                                            losses=torch.tensor([0.1, 2.0])), prev)
    mix = state["afl"][0]
    assert mix[1] > 0.5 > mix[0] and abs(mix.sum() - 1) < 1e-12 and (mix >= 0).all()
