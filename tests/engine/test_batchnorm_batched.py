"""BatchNorm models in the vmap backend: each slot's running statistics are carried as state and
returned (never updated in place under torch.func.vmap), its batch statistics taken from its real
rows only, as the loop backend does (engine/batchnorm.py). The two compute the same function in
another summation order.

Stated tolerance (fp32, CPU): after several local steps, parameters within atol 1e-5 + rtol 1e-4 of
the loop backend's, per-slot loss sums within rtol 1e-5, running statistics within atol 1e-6 +
rtol 1e-5, num_batches_tracked equal; through the trainer, a run's history and final parameters
and buffers within the same tolerances."""
import numpy as np
import pytest
import torch
from engine_harness import two_runs
from torch import nn

from fedpaper.algorithms import get_method
from fedpaper.algorithms.base import Objective
from fedpaper.driver import FederatedTrainer
from fedpaper.engine import TrainConfig, choose_backend, epoch_batches
from fedpaper.engine.backends import SlotGradients
from fedpaper.engine.batchnorm import input_keep, slots_keep

torch.set_num_threads(1)

PARAMS = dict(atol=1e-5, rtol=1e-4)
STATS = dict(atol=1e-6, rtol=1e-5)
LOSS = dict(atol=0, rtol=1e-5)


class BNNet(nn.Module):
    """Conv-BN2d-ReLU, conv-BN2d (momentum None: the cumulative average)-ReLU, pooled, a linear
    layer and a BatchNorm1d (one value per channel and row: a slot with one real row falls back to
    its padded batch), then the classifier."""

    def __init__(self, classes=3):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.Conv2d(4, 6, 3, padding=1), nn.BatchNorm2d(6, momentum=None), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU())
        self.classifier = nn.Linear(8, classes)

    def forward(self, x):
        return self.classifier(self.body(x))


def _stacked(net, G, seed=0):
    """Params [G, ...] (each slot its own perturbed copy) and buffers [G, ...] of `net`."""
    g = torch.Generator().manual_seed(seed)
    params = {k: torch.stack([v.detach() + 0.05 * torch.randn(v.shape, generator=g) for _ in range(G)])
              for k, v in net.named_parameters()}
    buffers = {k: torch.stack([v.detach().clone() for _ in range(G)]) for k, v in net.named_buffers()}
    return params, buffers


def _train(backend, sizes=(7, 5, 3), batch_size=4, epochs=2, lr=0.1):
    """Local SGD of len(sizes) slots of unequal size (padded batches; a slot whose rows are used up
    is inactive) with the given backend; returns params, buffers, per-step loss sums and the
    buffers as the caller passed them before each vmap step was stored."""
    torch.manual_seed(0)
    net = BNNet()
    G = len(sizes)
    params, buffers = _stacked(net, G)
    g = torch.Generator().manual_seed(1)
    x_pool, y_pool = torch.randn(sum(sizes), 3, 6, 6, generator=g), torch.randint(0, 3, (sum(sizes),), generator=g)
    x_pool[:sizes[0]] += 1.0  # slots with other moments
    starts = np.cumsum((0,) + sizes[:-1])
    rows = [np.arange(s, s + n) for s, n in zip(starts, sizes)]
    rngs = [np.random.default_rng(s) for s in range(G)]
    sg = SlotGradients(net, None, backend)
    present = torch.ones(G, 3, dtype=torch.bool)
    losses, inactive_seen = [], 0
    for _ in range(epochs):
        idx, mask = epoch_batches(rows, batch_size, rngs)
        for s in range(idx.shape[1]):
            i, m = torch.as_tensor(idx[:, s]), torch.as_tensor(mask[:, s])
            batch = {"x": x_pool[i], "y": y_pool[i], "mask": m.float()}
            active = m.any(1)
            inactive_seen += int((~active).sum())
            given = {k: v.clone() for k, v in buffers.items()}
            step = sg(params, batch, present, params, Objective(), buffers, active=active)
            grads, lsum = step
            if backend == "vmap":  # returned, never written into the buffers passed in
                assert all(torch.equal(buffers[k], given[k]) for k in buffers)
                assert set(step.buffers) == set(buffers)
                for k, v in step.buffers.items():
                    buffers[k].copy_(v)
            else:
                assert step.buffers is None
            a = active.float()
            params = {k: v - lr * a.view(-1, *[1] * (v.dim() - 1)) * grads[k] for k, v in params.items()}
            losses.append(lsum)
    assert inactive_seen > 0  # the set-up has inactive slots
    return params, buffers, torch.stack(losses)


