"""The loop backend skips the gradient passes of slots that will not step (clients whose epoch
ended) for models that opt in (skip_inactive_slots, FedNCANet): the trained parameters are bitwise
the same as with every slot computed; other models compute every slot (tests/engine/test_fixture.py)."""
import numpy as np
import torch

from fedpaper.algorithms.base import Algorithm
from fedpaper.algorithms.methods import Method, method_parts
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig
from fedpaper.engine import backends


def _pools(n=60, C=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, C, (n,), generator=g)
    x = torch.randn(n, 3, 8, 8, generator=g) + y[:, None, None, None].float()
    return Pools(x[:50], y[:50], x[50:], y[50:], C)


def _run(monkeypatch, skip: bool, algo):
    calls = []
    real = backends.LoopBackend.__call__

    def spy(self, params, batch, present, anchor, objective, buffers=None, active=None, gens=None):
        calls.append(batch["x"].shape[0] if active is None or not skip else int(active.sum()))
        return real(self, params, batch, present, anchor, objective, buffers, active if skip else None, gens=gens)

    monkeypatch.setattr(backends.LoopBackend, "__call__", spy)
    # unequal clients (5, 10 and 35 rows): the small ones finish their epoch early
    feds = [Federation([np.arange(0, 5), np.arange(5, 15), np.arange(15, 50)], np.arange(10), seed=0)]
    cfg = TrainConfig("fednca_net", dict(num_classes=3, head="fc", backbone="convnet", width=4, dim=8),
                      optimizer="adamw", lr=1e-2, weight_decay=0.01, batch_size=5, rounds=2, backend="loop")
    torch.manual_seed(0)
    res = train(algo, cfg, _pools(), feds, progress=False)
    return res.final_params, sum(calls)


def test_loop_backend_skipping_inactive_slots_changes_nothing(monkeypatch):
    for algo in (Algorithm("FedAvg"), Algorithm("FedProx", tuple(method_parts(Method("FedProx", client="fedprox", mu=0.1))))):
        full, n_full = _run(monkeypatch, False, algo)
        skipped, n_skip = _run(monkeypatch, True, algo)
        assert n_skip < n_full  # fewer slot passes ...
        for k in full:  # ... and the same trained parameters, bit for bit
            assert torch.equal(full[k], skipped[k]), k


def test_batchnorm_fednca_net_keeps_an_inactive_clients_statistics():
    """FedNCANet (skip_inactive_slots): a slot that does not step leaves its BatchNorm
    running statistics as they were; an active slot updates its own."""
    from fedpaper.algorithms.base import Objective
    from fedpaper.blocks.nets.ladm import FedNCANet

    torch.manual_seed(0)
    net = FedNCANet(3, head="fc", width=4, dim=8, norm="batch")
    sg = backends.SlotGradients(net, None, "loop")
    params = {k: v.detach().unsqueeze(0).repeat(2, *[1] * v.dim()) for k, v in net.named_parameters()}
    buffers = {k: v.detach().unsqueeze(0).repeat(2, *[1] * v.dim()).clone() for k, v in net.named_buffers()}
    before = {k: v.clone() for k, v in buffers.items()}
    batch = {"x": torch.randn(2, 4, 3, 8, 8), "y": torch.randint(0, 3, (2, 4)),
             "mask": torch.tensor([[1.0] * 4, [0.0] * 4])}
    present = torch.ones(2, 3, dtype=torch.bool)
    grads, lsum = sg(params, batch, present, params, Objective(), buffers, active=torch.tensor([True, False]))
    mean = "backbone.body.1.running_mean"
    assert not torch.equal(buffers[mean][0], before[mean][0])
    assert torch.equal(buffers[mean][1], before[mean][1])
    assert float(lsum[1]) == 0 and all(float(g[1].abs().sum()) == 0 for g in grads.values())
    # without `active`, every slot is computed and updates its statistics, as before
    sg(params, batch, present, params, Objective(), buffers)
    assert not torch.equal(buffers[mean][1], before[mean][1])
    # a model that does not opt in computes every slot, but an inactive slot's statistics are
    # restored after its pass (issue 31: a finished client's BatchNorm statistics stay)
    buffers = {k: v.clone() for k, v in before.items()}
    net.skip_inactive_slots = False
    backends.SlotGradients(net, None, "loop")(params, batch, present, params, Objective(), buffers,
                                               active=torch.tensor([True, False]))
    assert not torch.equal(buffers[mean][0], before[mean][0])
    assert torch.equal(buffers[mean][1], before[mean][1])


def test_loop_backend_with_every_slot_inactive_returns_zeros():
    """A model that opts in (FedNCANet) and no slot that steps: no pass at all, zero gradients
    and zero per-slot losses of the right shapes."""
    from fedpaper.algorithms.base import Objective
    from fedpaper.blocks.nets.ladm import FedNCANet

    torch.manual_seed(0)
    net = FedNCANet(3, head="fc", width=4, dim=8)
    assert net.skip_inactive_slots
    sg = backends.SlotGradients(net, None, "loop")
    params = {k: v.detach().unsqueeze(0).repeat(2, *[1] * v.dim()) for k, v in net.named_parameters()}
    batch = {"x": torch.randn(2, 4, 3, 8, 8), "y": torch.randint(0, 3, (2, 4)), "mask": torch.ones(2, 4)}
    grads, lsum = sg(params, batch, torch.ones(2, 3, dtype=torch.bool), params, Objective(),
                     active=torch.tensor([False, False]))
    assert lsum.shape == (2,) and float(lsum.abs().sum()) == 0
    for k, v in params.items():
        assert grads[k].shape == v.shape and float(grads[k].abs().sum()) == 0, k
