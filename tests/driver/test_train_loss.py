"""The history's train_loss: each run's mean over the clients that trained in the round."""
import numpy as np
import torch

from engine_harness import lenet_config
from fedpaper.algorithms import get_method
from fedpaper.blocks.data import synthetic_images
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools

torch.set_num_threads(1)


def _pools():
    return Pools.from_dataset(synthetic_images(num_classes=4, n_train=200, n_test=40, shape=(1, 16, 16), seed=0))


def test_train_loss_is_the_mean_over_the_clients_that_trained():
    """FedPALS at lambda = 0 with a target on labels {0, 1}: client 1 holds only labels 2-3, so its
    weight is 0 and it is not trained. The run's train_loss each round equals that of FedAvg over
    client 0 alone (the same global model), not half of it (a 0 averaged in for client 1)."""
    pools = _pools()
    y = pools.y_train.numpy()
    a = np.concatenate([np.flatnonzero(y == 0)[:15], np.flatnonzero(y == 1)[:15]])
    b = np.flatnonzero(y >= 2)[:20]
    T = np.array([0.5, 0.5, 0.0, 0.0])
    test = np.flatnonzero(pools.y_test.numpy() < 2)
    cfg = lenet_config(backend="loop")
    pals = train(get_method("FedPALS", lam=0.0), cfg, pools, [Federation([a, b], test, target_marginal=T, seed=0)],
                 progress=False)
    alone = train(get_method("FedAvg"), cfg, pools, [Federation([a], test, target_marginal=T, seed=0)],
                  progress=False)
    got, want = pals.history["train_loss"].to_numpy(), alone.history["train_loss"].to_numpy()
    assert len(got) == cfg.rounds and (want > 0).all()
    np.testing.assert_allclose(got, want, rtol=1e-6)

