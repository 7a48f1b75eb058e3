"""FedProx's client objective (Li et al. 2020, eq. 2): the local loss plus mu/2 ||w - w_t||^2,
w_t the model the client received. With private label sets there is no term on the classifier
(privlabels Sec 4.1). The term itself is algorithms.penalties.prox."""
from __future__ import annotations

from .base import Part
from .penalties import PENALTIES, PenaltyState


class Penalty(Part):
    """A named penalty of algorithms.penalties.PENALTIES as a part; `coef` holds the Method whose
    coefficients it reads (mu, weight_decay, private)."""

    def __init__(self, name: str, coef):
        self.name, self._coef, self.key = name, coef, f"penalty:{name}"

    def penalty(self, params, anchor, lead, classifier):
        return PENALTIES[self.name](params, anchor, self._coef, PenaltyState(lead, classifier))


def fedprox(method) -> Penalty:
    """FedProx's proximal term with method.mu (and no classifier term when method.private)."""
    return Penalty("prox", method)
