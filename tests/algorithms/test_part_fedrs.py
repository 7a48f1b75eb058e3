"""FedRS (Li & Zhan 2021 eq. 6): missing classes' logits scaled by alpha, others unchanged."""
import torch

from fedpaper.algorithms.fedrs import RestrictedSoftmax


def test_missing_class_logits_are_scaled():
    logits = torch.tensor([[[2.0, -4.0, 6.0]]])  # [G, B, K]
    present = torch.tensor([[True, False, True]])
    out = RestrictedSoftmax(0.5).restrict(logits, present)
    torch.testing.assert_close(out, torch.tensor([[[2.0, -2.0, 6.0]]]))
