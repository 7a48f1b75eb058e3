"""SCAFFOLD (Karimireddy et al. 2020, Alg. 1 option II): correction c - c_i; c_i+ = c_i - c +
(x - y_i) / (K_i lr); c += (1/N) sum (c_i+ - c_i)."""
import torch
from part_harness import aggregation, full_slots, make_ctx

from fedpaper.algorithms.scaffold import ControlVariates


def test_control_variate_update_and_correction():
    params = {"w": torch.zeros(1, 2)}
    ctx = make_ctx([[[1, 0], [0, 1]]], params=params, lr=0.5)
    part_ = ControlVariates()
    state = {part_.key: part_.init_state(ctx)}
    slots, part = full_slots(1, 2)
    anchor = {"w": torch.zeros(2, 2)}
    new = {"w": torch.tensor([[-1.0, 0.0], [0.0, -2.0]])}
    steps = torch.tensor([2.0, 4.0])
    part_.aggregate(ctx, state, aggregation(new, slots, part, params, anchor=anchor, steps=steps), params)
    # c_i+ = 0 - 0 + (0 - y_i) / (K_i * 0.5): client 0 [1, 0], client 1 [0, 1]; c = mean = [0.5, 0.5]
    torch.testing.assert_close(state["scaffold"]["c_i"]["w"][0], torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    torch.testing.assert_close(state["scaffold"]["c"]["w"], torch.tensor([[0.5, 0.5]]))
    corr = part_.grad_correction(ctx, state, slots)["w"]
    torch.testing.assert_close(corr, torch.tensor([[-0.5, 0.5], [0.5, -0.5]]))
