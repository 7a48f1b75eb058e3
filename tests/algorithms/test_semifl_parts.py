"""SemiFL (Diao et al. 2022), the FedMT paper's baseline, as parts (algorithms.semifl.semifl_parts,
families._semifl): FedMT's fix/mix client without R_p (projected weight 0, the true correspondence
never used), lambda1 = lambda2 = 1, then server training and static BatchNorm; each option reaches
its own part. Fast (no training): the selection of `make mutation` runs it."""
import pytest

from fedpaper.algorithms.families import family_algorithm
from fedpaper.algorithms.fedmt import FixMixClient
from fedpaper.algorithms.semifl import StaticBatchNorm
from fedpaper.algorithms.server_training import ServerTraining
from fedpaper.ground.errors import BadParameterError


def _parts(options):
    parts = family_algorithm("SemiFL", "semifl", options).parts
    kinds = [type(p) for p in parts if isinstance(p, (FixMixClient, ServerTraining, StaticBatchNorm))]
    return parts, kinds


def _one(parts, cls):
    (p,) = [p for p in parts if isinstance(p, cls)]
    return p


def test_semifl_defaults():
    parts, kinds = _parts({})
    assert kinds == [FixMixClient, ServerTraining, StaticBatchNorm]
    c = _one(parts, FixMixClient)
    assert (c.threshold, c.lambda1, c.lambda2, c.mix_alpha) == (0.95, 1.0, 1.0, 0.75)
    assert (c.estimator, c.projected_weight, c.randaugment) == ("true", 0.0, (2, 10))
    assert _one(parts, ServerTraining).epochs == 5


def test_semifl_options_reach_their_parts():
    parts, kinds = _parts({"threshold": 0.5, "mix_alpha": 0.3, "server_epochs": 2, "static_bn": False,
                           "randaugment": [1, 5]})
    assert kinds == [FixMixClient, ServerTraining]  # no static BatchNorm
    c = _one(parts, FixMixClient)
    assert (c.threshold, c.mix_alpha, c.randaugment, c.projected_weight) == (0.5, 0.3, (1, 5), 0.0)
    assert _one(parts, ServerTraining).epochs == 2
    with pytest.raises(BadParameterError, match="lambda1"):
        _parts({"lambda1": 0.5})  # SemiFL has no R_p weights to set


def test_semifl_parts_called_alone_has_the_same_defaults():
    from fedpaper.algorithms.semifl import semifl_parts

    def describe(parts):
        return [(type(p).__name__, sorted((k, v) for k, v in vars(p).items() if not k.startswith("_")))
                for p in parts if isinstance(p, (FixMixClient, ServerTraining, StaticBatchNorm))]

    assert describe(semifl_parts()) == describe(_parts({})[0])
