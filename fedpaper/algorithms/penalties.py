"""Extra per-client loss terms: a registry of named penalties added to the client objective.

A penalty is `f(params, anchor, coef, state) -> per-slot scalar`: `params` are the slot's
parameters being trained, `anchor` the parameters the client received this round, `coef` its
coefficient and `state` a PenaltyState. The engine calls it with one slot's
parameters (vmap and loop backends: a 0-d result) or with all slots stacked [G, ...] (grouped
backend: a [G] result); `state.lead` says which, and `sumsq` reduces accordingly.

A Method's active penalties are `active(method)`: "prox" for client="fedprox", then the names in
`Method.penalties` in order; each becomes an algorithms.fedprox.Penalty part with its coefficient
(`coefficient(method, name)`). Register a new term by adding a function to PENALTIES and its
coefficient to COEFFICIENTS (and a field to Method).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PenaltyState:
    """lead: 0 for one slot's parameters, 1 for stacked [G, ...] parameters. classifier: the names
    of the classifier weight and bias (the rows private label sets restrict); skip_classifier: leave them
    out of the term."""

    lead: int
    classifier: tuple
    skip_classifier: bool = False


def sumsq(t, lead: int):
    """Sum of squares of t per slot: a scalar (lead=0) or one value per leading index (lead=1)."""
    sq = t ** 2
    return sq.sum() if lead == 0 else sq.flatten(1).sum(1)


def prox(params, anchor, mu, state):
    """FedProx's proximal term mu/2 ||w - w_t||^2 (Li et al. 2020, eq. 2). With private label sets
    there is no term on the classifier (privlabels Sec 4.1; state.skip_classifier)."""
    skip = set(state.classifier) if state.skip_classifier else set()
    return 0.5 * mu * sum(sumsq(params[k] - anchor[k], state.lead) for k in params if k not in skip)


def l2(params, anchor, weight_decay, state):
    """L2 weight decay wd/2 ||w||^2 over all parameters, wd = Method.weight_decay (Krogh & Hertz
    1992, "A simple weight decay can improve generalization", eq. 1; the "weight decay 5e-4" of
    FedMT App C.1). Its gradient wd * w is what torch.optim.SGD/Adam(weight_decay=wd) add."""
    return 0.5 * weight_decay * sum(sumsq(p, state.lead) for p in params.values())


PENALTIES = {"prox": prox, "l2": l2}
COEFFICIENTS = {"prox": "mu", "l2": "weight_decay"}  # the Method field holding each term's coefficient


def active(method) -> tuple:
    """Names of the penalties in `method`'s client loss, in the order they are added."""
    return (("prox",) if method.client == "fedprox" else ()) + tuple(method.penalties)


def coefficient(method, name: str) -> float:
    """The coefficient of penalty `name` in `method`."""
    return getattr(method, COEFFICIENTS[name])
