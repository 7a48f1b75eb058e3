"""RunSpec, its one build(), and the store key (paper code + spec + data copy)."""
import json

import numpy as np
import pytest

from fedpaper.runs import experiment as E
from fedpaper.ground.errors import UnknownNameError
from fedpaper.papers.fedpals import runs as FR
from fedpaper.papers.fedpals import profiles as FP
from fedpaper.papers.privlabels import _settings as privlabels_params
from fedpaper.papers.privlabels import runs as PR


def _cifar_copies(tmp_path):
    """Two data roots holding different copies of CIFAR-10: the JPEG zip and torchvision batches."""
    jpeg, orig = tmp_path / "jpeg", tmp_path / "orig"
    (jpeg / "cifar10").mkdir(parents=True)
    (jpeg / "cifar10" / "cifar10-jpeg.zip").write_bytes(b"z" * 10)
    batches = orig / "cifar10" / "cifar-10-batches-py"
    batches.mkdir(parents=True)
    for n in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
        (batches / n).write_bytes(b"b" * 20)
    return jpeg, orig


def test_different_data_copies_give_different_store_keys(tmp_path):
    jpeg, orig = _cifar_copies(tmp_path)
    p = privlabels_params("quick")
    spec = PR.run_spec(p, "cifar10", "FedAvg", "public", 5, seed=0)
    kj, ko = E.store_key(spec, jpeg), E.store_key(spec, orig)
    assert kj["data_copy"]["copy"].startswith("offline JPEG") and ko["data_copy"]["copy"].startswith("original")
    assert kj != ko and kj["run"] == ko["run"] and kj["paper"] == "privlabels"
    (jpeg / "cifar10" / "cifar10-jpeg.zip").write_bytes(b"z" * 11)  # another JPEG copy
    assert E.store_key(spec, jpeg) != kj


def test_run_spec_is_hashable_json_and_builds_the_engine_setup():
    p = privlabels_params("smoke")
    a = PR.run_spec(p, "cifar10", "Tuning-MSE", "private", 3, seed=1)
    b = PR.run_spec(p, "cifar10", "Tuning-MSE", "private", 3, seed=1)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert json.loads(a.to_json())["partition"]["L"] == 3
    setup = a.build()
    kinds = [type(q).__name__ for q in setup.method.parts]
    assert kinds[0] == "PrivateLabels" and kinds[-1] == "CentralTuning" and setup.method.parts[-1].kind == "mse"
    assert setup.config.model == "privlabels_cnn" and setup.config.model_kwargs["widths"] == tuple(p["widths"])
    assert setup.config.model_kwargs["in_channels"] == int(E.get_pools(setup.pools_key).x_train.shape[1])
    fed, _ = PR.federation(a)
    assert all(np.array_equal(x, y) for x, y in zip(setup.federation.client_indices, fed.client_indices))


def test_fedpals_spec_carries_the_method_fields_and_oracle_layout():
    p = FP.runs("smoke")
    p.update(FP.grid("smoke"))
    s = FR.base_spec(p, "cifar10", {"scheme": "sparsity", "C": 3}, method="FedPALS", lam=2.5)
    assert s.method["parts"] == [["FedPALSWeights", {"lam": 2.5}]] and s.tags == {"method": "FedPALS", "lam": 2.5}
    setup = s.build(execution=FR.execution())
    assert setup.method.parts[0].lam == 2.5 and setup.config.model == "lenet"
    oracle = FR.base_spec(p, "cifar10", {"scheme": "sparsity", "C": 3}, method="Oracle").build()
    assert oracle.method.name == "FedAvg (oracle)" and len(oracle.federation.client_indices) == 9


def test_unknown_layout_is_one_clear_line():
    p = privlabels_params("smoke")
    s = PR.run_spec(p, "cifar10", "FedAvg", "public", 3, seed=0).with_(partition={"layout": "nope"})
    with pytest.raises(UnknownNameError, match="unknown partition layout 'nope'"):
        s.build()
