"""A group that runs out of device memory is split and goes on (fedpaper.runs.oom): every run
finishes with the numbers it has when trained without the error, no finished run is lost, and no
half-written file is left. The error is injected on the CPU: the group trainer
(experiment.train_group) raises torch.OutOfMemoryError for groups larger than N."""
import numpy as np
import pytest
import torch

from fedpaper.algorithms import get_method
from fedpaper.engine import Federation, TrainConfig
from fedpaper.ground.files import TMP_PREFIX
from fedpaper.runs import experiment, oom
from fedpaper.runs.executors import LocalExecutor, SmallGroupExecutor
from fedpaper.runs.experiment import RunSetup, get_pools, pools_key_of
from fedpaper.blocks.partition import sparsity_partition
from fedpaper.runs.store import ResultStore

POOL = pools_key_of({"name": "synthetic-images", "options": dict(num_classes=10, n_train=300, n_test=100, seed=0)},
                    device="cpu")


def build(spec: dict) -> RunSetup:
    """A tiny LeNet run on synthetic images (4 clients, 2 rounds)."""
    y = get_pools(POOL).y_train.numpy()
    part = sparsity_partition(y, 4, 3, seed=spec["seed"])
    fed = Federation([np.asarray(ix) for ix in part.client_indices], np.arange(100), seed=spec["seed"])
    cfg = TrainConfig("lenet", dict(in_channels=1, image_size=28), optimizer="sgd", lr=0.05, batch_size=32,
                      rounds=2)
    return RunSetup(get_method(spec["method"]), cfg, POOL, fed)


def specs(methods=("FedAvg", "FedProx"), seeds=3):
    return [dict(method=m, seed=s) for m in methods for s in range(seeds)]


def comparable(result: dict) -> dict:
    """A result without its wall-clock timings (log)."""
    return {k: v for k, v in result.items() if k != "log"}


@pytest.fixture(autouse=True)
def fresh_limits():
    oom.clear_limits()
    yield
    oom.clear_limits()


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def inject_oom(monkeypatch, larger_than, only=None) -> list:
    """experiment.train_group raises torch.OutOfMemoryError for groups of more than `larger_than`
    runs (of method `only`, if given); returns the list of (method, group size) of its calls."""
    real = experiment.train_group
    calls = []

    def train_group(setups, progress):
        m = setups[0].method.name
        calls.append((m, len(setups)))
        if len(setups) > larger_than and (only is None or m == only):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected by the test)")
        return real(setups, progress)

    monkeypatch.setattr(experiment, "train_group", train_group)
    return calls


def no_temp_files(root) -> bool:
    return not [p for p in root.rglob("*") if p.name.startswith(TMP_PREFIX)]


def test_oom_splits_the_group_and_every_run_equals_the_run_trained_without_it(tmp_path, monkeypatch, one_thread,
                                                                              capsys):
    sp = specs()
    clean = LocalExecutor().run_specs(sp, build, max_batch=16, progress=False, store=ResultStore(tmp_path / "clean"))
    calls = inject_oom(monkeypatch, larger_than=1)
    store = ResultStore(tmp_path / "oom")
    got = LocalExecutor().run_specs(sp, build, max_batch=16, progress=False, store=store)
    # each method's group of 3 ran out of memory, then 2 (split 2 + 1), then trained 1 + 1 + 1
    assert calls == [("FedAvg", 3), ("FedAvg", 2), ("FedAvg", 1), ("FedAvg", 1), ("FedAvg", 1),
                     ("FedProx", 3), ("FedProx", 2), ("FedProx", 1), ("FedProx", 1), ("FedProx", 1)]
    # batch-invariant on the CPU: the same bits as the runs trained in one group without the error
    assert [comparable(r) for r in got] == [comparable(r) for r in clean]
    assert all(s in store for s in sp) and no_temp_files(store.root)
    out = capsys.readouterr().out
    assert "out of device memory training 3 runs in one engine call; training them as 2 + 1 runs" in out
    assert "later groups of this configuration start at 1 runs" in out


def test_later_groups_of_the_same_configuration_start_at_the_smaller_size(tmp_path, monkeypatch, one_thread):
    calls = inject_oom(monkeypatch, larger_than=2)
    sp = specs(methods=("FedAvg",), seeds=6)  # chunks of 3 (max_batch): the second starts at 2 runs
    LocalExecutor().run_specs(sp, build, max_batch=3, progress=False, store=ResultStore(tmp_path))
    assert calls == [("FedAvg", 3), ("FedAvg", 2), ("FedAvg", 1), ("FedAvg", 2), ("FedAvg", 1)]
    assert oom.group_limit(oom.group_key(build(sp[0]))) == 2


def test_a_run_too_big_alone_is_one_line_and_the_finished_runs_are_kept(tmp_path, monkeypatch, one_thread):
    inject_oom(monkeypatch, larger_than=0, only="FedProx")  # FedAvg trains; FedProx never fits
    store = ResultStore(tmp_path)
    sp = specs()
    with pytest.raises(oom.OneRunTooBigError) as e:
        LocalExecutor().run_specs(sp, build, max_batch=16, progress=False, store=store)
    msg = str(e.value)
    assert "\n" not in msg and "one run does not fit the device's memory even alone" in msg
    assert "FedProx, seed 0" in msg and "smaller batch_size" in msg
    assert isinstance(e.value, torch.OutOfMemoryError)  # still what a caller catching OOM expects
    assert [s in store for s in sp] == [True, True, True, False, False, False]
    assert no_temp_files(store.root)


def test_a_task_executor_group_splits_too(tmp_path, monkeypatch, one_thread):
    """run_group (the task of the local:N and Ray executors) stores each part as it ends."""
    sp = specs(methods=("FedAvg",), seeds=3)
    clean = LocalExecutor().run_specs(sp, build, max_batch=16, progress=False, store=ResultStore(tmp_path / "clean"))
    calls = inject_oom(monkeypatch, larger_than=2)
    store = ResultStore(tmp_path / "oom")
    got = SmallGroupExecutor(3).run_specs(sp, build, max_batch=16, progress=False, store=store)
    assert calls == [("FedAvg", 3), ("FedAvg", 2), ("FedAvg", 1)]
    assert [comparable(r) for r in got] == [comparable(r) for r in clean]
    assert no_temp_files(store.root)
