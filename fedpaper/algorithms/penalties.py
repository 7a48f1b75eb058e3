"""Extra per-client loss terms: a registry of named penalties added to the client objective.

A penalty is `f(params, anchor, method, state) -> per-slot scalar`: `params` are the slot's
parameters being trained, `anchor` the parameters the client received this round, `method` the
Method (its coefficients) and `state` a PenaltyState. The engine calls it with one slot's
parameters (vmap and loop backends: a 0-d result) or with all slots stacked [G, ...] (grouped
backend: a [G] result); `state.lead` says which, and `sumsq` reduces accordingly.

A Method's active penalties are `active(method)`: "prox" for client="fedprox", then the names in
`Method.penalties` in order. Register a new term by adding a function to PENALTIES (and, if it has
a coefficient, a field to Method).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PenaltyState:
    """lead: 0 for one slot's parameters, 1 for stacked [G, ...] parameters. classifier: the names
    of the classifier weight and bias (the rows private label sets restrict)."""

    lead: int
    classifier: tuple


def sumsq(t, lead: int):
    """Sum of squares of t per slot: a scalar (lead=0) or one value per leading index (lead=1)."""
    sq = t ** 2
    return sq.sum() if lead == 0 else sq.flatten(1).sum(1)


def prox(params, anchor, method, state):
    """FedProx's proximal term mu/2 ||w - w_t||^2 (Li et al. 2020, eq. 2). With private label sets
    there is no term on the classifier (privlabels Sec 4.1)."""
    skip = set(state.classifier) if method.private else set()
    return 0.5 * method.mu * sum(sumsq(params[k] - anchor[k], state.lead) for k in params if k not in skip)


def l2(params, anchor, method, state):
    """L2 weight decay wd/2 ||w||^2 over all parameters, wd = Method.weight_decay (Krogh & Hertz
    1992, "A simple weight decay can improve generalization", eq. 1; the "weight decay 5e-4" of
    FedMT App C.1). Its gradient wd * w is what torch.optim.SGD/Adam(weight_decay=wd) add."""
    return 0.5 * method.weight_decay * sum(sumsq(p, state.lead) for p in params.values())


PENALTIES = {"prox": prox, "l2": l2}


def active(method) -> tuple:
    """Names of the penalties in `method`'s client loss, in the order they are added."""
    return (("prox",) if method.client == "fedprox" else ()) + tuple(method.penalties)


def total(params, anchor, method, state):
    """The sum of `method`'s penalties, or None when it has none."""
    terms = [PENALTIES[name](params, anchor, method, state) for name in active(method)]
    return sum(terms[1:], terms[0]) if terms else None
