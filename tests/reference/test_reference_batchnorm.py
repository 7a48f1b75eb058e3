"""BatchNorm running statistics: per client during local training, then averaged with sample-size
weights n_i/N (float buffers; FedAvg of the statistics as in FedMT/FedNCA-ML's ResNet-18)."""
import numpy as np
import pytest
import torch
from reference_harness import Problem, assert_params_close, config, initial_buffers, initial_params, run_with_buffers
from reference_math import cross_entropy, sgd

from fedpaper.algorithms.methods import Method

pytestmark = pytest.mark.float32  # the engine averages buffers in float32
EPS = 1e-5  # nn.BatchNorm1d's default


def _bn_forward(params, x):
    """Training-mode BatchNorm1d (batch mean, biased batch variance) then the linear classifier."""
    xhat = (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + EPS)
    h = xhat * params["features.weight"] + params["features.bias"]
    return h @ params["classifier.weight"].T + params["classifier.bias"]


def _bn_client(p, i, theta, bufs, lr, momentum=0.1):
    """One full-batch step of client i: new params and its running statistics after that batch."""
    x, y = p.client_xy(i)
    params = sgd(theta, lambda q: cross_entropy(_bn_forward(q, x), y), lr, 1)
    stats = {"features.running_mean": (1 - momentum) * bufs["features.running_mean"] + momentum * x.mean(0),
             "features.running_var": (1 - momentum) * bufs["features.running_var"] + momentum * x.var(0, unbiased=True)}
    return params, stats


def _problem(rows, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(16, 3)) * np.array([1.0, 2.0, 0.5]) + np.array([0.0, 1.0, -1.0])
    x[8:] += 1.5  # the second client's data has other moments
    y = rng.integers(0, 5, size=16)
    return Problem(x, y, rows, 5, seed=seed)


def _expected(p, cfg, weights):
    theta, bufs = initial_params(cfg, 0), initial_buffers(cfg, 0)
    out = [_bn_client(p, i, theta, bufs, cfg.lr) for i in range(len(p.client_rows))]
    params = {k: sum(w * o[0][k] for w, o in zip(weights, out)) for k in theta}
    stats = {k: sum(w * o[1][k] for w, o in zip(weights, out)) for k in out[0][1]}
    return params, stats, out


def test_batchnorm_statistics_are_averaged_not_taken_from_one_client():
    """Two clients of equal size (no padding): params and running statistics are the clients' mean."""
    p = _problem([np.arange(0, 6), np.arange(8, 14)])
    cfg = config(model="ref_bn", batch_size=6)
    want_p, want_b, per_client = _expected(p, cfg, [0.5, 0.5])
    got_p, got_b = run_with_buffers(Method("FedAvg"), p, cfg)
    assert_params_close(got_p, want_p)
    assert_params_close({k: got_b[k] for k in want_b}, want_b)
    assert float((per_client[0][1]["features.running_mean"] - want_b["features.running_mean"]).abs().max()) > 0.01
    assert int(got_b["features.num_batches_tracked"]) == 1


def test_batchnorm_statistics_use_sample_size_weights():
    """Clients of 4 and 8 rows: statistics weighted 4/12 and 8/12. Client 0's rows are copies of pool
    row 0 (the padding row): kept from before the padding fix, when that made padding harmless."""
    p = _problem([np.zeros(4, dtype=np.int64), np.arange(8, 16)])
    cfg = config(model="ref_bn", batch_size=8)
    _, want_b, _ = _expected(p, cfg, [4 / 12, 8 / 12])
    _, got_b = run_with_buffers(Method("FedAvg"), p, cfg)
    assert_params_close({k: got_b[k] for k in want_b}, want_b)
    _, uniform, _ = _expected(p, cfg, [0.5, 0.5])
    assert float((uniform["features.running_mean"] - want_b["features.running_mean"]).abs().max()) > 0.01


def test_batchnorm_ignores_padding_rows():
    """Clients of 4 and 8 rows, batch 8: client 0's batch holds 4 real rows; its statistics and
    normalisation must come from those 4 rows only."""
    p = _problem([np.arange(1, 5), np.arange(8, 16)])
    cfg = config(model="ref_bn", batch_size=8)
    want_p, want_b, _ = _expected(p, cfg, [4 / 12, 8 / 12])
    got_p, got_b = run_with_buffers(Method("FedAvg"), p, cfg)
    assert_params_close({k: got_b[k] for k in want_b}, want_b)
    assert_params_close(got_p, want_p)


