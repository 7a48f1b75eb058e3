"""Partitioners: determinism, disjointness, the stated per-scheme properties, and error messages."""
import numpy as np
import pytest

from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.partition import (
    Partition,
    cifar100_correspondence_matrix,
    class_presence_partition,
    dirichlet_marginals,
    dirichlet_partition,
    fedmt_partition,
    oracle_partition,
    private_label_partition,
    privlabels_split,
    resample_to_marginal,
    round_counts,
    sparsity_partition,
    thin_partition,
)

K = 10


def balanced_labels(per_class=100, k=K, seed=0):
    """A shuffled label array with `per_class` samples of each of k classes."""
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(k), per_class))


def same(a: Partition, b: Partition) -> bool:
    return len(a.client_indices) == len(b.client_indices) and all(
        np.array_equal(x, y) for x, y in zip(a.client_indices, b.client_indices)
    )


def assert_valid(part: Partition, labels):
    """Disjoint, int64, sorted, in range, and counts consistent with the labels."""
    assert part.is_disjoint()
    for ix, row in zip(part.client_indices, part.counts):
        assert ix.dtype == np.int64
        assert np.all(np.diff(ix) > 0)
        assert ix.size == 0 or (0 <= ix.min() and ix.max() < len(labels))
        if np.ndim(labels) == 1:
            np.testing.assert_array_equal(np.bincount(labels[ix], minlength=part.num_classes), row)


Y = balanced_labels()


# --------------------------------------------------------------------------- determinism, all schemes
SCHEMES = {
    "sparsity": lambda s: sparsity_partition(Y, 10, 3, seed=s),
    "dirichlet": lambda s: dirichlet_partition(Y, 10, 0.5, seed=s),
    "private": lambda s: private_label_partition(Y, 10, 5, samples_per_client=40, seed=s),
    "fedmt": lambda s: fedmt_partition(Y, 5, 4, 100, seed=s)[1],
    "oracle": lambda s: oracle_partition(Y, np.full(K, 0.1), [50, 60, 70], seed=s),
    "presence": lambda s: class_presence_partition(np.eye(K, dtype=int)[Y], 5, 0.5, 0.5, seed=s),
}


@pytest.mark.parametrize("name", SCHEMES)
def test_seeded_disjoint(name):
    a, b, c = SCHEMES[name](0), SCHEMES[name](0), SCHEMES[name](1)
    assert same(a, b)
    assert not same(a, c)
    assert_valid(a, Y)
    assert a.meta["seed"] == 0


def test_seed_must_be_int():
    with pytest.raises(BadParameterError, match="seed"):
        sparsity_partition(Y, 10, 3, seed=None)


# --------------------------------------------------------------------------- sparsity (FedPALS vague-2)
@pytest.mark.parametrize("C", [1, 2, 3, 6, 10])
def test_sparsity_exactly_C_labels_balanced(C):
    part = sparsity_partition(Y, 10, C, seed=3)
    assert_valid(part, Y)
    for row, labels in zip(part.counts, part.meta["label_sets"]):
        present = np.flatnonzero(row)
        assert present.tolist() == labels and present.size == C
        assert len(set(row[present])) == 1  # same number of images for each of its labels


