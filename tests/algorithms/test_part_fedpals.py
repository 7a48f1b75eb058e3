"""FedPALS (eq. 9): with the target inside the clients' label-marginal hull and lambda -> 0 the
weights reproduce the target; a huge lambda gives FedAvg's weights."""
from types import SimpleNamespace

import numpy as np
from part_harness import full_slots, make_ctx

from fedpaper.algorithms.fedpals import FedPALSWeights


def _ctx(target):
    return make_ctx([[[10, 0], [0, 30]]], feds=[SimpleNamespace(target_marginal=np.asarray(target))])


def test_weights_match_target_and_approach_fedavg():
    slots, part = full_slots(1, 2)
    p = FedPALSWeights(0.0)
    w = p.weights(_ctx([0.7, 0.3]), {p.key: {}}, slots, part, None)
    np.testing.assert_allclose(w, [0.7, 0.3], atol=1e-6)
    p = FedPALSWeights(1e9)
    w = p.weights(_ctx([0.7, 0.3]), {p.key: {}}, slots, part, None)
    np.testing.assert_allclose(w, [0.25, 0.75], atol=1e-4)


def test_a_slot_of_weight_zero_gets_no_rows():
    slots, part = full_slots(1, 2)
    p = FedPALSWeights(0.0)
    ctx, state = _ctx([1.0, 0.0]), {p.key: {}}
    w = p.prepare_round(ctx, state, None, slots, None)
    np.testing.assert_allclose(w, p.weights(ctx, state, slots, part, None))
    rows = p.round_rows(ctx, w, slots, [np.arange(10), np.arange(10, 40)])
    assert list(rows[0]) == list(range(10)) and len(rows[1]) == 0
    assert p.round_rows(_ctx([0.5, 0.5]), np.array([0.4, 0.6]), slots, [np.arange(3), np.arange(3)]) is None


def test_a_client_of_weight_zero_cannot_make_the_run_diverge():
    """Client 1 holds only labels outside the target's (alpha_1 = 0 at lambda = 0) and some NaN
    images: the run stays finite, and its global model is client 0's alone (FedAvg over client 0)."""
    import torch

    from engine_harness import lenet_config
    from fedpaper.algorithms import get_method
    from fedpaper.blocks.data import synthetic_images
    from fedpaper.driver import train
    from fedpaper.engine import Federation, Pools

    ds = synthetic_images(num_classes=4, n_train=200, n_test=40, shape=(1, 16, 16), seed=0)
    pools = Pools.from_dataset(ds)
    y = pools.y_train.numpy()
    a = np.concatenate([np.flatnonzero(y == 0)[:15], np.flatnonzero(y == 1)[:15]])
    b = np.flatnonzero(y >= 2)[:20]
    x = pools.x_train[torch.arange(len(pools.x_train))].clone()
    x[b[-4:]] = float("nan")  # not row 0: padded batch entries read row 0 (masked)
    assert 0 not in b[-4:]
    pools = Pools(x, pools.y_train, pools.x_test[torch.arange(len(pools.x_test))], pools.y_test, pools.num_classes)
    T = np.array([0.5, 0.5, 0.0, 0.0])
    test = np.flatnonzero(pools.y_test.numpy() < 2)
    cfg = lenet_config(backend="grouped")
    res = train(get_method("FedPALS", lam=0.0), cfg, pools, [Federation([a, b], test, target_marginal=T, seed=0)],
                progress=False)
    alone = train(get_method("FedAvg"), cfg, pools, [Federation([a], test, target_marginal=T, seed=0)], progress=False)
    assert res.diverged == [None]
    for k, v in res.final_params.items():
        assert torch.isfinite(v).all()
        torch.testing.assert_close(v, alone.final_params[k])
