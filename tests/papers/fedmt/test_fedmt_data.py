"""FedMT data: both label spaces in the pools, M, the server/client split and the App. C.1.1 prior."""
import numpy as np
import pytest

from fedpaper.runs.experiment import RunSpec
from fedpaper.papers.fedmt.data import build_pools, split
from fedpaper.blocks.partition import cifar100_correspondence_matrix, fedmt_partition
from fedpaper.ground.paths import data_root

STAND_IN = {"num_classes": 20, "coarse_classes": 5, "n_train": 1000, "n_test": 100, "shape": [3, 8, 8], "seed": 0}


def _check_m(m, f2c):
    assert set(np.unique(m)) <= {0.0, 1.0}
    assert (m.sum(0) == 1).all()  # one coarse class per fine class
    assert (m.argmax(0) == f2c).all()
    assert (m.sum(1) > 0).all()


def test_stand_in_pools_carry_both_label_spaces():
    pools = build_pools({"stand_in": STAND_IN}, None, "cpu")
    yc, yc_test = pools.labels["coarse"]
    assert np.array_equal(yc.numpy(), pools.fine_to_coarse[pools.y_train.numpy()])
    assert np.array_equal(yc_test.numpy(), pools.fine_to_coarse[pools.y_test.numpy()])
    assert pools.correspondence.shape == (5, 20)
    _check_m(pools.correspondence, pools.fine_to_coarse)


def test_cifar100_m_from_the_data_sets_own_map():
    zip_path = data_root() / "cifar100" / "cifar100-jpeg95.zip"
    if not zip_path.is_file():
        pytest.skip("offline CIFAR-100 copy absent")
    from fedpaper.blocks.data.cifar import read_cifar100_classes

    fine, coarse, f2c = read_cifar100_classes(zip_path)
    m = cifar100_correspondence_matrix(f2c)
    assert m.shape == (20, 100) and len(coarse) == 20
    _check_m(m, f2c)
    assert (m.sum(1) == 5).all()  # CIFAR-100: five fine classes per superclass
    assert f2c[fine.index("apple")] == coarse.index("fruit_and_vegetables")


def test_layout_server_n_per_fine_class_and_clients():
    pools = build_pools({"stand_in": STAND_IN}, None, "cpu")
    spec = RunSpec("fedmt", {"name": "fedmt-cifar100", "options": {"stand_in": STAND_IN}},
                   {"layout": "fedmt", "seed": 1, "n": 3, "num_clients": 4, "samples_per_client": 40}, {}, {})
    from fedpaper.papers.fedmt.data import fedmt_layout

    fed = fedmt_layout(spec, pools, None)
    assert np.bincount(pools.y_train[fed.server_indices].numpy(), minlength=20).tolist() == [3] * 20
    assert [len(c) for c in fed.client_indices] == [40] * 4
    allc = np.concatenate(fed.client_indices)
    assert len(np.unique(allc)) == len(allc) and not np.isin(allc, fed.server_indices).any()
    single = fedmt_layout(spec.with_(partition={"role": "single"}), pools, None)
    assert len(single.client_indices) == 1 and np.array_equal(single.client_indices[0], fed.server_indices)


@pytest.mark.parametrize("C", [10, 20, 40, 80])
def test_client_scaling_keeps_total_client_data(C):
    y = np.repeat(np.arange(100), 500)
    _, part = fedmt_partition(y, 25, C, 40000 // C, seed=0)
    assert part.sizes.sum() == 40000 and (part.sizes == 40000 // C).all()


@pytest.mark.parametrize("gamma,share", [(0.1, 0.52), (0.9, 0.91), (0.99, 0.99)])
def test_noniid_prior_app_c11(gamma, share):
    """App. C.1.1 (targets vague-12): minority priors U[0.35, 0.55], majority superclasses 2c, 2c+1 get
    4/(1-gamma) before normalising; the majority share of a client's data is about 52/91/99%."""
    f2c = np.arange(100) // 5
    y = np.repeat(np.arange(100), 500)
    _, part = fedmt_partition(y, 25, 10, 4000, iid=False, gamma=gamma, seed=0, fine_to_coarse=f2c)
    prior = np.array(part.meta["priors"])
    major = np.array(part.meta["majority_superclasses"])
    for c in range(10):
        assert major[c].tolist() == [2 * c, 2 * c + 1]
        minor = np.delete(prior[c], major[c])
        ratio = prior[c, major[c]][:, None] / minor[None, :]  # = (4/(1-gamma)) / U[0.35, 0.55]
        assert ((ratio >= 4 / (1 - gamma) / 0.55 - 1e-9) & (ratio <= 4 / (1 - gamma) / 0.35 + 1e-9)).all()
        assert np.isclose(prior[c].sum(), 1)
    coarse = np.array(part.meta["coarse_counts"])
    got = np.mean([coarse[c, major[c]].sum() / 4000 for c in range(10)])
    assert abs(got - share) < 0.03
