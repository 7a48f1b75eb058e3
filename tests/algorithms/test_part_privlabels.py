"""Private label sets (privlabels Alg. 1): broadcast zeroes rows outside Y_k, the softmax runs over
Y_k, row y is averaged over its holders with n_k / n'_y, an unheld row keeps its value."""
import torch
from part_harness import aggregation, full_slots, make_ctx

from fedpaper.algorithms.privlabels import PrivateLabels

W, B = "classifier.weight", "classifier.bias"


def test_broadcast_restrict_and_rows():
    ctx = make_ctx([[[2, 2, 0], [0, 6, 0]]])  # label 2 held by no one
    slots, part = full_slots(1, 2)
    p = PrivateLabels()
    prev = {W: torch.full((1, 3, 2), 9.0), B: torch.full((1, 3), 9.0)}
    sent = p.broadcast(ctx, {}, {k: v[slots[:, 0]] for k, v in prev.items()}, slots)
    assert sent[W][0, 2].abs().sum() == 0 and sent[B][1, 0] == 0 and sent[B][1, 1] == 9
    logits = p.restrict(torch.zeros(2, 1, 3), ctx.present[0])
    assert logits[1, 0, 0] < -1e8 and logits[1, 0, 1] == 0
    new = {W: torch.stack([torch.full((3, 2), 1.0), torch.full((3, 2), 5.0)]),
           B: torch.tensor([[1.0, 1.0, 1.0], [5.0, 5.0, 5.0]])}
    glob = p.aggregate(ctx, {}, aggregation(new, slots, part, prev), {W: None, B: None})
    # row 0: only client 0; row 1: 4/10 * 1 + 6/10 * 5 = 3.4; row 2: nobody -> previous value 9
    torch.testing.assert_close(glob[B], torch.tensor([[1.0, 3.4, 9.0]]))
    torch.testing.assert_close(glob[W][0, :, 0], torch.tensor([1.0, 3.4, 9.0]))
