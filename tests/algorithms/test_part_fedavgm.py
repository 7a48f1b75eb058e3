"""The seam carries a new method: FedAvgM (server momentum, Hsu et al. 2019) is one module,
fedpaper/algorithms/fedavgm.py, composed onto FedAvg with no edit to the trainer."""
import numpy as np
import torch
from part_harness import aggregation, full_slots, make_ctx

from fedpaper.algorithms import get_method
from fedpaper.algorithms.fedavgm import ServerMomentum
from fedpaper.blocks.data import synthetic_images
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig


def test_momentum_update_rule():
    prev = {"w": torch.tensor([[1.0]])}
    ctx = make_ctx([[[1, 0], [0, 1]]], params=prev)
    p = ServerMomentum(beta=0.5, server_lr=1.0)
    state = {p.key: p.init_state(ctx)}
    slots, part = full_slots(1, 2)
    agg = aggregation({"w": torch.zeros(2, 1)}, slots, part, prev)
    g1 = p.aggregate(ctx, state, agg, {"w": torch.tensor([[0.0]])})  # v = 1, theta = 0
    agg2 = aggregation({"w": torch.zeros(2, 1)}, slots, part, g1)
    g2 = p.aggregate(ctx, state, agg2, {"w": torch.tensor([[0.0]])})  # v = 0.5 + 0, theta = -0.5
    assert g1["w"].item() == 0.0 and g2["w"].item() == -0.5


def _setup():
    ds = synthetic_images(num_classes=4, n_train=120, n_test=40, shape=(1, 16, 16), seed=0)
    pools = Pools.from_dataset(ds)
    y = pools.y_train.numpy()
    feds = [Federation([np.flatnonzero(y < 2)[:30], np.flatnonzero(y >= 2)[:20]], np.arange(40), seed=0)]
    cfg = TrainConfig("lenet", dict(in_channels=1, image_size=16, num_classes=4, c1=4, c2=6), lr=0.05,
                      batch_size=8, rounds=3, backend="vmap")
    return pools, feds, cfg


def test_fedavgm_trains_through_the_unchanged_trainer():
    pools, feds, cfg = _setup()
    fedavg = get_method("FedAvg")
    plain = train(fedavg, cfg, pools, feds, progress=False)
    as_fedavg = train(fedavg.algorithm().with_parts(ServerMomentum(0.0, 1.0), name="FedAvgM0"), cfg, pools, feds,
                      progress=False)
    fedavgm = train(fedavg.algorithm().with_parts(ServerMomentum(0.9), name="FedAvgM"), cfg, pools, feds,
                    progress=False)
    for k in plain.final_params:  # beta = 0, server_lr = 1: FedAvg up to float rounding
        torch.testing.assert_close(as_fedavg.final_params[k], plain.final_params[k], rtol=1e-5, atol=1e-6)
    assert max((fedavgm.final_params[k] - plain.final_params[k]).abs().max() for k in plain.final_params) > 1e-3