@pytest.fixture(scope="module")
def both():
    return _train("loop"), _train("vmap")


def test_vmap_equals_loop_for_a_batchnorm_cnn_with_padded_batches(both):
    (p_loop, b_loop, l_loop), (p_vmap, b_vmap, l_vmap) = both
    for k in p_loop:
        torch.testing.assert_close(p_vmap[k], p_loop[k], **PARAMS, msg=lambda m: f"{k}: {m}")
    torch.testing.assert_close(l_vmap, l_loop, **LOSS)
    for k in b_loop:
        if k.endswith("num_batches_tracked"):
            assert torch.equal(b_vmap[k], b_loop[k]), k
        else:
            torch.testing.assert_close(b_vmap[k], b_loop[k], **STATS, msg=lambda m: f"{k}: {m}")


def test_statistics_change_per_slot_and_an_inactive_slot_keeps_its_own(both):
    """Slots of 7, 5 and 3 rows at batch 4: two steps per epoch for the first two slots, one for
    the third (inactive in each epoch's second step: its statistics are not counted)."""
    _, (_, b_vmap, _) = both
    assert b_vmap["body.1.num_batches_tracked"].tolist() == [4, 4, 2]
    assert b_vmap["body.9.num_batches_tracked"].tolist() == [4, 4, 2]
    mean = b_vmap["body.1.running_mean"]
    assert float((mean[0] - mean[1]).abs().max()) > 1e-2 and float(mean.abs().min()) > 0


def test_the_padding_rows_change_nothing_in_vmap():
    """A slot's step with padding rows equals the step on its real rows alone (batch of its own),
    gradients and new statistics alike; the padding rows hold other data."""
    torch.manual_seed(0)
    net = BNNet()
    params, buffers = _stacked(net, 2)
    x = torch.randn(2, 5, 3, 6, 6)
    y = torch.randint(0, 3, (2, 5))
    mask = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    sg = SlotGradients(net, None, "vmap")
    present = torch.ones(2, 3, dtype=torch.bool)
    step = sg(params, {"x": x, "y": y, "mask": mask}, present, params, Objective(), buffers)
    one = {k: v[:1] for k, v in params.items()}
    alone = sg(one, {"x": x[:1, :3], "y": y[:1, :3], "mask": mask[:1, :3]}, present[:1], one, Objective(),
               {k: v[:1] for k, v in buffers.items()})
    for k in step[0]:
        torch.testing.assert_close(step[0][k][:1], alone[0][k], **PARAMS, msg=lambda m: f"{k}: {m}")
    for k in step.buffers:
        torch.testing.assert_close(step.buffers[k][:1], alone.buffers[k], **STATS, msg=lambda m: f"{k}: {m}")


def test_slots_keep_matches_input_keep_for_stacked_views_and_unlabeled_rows():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    umask = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    for x_rows, extra in ((3, {}), (9, {}), (5, {"umask": umask})):
        batch = {"x": torch.zeros(2, x_rows, 2), "mask": mask, **extra}
        keep = slots_keep(batch)
        for g in range(2):
            want = input_keep(batch, g)
            assert keep[g].tolist() == (want.tolist() if want is not None else [True] * x_rows)


def test_backend_rule_for_batchnorm_models():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert choose_backend("vmap", cpu, True, False, "m") == ("vmap", "requested")
    assert choose_backend("loop", cuda, True, False, "m") == ("loop", "requested")
    assert choose_backend("auto", cuda, True, False, "m")[0] == "vmap"
    assert choose_backend("auto", cpu, True, False, "m")[0] == "loop"
    assert choose_backend("grouped", cpu, True, False, "m")[0] == "loop"  # no grouped forward for BatchNorm


def _trainer(backend, monkeypatch=None, chunk=None):
    """A FederatedTrainer of two runs of FedAvg on the tiny BatchNorm convnet, run; chunk: the slots
    per part of a round (memory.slots_that_fit's answer, forced)."""
    if chunk is not None:
        monkeypatch.setattr(FederatedTrainer, "slot_chunk", lambda self, slots: chunk)
    pools, feds = two_runs()  # clients of 30 and 20 rows at batch 8: padded last batches, inactive slots
    cfg = TrainConfig(model="bn_convnet", model_kwargs=dict(num_classes=4, in_channels=1, width=4, dim=8),
                      optimizer="sgd", lr=0.05, momentum=0.9, batch_size=8, rounds=2, local_epochs=2,
                      backend=backend)
    torch.manual_seed(0)
    tr = FederatedTrainer(get_method("FedAvg"), cfg, pools, feds, progress=False)
    return tr, tr.run()