def test_sparsity_shards_are_equal_splits():
    part = sparsity_partition(Y, 10, 3, seed=5)
    holders = np.bincount(np.concatenate(part.meta["label_sets"]), minlength=K)
    for i, labels in enumerate(part.meta["label_sets"]):
        # balanced count = smallest equal shard among the client's labels
        assert part.meta["per_label"][i] == min(100 // holders[c] for c in labels)


def test_sparsity_iid_at_C_equals_K():
    part = sparsity_partition(Y, 10, K, seed=0)
    assert (part.counts == 10).all()


def test_sparsity_samples_per_label_and_pool():
    part = sparsity_partition(Y, 5, 2, seed=0, samples_per_label=7)
    assert set(part.counts[part.counts > 0].tolist()) == {7}
    with pytest.raises(BadParameterError, match="samples_per_label=1000"):
        sparsity_partition(Y, 5, 2, seed=0, samples_per_label=1000)
    pool = np.arange(0, len(Y), 2)
    part = sparsity_partition(Y, 5, 2, seed=0, pool=pool)
    assert np.isin(part.all_indices(), pool).all()
    assert_valid(part, Y)


@pytest.mark.parametrize("kwargs, param", [
    ({"C": 11}, "C="), ({"C": 0}, "C="), ({"num_clients": 0}, "num_clients="),
])
def test_sparsity_errors(kwargs, param):
    args = {"labels": Y, "num_clients": 10, "C": 3, "seed": 0, **kwargs}
    with pytest.raises(BadParameterError, match=param) as err:
        sparsity_partition(**args)
    assert "[" in str(err.value)  # names the allowed range


def test_sparsity_too_few_samples_for_holders():
    tiny = np.repeat(np.arange(3), 2)  # 2 samples per label, 3 labels
    with pytest.raises(BadParameterError, match="label"):
        sparsity_partition(tiny, 8, 3, seed=0)


# --------------------------------------------------------------------------- Dirichlet (FedPALS vague-11)
def test_dirichlet_marginals_mean_and_concentration():
    p_small = dirichlet_marginals(4000, K, 0.1, seed=0)
    p_large = dirichlet_marginals(4000, K, 10.0, seed=0)
    np.testing.assert_allclose(p_small.sum(axis=1), 1.0)
    np.testing.assert_allclose(p_small.mean(axis=0), 1 / K, atol=0.015)
    np.testing.assert_allclose(p_large.mean(axis=0), 1 / K, atol=0.005)
    assert p_small.max(axis=1).mean() > 2 * p_large.max(axis=1).mean()


def test_dirichlet_partition_marginals_average_and_beta():
    y = balanced_labels(per_class=2000)
    parts = {b: dirichlet_partition(y, 200, b, seed=1, samples_per_client=50) for b in (0.1, 100.0)}
    for part in parts.values():
        assert_valid(part, y)
        assert (part.sizes == 50).all()  # n well below the pool: no class runs out
    np.testing.assert_allclose(parts[100.0].marginals.mean(axis=0), 1 / K, atol=0.01)
    np.testing.assert_allclose(parts[0.1].marginals.mean(axis=0), 1 / K, atol=0.04)
    assert parts[0.1].marginals.max(axis=1).mean() > 2 * parts[100.0].marginals.max(axis=1).mean()
    np.testing.assert_allclose(parts[0.1].meta["p"], dirichlet_marginals(200, K, 0.1, seed=1))


def test_dirichlet_shortfall_modes():
    reduce = dirichlet_partition(Y, 10, 0.1, seed=2)  # n = N / M: classes run out
    assert_valid(reduce, Y)
    short = np.array(reduce.meta["shortfall"])
    assert short.sum() > 0 and np.array_equal(reduce.sizes + short, np.full(10, 100))
    assert (reduce.sizes > 0).all()
    redraw = dirichlet_partition(Y, 10, 0.1, seed=2, on_shortfall="redraw")
    assert (redraw.sizes == 100).all() and sum(redraw.meta["redrawn"]) > 0
    with pytest.raises(BadParameterError, match="samples_per_client"):
        dirichlet_partition(Y, 10, 0.1, seed=2, on_shortfall="error")


@pytest.mark.parametrize("kwargs, param", [
    ({"beta": 0}, "beta="), ({"beta": -1.0}, "beta="), ({"num_clients": 0}, "num_clients="),
    ({"samples_per_client": 101}, "samples_per_client="),
])
def test_dirichlet_errors(kwargs, param):
    args = {"labels": Y, "num_clients": 10, "beta": 0.5, "seed": 0, **kwargs}
    with pytest.raises(BadParameterError, match=param):
        dirichlet_partition(**args)


# --------------------------------------------------------------------------- private label sets
def test_private_labels_exact_size_and_L_labels():
    y = balanced_labels(per_class=400)
    for L in (2, 5, 10):
        part = private_label_partition(y, 10, L, samples_per_client=200, seed=L)
        assert_valid(part, y)
        assert (part.sizes == 200).all()
        for row, labels in zip(part.counts, part.meta["label_sets"]):
            assert np.flatnonzero(row).tolist() == labels and len(labels) == L
        assert part.meta["short_clients"] == {}


def test_private_labels_keeps_all_when_short():
    part = private_label_partition(Y, 10, 2, samples_per_client=10_000, seed=0)
    assert part.meta["short_clients"] and all(part.sizes[i] == n for i, n in part.meta["short_clients"].items())


def test_privlabels_split_then_partition():
    y = balanced_labels(per_class=300)
    pool, val, server = privlabels_split(y, seed=0)
    assert len(np.intersect1d(pool, val)) == len(np.intersect1d(pool, server)) == len(np.intersect1d(val, server)) == 0
    assert len(pool) + len(val) + len(server) == len(y)
    np.testing.assert_array_equal(np.bincount(y[val]), np.full(K, 60))  # stratified 20%
    assert len(server) == 300  # default: 10% of the training set
    part = private_label_partition(y, 10, 5, samples_per_client=100, seed=0, pool=pool)
    assert np.isin(part.all_indices(), pool).all() and (part.sizes == 100).all()
    a, b = privlabels_split(y, seed=0), privlabels_split(y, seed=1)
    assert np.array_equal(a[1], privlabels_split(y, seed=0)[1]) and not np.array_equal(a[1], b[1])


@pytest.mark.parametrize("call, param", [
    (lambda: private_label_partition(Y, 10, 11, seed=0), "L="),
    (lambda: private_label_partition(Y, 10, 0, seed=0), "L="),
    (lambda: private_label_partition(Y, 10, 3, samples_per_client=0, seed=0), "samples_per_client="),
    (lambda: privlabels_split(Y, val_fraction=1.5, seed=0), "val_fraction="),
    (lambda: privlabels_split(Y, server_size=10_000, seed=0), "server_size="),
])
def test_private_errors(call, param):
    with pytest.raises(BadParameterError, match=param):
        call()


# --------------------------------------------------------------------------- FedNCA-ML class presence
def multi_hot(n=600, k=6, seed=0):
    """Single-label rows, two-label composites and all-negative rows."""
    rng = np.random.default_rng(seed)
    m = np.zeros((n, k), dtype=int)
    m[np.arange(n), rng.integers(k, size=n)] = 1
    pair = rng.random(n) < 0.3
    m[np.flatnonzero(pair), rng.integers(k, size=pair.sum())] = 1
    m[rng.random(n) < 0.2] = 0
    return m


def test_class_presence_properties():
    ymat = multi_hot()
    part = class_presence_partition(ymat, 4, 0.5, 0.5, seed=0)
    assert part.is_disjoint()
    allowed = part.meta["allowed_sets"]
    assert all(len(a) == 3 for a in allowed)  # round(0.5 * 6) classes per client
    assert set(np.concatenate(allowed).tolist()) == set(range(6))  # every class allowed somewhere
    for ix, a in zip(part.client_indices, allowed):
        present = np.flatnonzero(ymat[ix].any(axis=0))
        assert set(present) <= set(a)  # at most gamma*K classes, all allowed
    neg = part.meta["negatives_per_client"]
    assert max(neg) - min(neg) <= 1 and sum(neg) == part.meta["n_negative"]  # spread evenly
    assigned = part.all_indices().size + part.meta["n_dropped"]
    assert assigned == len(ymat)
    drop = class_presence_partition(ymat, 4, 0.5, 0.5, seed=0, negatives="drop")
    assert not (ymat[drop.all_indices()].sum(axis=1) == 0).any()


def test_class_presence_errors():
    ymat = multi_hot()
    with pytest.raises(BadParameterError, match="gamma="):
        class_presence_partition(ymat, 4, 0.5, 0.0, seed=0)
    with pytest.raises(BadParameterError, match="gamma="):
        class_presence_partition(ymat, 2, 0.5, 0.1, seed=0)  # 1 class each cannot cover 6
    with pytest.raises(BadParameterError, match="beta="):
        class_presence_partition(ymat, 4, 0.0, 0.5, seed=0)
    with pytest.raises(BadParameterError, match="label_matrix"):
        class_presence_partition(np.full((5, 3), 2), 4, 0.5, 0.5, seed=0)


# --------------------------------------------------------------------------- FedMT
F2C = np.arange(K) // 2  # 5 superclasses of 2 fine classes


def test_correspondence_matrix():
    m = cifar100_correspondence_matrix(F2C)
    assert m.shape == (5, K) and (m.sum(axis=0) == 1).all() and m[2, 4] == 1 and m[2, 6] == 0


def test_fedmt_iid_and_noniid():
    server, part = fedmt_partition(Y, 5, 4, 103, seed=0)
    assert np.bincount(Y[server], minlength=K).tolist() == [5] * K
    assert not np.isin(part.all_indices(), server).any() and part.is_disjoint()
    assert (part.sizes == 103).all() and part.counts.min() >= 10 and part.counts.max() <= 11
    assert part.meta["n_unused"] == len(Y) - 50 - 4 * 103
    _, skew = fedmt_partition(Y, 5, 2, 150, iid=False, gamma=0.9, seed=0, fine_to_coarse=F2C)
    coarse = np.array(skew.meta["coarse_counts"])
    assert (skew.sizes == 150).all()
    assert coarse[0, :2].sum() > 0.6 * 150 and coarse[1, 2:4].sum() > 0.6 * 150  # majority superclasses


def test_fedmt_errors():
    with pytest.raises(BadParameterError, match="n_server_per_class="):
        fedmt_partition(Y, 101, 4, 100, seed=0)
    with pytest.raises(BadParameterError, match="samples_per_client="):
        fedmt_partition(Y, 50, 4, 200, seed=0)
    with pytest.raises(BadParameterError, match="gamma="):
        fedmt_partition(Y, 5, 4, 100, iid=False, gamma=1.0, seed=0, fine_to_coarse=F2C)
    with pytest.raises(BadParameterError, match="fine_to_coarse"):
        fedmt_partition(Y, 5, 4, 100, iid=False, gamma=0.5, seed=0)


# --------------------------------------------------------------------------- targets and Oracle (FedPALS)
def test_round_counts():
    assert round_counts(10, [0.5, 0.25, 0.25]).tolist() == [5, 3, 2]
    assert round_counts(7, [1 / 3] * 3).sum() == 7


def test_resample_to_marginal():
    t = np.zeros(K)
    t[[1, 4, 7]] = 1 / 3
    ix = resample_to_marginal(Y, t, seed=0)
    assert np.bincount(Y[ix], minlength=K).tolist() == [0, 100, 0, 0, 100, 0, 0, 100, 0, 0]  # all of them
    skew = np.array([0.5, 0.3, 0.2] + [0] * 7)
    ix = resample_to_marginal(Y, skew, seed=0)
    assert np.bincount(Y[ix], minlength=K)[:3].tolist() == [100, 60, 40]  # largest possible
    ix2 = resample_to_marginal(Y, skew, seed=0, n=50)
    assert np.bincount(Y[ix2], minlength=K)[:3].tolist() == [25, 15, 10]
    assert np.array_equal(ix2, resample_to_marginal(Y, skew, seed=0, n=50))
    with pytest.raises(BadParameterError, match="n="):
        resample_to_marginal(Y, skew, seed=0, n=201)
    with pytest.raises(BadParameterError, match="marginal="):
        resample_to_marginal(Y, [0.5, 0.6] + [0] * 8, seed=0)


def test_oracle_partition():
    t = np.array([0.5, 0.5] + [0] * 8)
    part = oracle_partition(Y, t, [40, 60, 20], seed=0)
    assert_valid(part, Y)
    assert part.sizes.tolist() == [40, 60, 20]
    np.testing.assert_allclose(part.marginals[:, :2], 0.5)
    with pytest.raises(BadParameterError, match="sizes"):
        oracle_partition(Y, t, [150, 100], seed=0)
    fit = oracle_partition(Y, t, [150, 100], seed=0, scale_to_fit=True)
    assert fit.meta["scale"] < 1 and fit.sizes.sum() <= 200 and fit.sizes[0] > fit.sizes[1]
    iid = oracle_partition(Y, t, [40, 60], seed=0, exact=False)
    assert iid.sizes.tolist() == [40, 60] and iid.counts[:, 2:].sum() == 0


# --------------------------------------------------------------------------- plotting
def test_plot_stacked_bars():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    part = sparsity_partition(Y, 10, 6, seed=0)
    ax = part.plot(title="C=6", class_names=[f"c{k}" for k in range(K)], target=9)
    assert len(ax.patches) == 10 * K and ax.get_title() == "C=6"
    assert ax.get_legend() is not None and "target" in ax.get_xticklabels()[-1].get_text()
    heights = np.array([p.get_height() for p in ax.patches]).reshape(K, 10).sum(axis=0)
    np.testing.assert_allclose(heights, 1.0)
    ax2 = part.plot(normalize=False, horizontal=True)
    assert ax2.get_xlabel() == "Number of samples"
    plt.close("all")


# --------------------------------------------------------------------------- thin_partition (scaled-down profiles)
@pytest.mark.parametrize("make", [
    lambda y: sparsity_partition(y, 10, 2, seed=3),
    lambda y: dirichlet_partition(y, 10, 0.1, seed=4),
])
def test_thin_partition_keeps_relative_sizes_and_marginals(make):
    y = balanced_labels(per_class=1000, seed=5)
    full = make(y)
    thin = thin_partition(y, full, 0.1, seed=0)
    assert_valid(thin, y)
    # every label count within half an image of 10 % of the full one (the target's T(Y) included)
    assert np.all(np.abs(thin.counts - 0.1 * full.counts) <= 0.5 + 1e-9)
    # every client a subset of its full self
    assert all(np.isin(t, f).all() for t, f in zip(thin.client_indices, full.client_indices))
    # FedAvg weights n_i / N kept: sizes within C/2 images of 10 % of the full sizes
    w_full, w_thin = full.sizes / full.sizes.sum(), thin.sizes / thin.sizes.sum()
    assert np.abs(w_thin - w_full).max() < 0.01
    assert np.abs(thin.marginals - full.marginals).max() < 0.02
    assert thin.meta["data_fraction"] == 0.1 and thin.meta["full_sizes"] == full.sizes.tolist()


def test_thin_partition_keeps_unequal_sizes_unlike_a_cap():
    y = balanced_labels(per_class=1000, seed=6)
    full = sparsity_partition(y, 10, 2, seed=1)
    assert len(set(full.sizes)) > 1  # the paper's partition has clients of different sizes
    thin = thin_partition(y, full, 0.05, seed=1)
    assert len(set(thin.sizes)) > 1
    np.testing.assert_allclose(thin.sizes / full.sizes, 0.05, atol=0.5 * 2 / full.sizes.min())


def test_thin_partition_fraction_one_is_the_full_partition_and_seeded():
    y = balanced_labels(per_class=200)
    full = dirichlet_partition(y, 10, 0.5, seed=2)
    assert thin_partition(y, full, 1.0, seed=0) is full
    assert same(thin_partition(y, full, 0.3, seed=7), thin_partition(y, full, 0.3, seed=7))
    assert not same(thin_partition(y, full, 0.3, seed=7), thin_partition(y, full, 0.3, seed=8))


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, True, "0.5"])
def test_thin_partition_errors(fraction):
    y = balanced_labels(per_class=50)
    with pytest.raises(BadParameterError, match="fraction="):
        thin_partition(y, sparsity_partition(y, 5, 2, seed=0), fraction, seed=0)