def test_batchnorm_statistics_of_a_finished_client_stay():
    """Clients of 4 and 8 rows, batch 4, cumulative averaging (momentum=None): client 0 takes one step,
    client 1 two; each client's running mean is the mean of its own rows (the batches' mean)."""
    p = _problem([np.arange(1, 5), np.arange(8, 16)])
    cfg = config(model="ref_bn", batch_size=4, model_kwargs=dict(in_features=3, num_classes=5, momentum=None))
    _, got_b = run_with_buffers(Method("FedAvg"), p, cfg)
    means = [p.client_xy(i)[0].mean(0) for i in range(2)]
    want = 4 / 12 * means[0] + 8 / 12 * means[1]
    torch.testing.assert_close(got_b["features.running_mean"], want, rtol=0, atol=1e-6)


def test_batchnorm_real_rows_of_stacked_views_and_unlabeled_rows():
    """The keep mask of a model input that stacks views of the batch (FedMT: weak, strong, mixed:
    3B rows) or appends unlabeled rows (B + B_u, umask); a patched BatchNorm2d then normalises the
    kept rows exactly as torch's BatchNorm on those rows alone, and updates its statistics from them."""
    from torch import nn

    from fedpaper.engine.batchnorm import input_keep, mask_batchnorm, real_rows

    mask = torch.tensor([[1.0, 1.0, 0.0]])
    assert input_keep({"x": torch.zeros(1, 3, 2), "mask": mask}, 0).tolist() == [True, True, False]
    assert input_keep({"x": torch.zeros(1, 9, 2), "mask": mask}, 0).tolist() == [True, True, False] * 3
    umask = torch.tensor([[0.0, 1.0]])
    assert input_keep({"x": torch.zeros(1, 5, 2), "mask": mask, "umask": umask}, 0).tolist() == \
        [True, True, False, False, True]
    assert input_keep({"x": torch.zeros(1, 3, 2), "mask": torch.ones(1, 3)}, 0) is None  # nothing to drop
    assert input_keep({"x": torch.zeros(6, 2), "mask": mask[0]}).tolist() == [True, True, False] * 2  # g=None: one model
    with pytest.raises(ValueError, match="model input has 4 rows, the batch mask 3"):  # not whole views
        input_keep({"x": torch.zeros(1, 4, 2), "mask": mask}, 0)
    bn, ref = nn.BatchNorm2d(2), nn.BatchNorm2d(2)
    assert mask_batchnorm(bn) == 1
    x = torch.randn(5, 2, 3, 3)
    keep = torch.tensor([True, False, True, True, False])
    with real_rows(keep):
        out = bn(x).detach()
    want = ref(x[keep]).detach()
    torch.testing.assert_close(out[keep], want, rtol=0, atol=0)
    assert float(out[~keep].abs().sum()) == 0
    torch.testing.assert_close(bn.running_mean, ref.running_mean, rtol=0, atol=0)
    torch.testing.assert_close(bn.running_var, ref.running_var, rtol=0, atol=0)
    assert int(bn.num_batches_tracked) == 1
    one, ref_one = nn.BatchNorm2d(2), nn.BatchNorm2d(2)  # one real row: 9 values per channel, still its own statistics
    mask_batchnorm(one)
    with real_rows(torch.tensor([False, True, False, False, False])):
        torch.testing.assert_close(one(x)[1:2].detach(), ref_one(x[1:2]).detach(), rtol=0, atol=1e-6)
    bn.eval(), ref.eval()
    with real_rows(keep):  # evaluation: the running statistics, whatever the mask
        torch.testing.assert_close(bn(x), ref(x), rtol=0, atol=0)
    assert int(bn.num_batches_tracked) == 1


def test_masked_batchnorm_with_momentum_none_keeps_the_cumulative_average():
    """momentum=None (torch's cumulative moving average): after two masked steps the running mean
    is the plain average of the two steps' real-row batch means, by hand, as torch's own layer on
    the kept rows alone gives."""
    from torch import nn

    from fedpaper.engine.batchnorm import mask_batchnorm, real_rows

    torch.manual_seed(1)
    bn, ref = nn.BatchNorm1d(3, momentum=None), nn.BatchNorm1d(3, momentum=None)
    mask_batchnorm(bn)
    xs = [torch.randn(6, 3), torch.randn(6, 3) + 2.0]
    keeps = [torch.tensor([True, True, False, True, False, False]),
             torch.tensor([False, True, True, True, True, False])]
    for x, keep in zip(xs, keeps):
        with real_rows(keep):
            bn(x)
        ref(x[keep])
    by_hand = (xs[0][keeps[0]].mean(0) + xs[1][keeps[1]].mean(0)) / 2  # the initial 0 is forgotten: factor 1, 1/2
    torch.testing.assert_close(bn.running_mean, by_hand, rtol=0, atol=1e-6)
    torch.testing.assert_close(bn.running_mean, ref.running_mean, rtol=0, atol=0)
    torch.testing.assert_close(bn.running_var, ref.running_var, rtol=0, atol=0)
    assert int(bn.num_batches_tracked) == 2