def test_trainer_with_vmap_equals_loop_for_a_batchnorm_model():
    (t_loop, loop), (t_vmap, vmap) = _trainer("loop"), _trainer("vmap")
    assert (loop.log["backend"], vmap.log["backend"]) == ("loop", "vmap")
    for k in loop.final_params:
        torch.testing.assert_close(vmap.final_params[k], loop.final_params[k], **PARAMS, msg=lambda m: f"{k}: {m}")
    for k, v in t_loop.global_buffers.items():
        got = t_vmap.global_buffers[k]
        if v.is_floating_point():
            torch.testing.assert_close(got, v, **STATS, msg=lambda m: f"{k}: {m}")
        else:
            assert torch.equal(got, v), k
    means = [v for k, v in t_vmap.global_buffers.items() if k.endswith("running_mean")]
    assert means and all(float(v.abs().max()) > 1e-3 for v in means)  # the statistics were trained
    np.testing.assert_allclose(vmap.history["train_loss"], loop.history["train_loss"], rtol=1e-5)
    # test accuracy reads the averaged running statistics: one of the 40 rows may fall the other way at most
    np.testing.assert_allclose(vmap.history["test_acc"], loop.history["test_acc"], atol=1 / 40 + 1e-9)


def test_vmap_in_parts_of_a_round_stores_each_parts_statistics(monkeypatch):
    """A round trained in parts (slot_chunk: one slot at a time, then three of four slots): each
    part's returned statistics reach the round's buffers, as the loop backend's in-place ones do."""
    t_loop, loop = _trainer("loop")
    for chunk in (1, 3):
        t_vmap, vmap = _trainer("vmap", monkeypatch, chunk)
        assert vmap.log.get("slot_chunk") == chunk
        for k in loop.final_params:
            torch.testing.assert_close(vmap.final_params[k], loop.final_params[k], **PARAMS)
        for k, v in t_loop.global_buffers.items():
            torch.testing.assert_close(t_vmap.global_buffers[k], v, **STATS, msg=lambda m: f"{chunk} {k}: {m}")


def test_fedmt_on_a_small_resnet_with_vmap_equals_loop():
    """FedMT (E) on the CPU profiles' small ResNet: stacked weak/strong/mixed views of each batch
    (keep masks tiled over the views) and the server's own training steps, whose BatchNorm
    statistics the trainer stores from the vmap backend too."""
    from fedpaper.algorithms.families import family_algorithm
    from fedpaper.engine import Federation
    from fedpaper.papers.fedmt.data import build_pools, split

    pools = build_pools({"stand_in": {"num_classes": 8, "coarse_classes": 4, "n_train": 320, "n_test": 40,
                                      "shape": [3, 8, 8], "seed": 3}}, None, "cpu")
    server, part = split(pools, {"n": 4, "num_clients": 2, "samples_per_client": 37, "seed": 0})
    fed = Federation([np.asarray(c) for c in part.client_indices], np.arange(len(pools.y_test)),
                     server_indices=server, seed=0)
    method = family_algorithm("FedMT (E)", "fedmt", {"estimator": "estimate", "threshold": 0.13, "server_epochs": 1})
    out = {}
    for backend in ("loop", "vmap"):
        cfg = TrainConfig(model="small_resnet", model_kwargs={"num_classes": 8, "widths": (4, 8)}, lr=0.1,
                          momentum=0.9, batch_size=8, local_epochs=2, rounds=2, backend=backend)
        torch.manual_seed(0)
        tr = FederatedTrainer(method, cfg, pools, [fed], progress=False)
        out[backend] = tr, tr.run()
    (t_loop, loop), (t_vmap, vmap) = out["loop"], out["vmap"]
    assert vmap.log["backend"] == "vmap"
    for k in loop.final_params:
        torch.testing.assert_close(vmap.final_params[k], loop.final_params[k], **PARAMS, msg=lambda m: f"{k}: {m}")
    for k, v in t_loop.global_buffers.items():
        torch.testing.assert_close(t_vmap.global_buffers[k], v, **STATS, msg=lambda m: f"{k}: {m}")
    np.testing.assert_allclose(vmap.history["train_loss"], loop.history["train_loss"], rtol=1e-5)
