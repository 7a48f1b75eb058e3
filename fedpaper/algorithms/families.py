"""Algorithms written as a family name and options, for methods whose parts Method's fields do not
name: FedMT and its baselines (FedMT Sec. 4.1) and FedNCA-ML's methods (FedNCA-ML Sec. 4, Tables 1-8).
A family is a way of writing an Algorithm, like Method: a run stores the algorithm's spec (its parts).

    family_algorithm("FedMT (E)", "fedmt", {"estimator": "estimate", "lambda2": 1 / 16})
"""
from __future__ import annotations

from fedpaper.ground.errors import BadParameterError, UnknownNameError
from fedpaper.algorithms.base import Algorithm
from fedpaper.algorithms.fedcurv import FedCurvPenalty
from fedpaper.algorithms.fednca_loss import FedNCALoss
from fedpaper.algorithms.frozen import FrozenParameters
from fedpaper.algorithms.methods import Method, method_parts
from fedpaper.algorithms.spherefed import SphereFedClassifier
from fedpaper.engine.optim import OptimSpec
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
    return parts + ([StaticBatchNorm()] if o.pop("static_bn", True) else []), None


def _semifl(name, o):
    return semifl_parts(o.pop("threshold", 0.95), o.pop("mix_alpha", 0.75), o.pop("server_epochs", 5),
                        o.pop("static_bn", True), tuple(o.pop("randaugment", (2, 10)))), None


def _fedrep(name, o):
    return fedrep_parts(o.pop("server_epochs", 1)), None


def _fedtrans(name, o):
    return fedtrans_parts(o.pop("finetune_epochs", 100), o.pop("finetune_lr", 0.01), o.pop("finetune_batch", 250)), None


def _fednca(name, o):
    """FedNCA-ML's methods (papers/fednca/methods.py): every one ends with its loss (eq. 10, 14) and
    trains with AdamW (`optim`: lr, weight_decay, betas, schedule); kind picks the baseline's parts:
    FedAvg, FedProx (mu), SCAFFOLD, FedCurv (Shoham et al. 2019), SphereFed, or FedNCA-ML (`frozen`:
    the fixed ETF parameters)."""
    kind, optim = o.pop("kind"), o.pop("optim")
    loss = FedNCALoss(o.pop("lam_neg", 0.0), o.pop("lam_pos", 0.0), o.pop("tau", 0.3), o.pop("bce", "mean"))
    mu, fedcurv_lam, frozen = o.pop("mu", 0.01), o.pop("fedcurv_lam", 0.01), o.pop("frozen", ())
    fisher_batches = o.pop("fisher_batches", None)
    if kind in ("fedavg", "fedprox", "scaffold"):
        parts = list(method_parts(Method(name, client={"fedavg": "local"}.get(kind, kind), mu=mu)))
    elif kind == "fedcurv":
        parts = [FedCurvPenalty(fedcurv_lam, fisher_batches)]
    elif kind == "spherefed":
        parts = [SphereFedClassifier()]
    elif kind == "fednca":
        parts = [FrozenParameters(tuple(frozen))] if frozen else []
    else:
        raise UnknownNameError(f"unknown FedNCA-ML method kind {kind!r}")
    return parts + [loss], OptimSpec("adamw", optim["lr"], weight_decay=optim["weight_decay"],
                                     schedule=optim["schedule"], betas=tuple(optim["betas"]))


# family name -> fn(name, options) -> (parts, the clients' OptimSpec or None); fn pops the options it reads
FAMILIES = {"fedmt": _fedmt, "semifl": _semifl, "fedrep": _fedrep, "fedtrans": _fedtrans, "fednca": _fednca}


def family_algorithm(name: str, family: str, options) -> Algorithm:
    """The Algorithm of family `family` with `options` (a dict, or (key, value) pairs)."""

    if family not in FAMILIES:
        raise UnknownNameError(f"unknown algorithm family {family!r}; known: {tuple(FAMILIES)}")
    o = dict(options)
    parts, optimizer = FAMILIES[family](name, o)
    if o:
        raise BadParameterError(f"unknown option(s) {sorted(o)} for family {family!r}")
    return Algorithm(name, tuple(parts), optimizer)

