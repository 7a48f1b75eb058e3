"""Every part type by name, and the algorithm of a method spec: the one way a run's method is
built from its results-cache key (RunSpec.method = Algorithm.spec()).

    spec = Method("FedProx+FedPALS", client="fedprox", server="fedpals").algorithm().spec()
    algorithm_of(spec) == Method(...).algorithm()            # the same parts, arguments, order

A new part type joins PARTS (the explicit table; a test checks every Part subclass of
fedpaper.algorithms is in it). Its constructor's named arguments are its spec (base.Part records
them), so they must be JSON values.
"""
from __future__ import annotations

from fedpaper.algorithms.afl import AFLMixture
from fedpaper.algorithms.base import Algorithm, FedAvgWeights, Part
from fedpaper.algorithms.fedavgm import ServerMomentum
from fedpaper.algorithms.fedcurv import FedCurvPenalty
from fedpaper.algorithms.fedmt import FixMixClient, LearnableCorrespondence
from fedpaper.algorithms.fednca_loss import FedNCALoss
from fedpaper.algorithms.fedpals import FedPALSWeights
from fedpaper.algorithms.fedprox import Penalty
from fedpaper.algorithms.fedrep import PersonalHeads
from fedpaper.algorithms.fedrs import RestrictedSoftmax
from fedpaper.algorithms.fedtrans import CoarsePretrainThenFinetune
from fedpaper.algorithms.frozen import FrozenParameters
from fedpaper.algorithms.privlabels import PrivateLabels
from fedpaper.algorithms.scaffold import ControlVariates
from fedpaper.algorithms.semifl import StaticBatchNorm
from fedpaper.algorithms.semisup import Mixup, PseudoLabels
from fedpaper.algorithms.server_training import ServerTraining
from fedpaper.algorithms.spherefed import SphereFedClassifier
from fedpaper.algorithms.tuning import CentralTuning
from fedpaper.engine.optim import OptimSpec
from fedpaper.ground.errors import BadParameterError, UnknownNameError

PARTS: dict[str, type] = {cls.__name__: cls for cls in (
    FedAvgWeights, FedPALSWeights, AFLMixture, ServerMomentum,              # aggregation
    Penalty, FedCurvPenalty, ControlVariates, RestrictedSoftmax, PrivateLabels, FrozenParameters,
    SphereFedClassifier, FedNCALoss,                                        # client objective
    Mixup, PseudoLabels, FixMixClient, LearnableCorrespondence, PersonalHeads, CoarsePretrainThenFinetune,
    ServerTraining, StaticBatchNorm, CentralTuning,                         # data and server steps
)}


def part_of(kind: str, args: dict) -> Part:
    """The part `kind` (a PARTS name) made with constructor arguments `args`."""
    if kind not in PARTS:
        raise UnknownNameError(f"unknown algorithm part {kind!r}; known: {', '.join(sorted(PARTS))}")
    try:
        return PARTS[kind](**args)
    except TypeError as e:
        raise BadParameterError(f"part {kind}: {e}") from None


def algorithm_of(spec: dict) -> Algorithm:
    """The Algorithm of a method spec ({"name", "parts": [[kind, args], ...], "optimizer"}: see
    Algorithm.spec)."""
    if not isinstance(spec, dict) or "parts" not in spec or "name" not in spec:
        raise BadParameterError(f"a method spec needs 'name' and 'parts' (Algorithm.spec()); got {sorted(spec)}"
                                if isinstance(spec, dict) else f"a method spec is a dict, not {type(spec).__name__}")
    o = spec.get("optimizer")
    optimizer = None if o is None else OptimSpec(**{**o, "betas": tuple(o.get("betas", (0.9, 0.999)))})
    return Algorithm(spec["name"], tuple(part_of(k, a) for k, a in spec["parts"]), optimizer)


def argument(spec: dict, name: str, default=None):
    """The first part's constructor argument `name` in a method spec (e.g. FedMT's threshold), else default."""
    return next((a[name] for _, a in spec["parts"] if name in a), default)
