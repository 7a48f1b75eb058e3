"""FedCurv (Shoham et al. 2019, eq. 7): client i's penalty is lam sum_{j != i} F_j (theta - theta_j)^2
over what the other clients last sent; F_j the diagonal empirical Fisher at theta_j. SphereFed's
fixed classifier stays fixed."""
import functools
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from fedpaper.algorithms.base import Aggregation, Algorithm, Context
from fedpaper.algorithms.fedcurv import FedCurvPenalty
from fedpaper.algorithms.spherefed import SphereFedClassifier
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig
from fedpaper.engine.gradients import per_run_grads
from fedpaper.ground.errors import BadParameterError


def make_ctx(counts, params, **kw):
    """A small Context without a trainer (self-contained: no shared harness import)."""
    counts = np.asarray(counts, dtype=float)
    R, M, K = counts.shape
    base = dict(cfg=None, pools=None, feds=[None] * R, R=R, M=M, K=K, device=torch.device("cpu"), counts=counts,
                sizes=counts.sum(-1), present=torch.as_tensor(counts > 0),
                classifier=("classifier.weight", "classifier.bias"), template=None, buffers={},
                has_batchnorm=False, init_params=params, predict=None, train_slots=None, run_grads=functools.partial(per_run_grads, "loop"),
                grouped_forward=lambda: None)
    base.update(kw)
    return Context(**base)


def full_slots(R, M):
    part = np.tile(np.arange(M), (R, 1))
    return np.array([(r, c) for r in range(R) for c in part[r]]), part


def aggregation(new, slots, part, prev):
    G = len(slots)
    return Aggregation(new, prev, torch.ones(G), torch.zeros(G), slots, part, prev)


class Lin(nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = nn.Linear(2, 2)

    def forward(self, x):
        return self.classifier(x)


def _setup():
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]])
    y = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    pools = SimpleNamespace(x_train=x, y_train=y)
    feds = [SimpleNamespace(client_indices=[np.array([0, 1]), np.array([2, 3]), np.array([0, 3])])]
    tmpl = Lin()
    params = {k: v.detach().unsqueeze(0).clone() for k, v in tmpl.named_parameters()}
    ctx = make_ctx(np.ones((1, 3, 2)), params=params, pools=pools, feds=feds, template=tmpl, buffers={},
                   cfg=SimpleNamespace(batch_size=1))
    return ctx, tmpl, params, x, y


def test_fisher_is_mean_squared_minibatch_gradient():
    ctx, tmpl, params, x, y = _setup()
    part = FedCurvPenalty(lam=0.5)
    theta = {k: v[0] for k, v in params.items()}
    F = part.fisher(ctx, theta, np.array([0, 1]))
    expect = {k: torch.zeros_like(v) for k, v in theta.items()}
    for i in (0, 1):  # batch size 1: one row per minibatch; loss = BCE summed over classes
        tmpl.zero_grad()
        nn.functional.binary_cross_entropy_with_logits(tmpl(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        for k, p in tmpl.named_parameters():
            expect[k] += p.grad ** 2 / 2
    for k in F:
        torch.testing.assert_close(F[k], expect[k])


def test_penalty_is_fisher_weighted_drift_from_the_other_clients():
    ctx, tmpl, params, x, y = _setup()
    part = FedCurvPenalty(lam=0.5)
    state = {part.key: part.init_state(ctx)}
    slots, prt = full_slots(1, 3)
    g = torch.Generator().manual_seed(0)
    new = {k: torch.randn(3, *v.shape[1:], generator=g) for k, v in params.items()}
    part.aggregate(ctx, state, aggregation(new, slots, prt, params), params)
    Fs = [part.fisher(ctx, {k: v[i] for k, v in new.items()}, ctx.feds[0].client_indices[i]) for i in range(3)]
    data = part.prepare_round(ctx, state, params, slots, {})
    theta = {k: torch.randn(*v.shape[1:], generator=g) for k, v in params.items()}
    for i in range(3):
        batch = {}
        part.augment(ctx, batch, None, None, {"A": {k: v[i] for k, v in data["A"].items()},
                                               "B": {k: v[i] for k, v in data["B"].items()}, "Q": data["Q"][i]},
                     None, 0)
        got = part.batch_loss(None, batch, theta, theta, 0)
        direct = 0.5 * sum((Fs[j][k] * (theta[k] - new[k][j]) ** 2).sum() for j in range(3) if j != i for k in theta)
        torch.testing.assert_close(got, direct)
    assert float(direct) > 0


def _pools(seed=0):
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(40, 3, generator=g) < 0.5).float()
    x = torch.randn(40, 3, 16, 16, generator=g) + y[:, :3, None, None]
    return Pools(x[:32], y[:32], x[32:], y[32:], 3)


def test_fedcurv_and_spherefed_train_end_to_end():
    pools = _pools()
    feds = [Federation([np.arange(0, 16), np.arange(16, 32)], np.arange(8), seed=0)]
    kw = dict(num_classes=3, backbone="convnet", width=4, dim=16)
    cfg = TrainConfig("fednca_net", dict(kw, head="fc"), optimizer="adamw", lr=1e-2, batch_size=8, rounds=2,
                      backend="loop")
    res = train(Algorithm("FedCurv", (FedCurvPenalty(0.01),)), cfg, pools, feds, progress=False)
    assert np.isfinite(res.history["train_loss"]).all()
    scfg = TrainConfig("fednca_net", dict(kw, head="sphere"), optimizer="adamw", lr=1e-2, batch_size=8, rounds=2,
                       backend="loop")
    torch.manual_seed(0)
    from fedpaper.blocks.nets.ladm import FedNCANet
    w0 = FedNCANet(**dict(kw, head="sphere")).classifier.weight.detach()
    res = train(Algorithm("SphereFed", (SphereFedClassifier(),)), scfg, pools, feds, progress=False)
    assert torch.equal(res.final_params["classifier.weight"][0], w0)
    with pytest.raises(BadParameterError, match="head='sphere'"):
        train(Algorithm("SphereFed", (SphereFedClassifier(),)), cfg, pools, feds, progress=False)
