"""FedRS (Li & Zhan 2021, "FedRS: Federated Learning with Restricted Softmax for Label
Distribution Non-IID Data", eq. 6): a client scales the logits of the classes it does not hold by
alpha in [0, 1] before the softmax; aggregation is FedAvg's."""
from __future__ import annotations

import torch

from fedpaper.algorithms.base import Part


class RestrictedSoftmax(Part):
    key = "fedrs"

    def __init__(self, alpha: float):
        self.alpha = alpha

    def restrict(self, logits, present):
        return logits * torch.where(present, 1.0, self.alpha).unsqueeze(-2)
