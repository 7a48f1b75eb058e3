"""FedProx's client objective (Li et al. 2020, eq. 2): the local loss plus mu/2 ||w - w_t||^2,
w_t the model the client received. With private label sets there is no term on the classifier
(privlabels Sec 4.1). The term itself is algorithms.penalties.prox."""
from __future__ import annotations

from fedpaper.algorithms.base import Part
from fedpaper.algorithms.penalties import PENALTIES, PenaltyState


class Penalty(Part):
    """A named penalty of algorithms.penalties.PENALTIES as a part, with its coefficient (FedProx's
    mu, the L2 term's weight decay); skip_classifier: no term on the classifier's rows (FedProx
    with private label sets, privlabels Sec 4.1)."""

    def __init__(self, name: str, coef: float, skip_classifier: bool = False):
        self.name, self.coef, self.skip_classifier, self.key = name, coef, skip_classifier, f"penalty:{name}"

    def penalty(self, params, anchor, lead, classifier):
        return PENALTIES[self.name](params, anchor, self.coef, PenaltyState(lead, classifier, self.skip_classifier))
