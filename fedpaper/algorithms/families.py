"""Algorithms built as a whole from a name and options (Method.family / Method.options), for methods
whose parts do not reduce to Method's other fields: FedMT and its baselines (FedMT Sec. 4.1).

    Method("FedMT (E)", family="fedmt", options={"estimator": "estimate", "lambda2": 1 / 16})
"""
from __future__ import annotations

from ..errors import BadParameterError, UnknownNameError
from fedpaper.algorithms.base import Algorithm
from fedpaper.algorithms.fedmt import FixMixClient, LearnableCorrespondence
from fedpaper.algorithms.fedrep import fedrep_parts
from fedpaper.algorithms.fedtrans import fedtrans_parts
from fedpaper.algorithms.semifl import semifl_parts, StaticBatchNorm
from fedpaper.algorithms.server_training import ServerTraining


def _fedmt(name, o):
    est = o.pop("estimator", "estimate")
    parts = [FixMixClient(o.pop("threshold", 0.95), o.pop("lambda1", 1.0), o.pop("lambda2", 1 / 16),
                          o.pop("mix_alpha", 0.75), est, randaugment=tuple(o.pop("randaugment", (2, 10))))]
    if est.startswith("learnable"):
        parts.append(LearnableCorrespondence(average=est == "learnable_average"))
    parts.append(ServerTraining(o.pop("server_epochs", 5)))
    return parts + ([StaticBatchNorm()] if o.pop("static_bn", True) else [])


def _semifl(name, o):
    return semifl_parts(o.pop("threshold", 0.95), o.pop("mix_alpha", 0.75), o.pop("server_epochs", 5),
                        o.pop("static_bn", True), tuple(o.pop("randaugment", (2, 10))))


def _fedrep(name, o):
    return fedrep_parts(o.pop("server_epochs", 1))


def _fedtrans(name, o):
    return fedtrans_parts(o.pop("finetune_epochs", 100), o.pop("finetune_lr", 0.01), o.pop("finetune_batch", 250))


FAMILIES = {"fedmt": _fedmt, "semifl": _semifl, "fedrep": _fedrep, "fedtrans": _fedtrans}


def family_algorithm(name: str, family: str, options) -> "Algorithm":  # noqa: F821
    """The Algorithm of family `family` with `options` ((key, value) pairs or a dict)."""

    if family not in FAMILIES:
        raise UnknownNameError(f"unknown algorithm family {family!r}; known: {tuple(FAMILIES)}")
    o = dict(options)
    parts = FAMILIES[family](name, o)
    if o:
        raise BadParameterError(f"unknown option(s) {sorted(o)} for family {family!r}")
    return Algorithm(name, tuple(parts))


def as_options(options) -> tuple:
    """Options as a sorted tuple of (key, value) pairs (hashable; lists become tuples)."""
    items = options.items() if isinstance(options, dict) else options
    fix = lambda v: tuple(fix(x) for x in v) if isinstance(v, (list, tuple)) else v  # noqa: E731
    return tuple(sorted((str(k), fix(v)) for k, v in items))
