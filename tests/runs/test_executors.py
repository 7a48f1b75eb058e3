"""Executors: the Ray executor gives the local executor's results; a killed worker loses only its
task; task_groups (experiment.plan_groups) forms the local executor's groups. (Ray tests skip when ray is not installed.)"""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fedpaper.algorithms import get_method
from fedpaper.engine import Federation, TrainConfig
from fedpaper.ground.errors import BadParameterError
from fedpaper.runs.executors import AUDIT_ENV, LocalExecutor, RayExecutor, get_executor, run_specs, task_groups
from fedpaper.runs.experiment import RunSetup, get_pools, pools_key_of, train_group
from fedpaper.blocks.partition import sparsity_partition
from fedpaper.ground.paths import REPO_ROOT
from fedpaper.runs.store import ResultStore

STALL_ENV = "FEDPAPER_TEST_STALL_DIR"  # forwarded to workers (FEDPAPER_ prefix)
POOL = pools_key_of({"name": "synthetic-images", "options": dict(num_classes=10, n_train=300, n_test=100, seed=0)},
                    device="cpu")


def build(spec: dict) -> RunSetup:
    """A tiny LeNet run on synthetic images; a spec with "stall" blocks its first attempt (the test
    kills that worker) when STALL_ENV names a folder."""
    stall_dir = os.environ.get(STALL_ENV)
    on_worker = str(os.getpid()) != os.environ.get("FEDPAPER_TEST_DRIVER_PID")  # the driver plans groups
    if spec.get("stall") and stall_dir and on_worker and not (Path(stall_dir) / "stalled").exists():
        (Path(stall_dir) / "stalled").write_text(str(os.getpid()))
        time.sleep(120)
    y = get_pools(POOL).y_train.numpy()
    part = sparsity_partition(y, 4, 3, seed=spec["seed"])
    fed = Federation([np.asarray(ix) for ix in part.client_indices], np.arange(100), seed=spec["seed"])
    cfg = TrainConfig("lenet", dict(in_channels=1, image_size=28), optimizer="sgd", lr=0.05, batch_size=32,
                      rounds=spec["rounds"])
    return RunSetup(get_method(spec["method"]), cfg, POOL, fed)


def specs(n_seeds=3, rounds=2, **extra):
    return [dict(method=m, seed=s, rounds=rounds, **extra) for m in ("FedAvg", "FedProx") for s in range(n_seeds)]


def local_sweep(sp, max_batch):
    """The local executor's computation of `sp`: its groups (task_groups), each one engine call."""
    out = {}
    for g in task_groups(sp, build, max_batch):
        for s, r in zip(g, train_group([build(s) for s in g], False)):
            out[str(s)] = r
    return [out[str(s)] for s in sp]


def comparable(result: dict) -> dict:
    """A result without its wall-clock timings (log: train_seconds, calibration)."""
    return {k: v for k, v in result.items() if k != "log"}


def test_plan_groups_matches_local_batching():
    sp = specs()
    groups = task_groups(sp, build, max_batch=2)
    assert [[(s["method"], s["seed"]) for s in g] for g in groups] == [
        [("FedAvg", 0), ("FedAvg", 1)], [("FedAvg", 2)], [("FedProx", 0)], [("FedProx", 1), ("FedProx", 2)]]
    assert sorted(map(str, sum(groups, []))) == sorted(map(str, sp))


def test_get_executor_names(monkeypatch):
    monkeypatch.delenv("FEDPAPER_EXECUTOR", raising=False)
    assert isinstance(get_executor(), LocalExecutor)
    assert get_executor("ray:auto").address == "auto"
    assert get_executor("ray://head:10001").address == "ray://head:10001"
    assert get_executor("ray:10.0.0.5:6379").address == "10.0.0.5:6379"
    assert get_executor("ray").address is None
    monkeypatch.setenv("FEDPAPER_EXECUTOR", "ray:auto")
    assert get_executor().address == "auto"
    with pytest.raises(BadParameterError, match="unknown executor 'dask'"):
        get_executor("dask")


def run_cli(*args, pythonpath=()):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*map(str, pythonpath), str(REPO_ROOT)]))
    env.pop("FEDPAPER_EXECUTOR", None)
    return subprocess.run([sys.executable, "-m", "fedpaper.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT, env=env)


def one_error_line(proc):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_cli_unknown_executor_is_one_line():
    line = one_error_line(run_cli("reproduce", "--profile", "smoke", "--executor", "dask", "--no-report"))
    assert "unknown executor 'dask'" in line and "ray:ADDRESS" in line


def test_cli_ray_executor_without_ray_is_one_line(tmp_path):
    fake = tmp_path / "noray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'ray'\", name=\"ray\")\n")
    line = one_error_line(run_cli("reproduce", "--profile", "smoke", "--executor", "ray:auto", "--no-report",
                                  pythonpath=[fake.parent]))
    assert "needs Ray, which is not installed" in line and "fedpaper[cluster]" in line


# ----------------------------------------------------------------------------- with Ray


@pytest.fixture(scope="module")
def ray_cluster():
    ray_mod = pytest.importorskip("ray")
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    RayExecutor(init_kwargs={"num_cpus": 2})._ray()  # retries a start-up that times out
    yield ray_mod
    ray_mod.shutdown()


@pytest.fixture
def one_thread():
    """One torch thread for the local sweep, as in Ray's one-CPU workers (and much faster than two
    threads on a loaded 2-core machine); restored afterwards."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.cluster
def test_ray_sweep_equals_local_sweep(ray_cluster, tmp_path, one_thread):
    sp = specs()
    local = local_sweep(sp, max_batch=2)
    ex = RayExecutor()
    remote = ex.run_specs(sp, build, max_batch=2, progress=False, store=ResultStore(tmp_path / "ray"))
    assert ex.last_counts == {"tasks": 4, "computed": 4, "skipped": 0, "retried": 0, "failed": 0}
    assert [comparable(r) for r in remote] == [comparable(r) for r in local]
    # a second sweep finds every key stored and submits nothing
    again = ex.run_specs(sp, build, max_batch=2, progress=False, store=ResultStore(tmp_path / "ray"))
    assert ex.last_counts["tasks"] == 0 and [comparable(r) for r in again] == [comparable(r) for r in local]


@pytest.mark.cluster
def test_killed_worker_loses_only_its_task(ray_cluster, tmp_path, monkeypatch):
    audit, stall = tmp_path / "audit", tmp_path / "stall"
    audit.mkdir(), stall.mkdir()
    monkeypatch.setenv(AUDIT_ENV, str(audit))
    monkeypatch.setenv(STALL_ENV, str(stall))
    monkeypatch.setenv("FEDPAPER_TEST_DRIVER_PID", str(os.getpid()))
    sp = specs(n_seeds=2) + [dict(method="FedAvg", seed=5, rounds=2, stall=True)]

    def kill_the_stalled_worker():
        marker = stall / "stalled"
        for _ in range(600):
            if marker.exists() and marker.read_text():
                os.kill(int(marker.read_text()), signal.SIGKILL)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_the_stalled_worker)
    killer.start()
    ex = RayExecutor()
    store = ResultStore(tmp_path / "ray")
    res = ex.run_specs(sp, build, max_batch=2, progress=False, store=store)
    killer.join()
    assert (stall / "stalled").exists()
    assert ex.last_counts["retried"] == 1 and ex.last_counts["failed"] == 0
    assert all(s in store for s in sp) and len(res) == len(sp)
    computed = [p.name.split("-")[1] for p in audit.glob("computed-*")]
    started = [p.name.split("-")[1] for p in audit.glob("started-*")]
    assert len(computed) == ex.last_counts["tasks"] == len(set(computed))  # each group computed once
    assert len(started) == len(computed) + 1  # the killed attempt started and never finished
    assert not list(store.root.glob("*/*.lease")) and not list(store.root.glob("*/.tmp-*"))


class _RecordingExecutor:
    """Stands in for a cluster executor: runs every key's build as a worker would."""

    is_local = False

    def run_specs(self, keys, build, *, desc, max_batch, progress, store, scope):
        import pickle

        build = pickle.loads(pickle.dumps(build))  # what a cluster ships to its workers
        self.setups = [build(k) for k in keys]
        return [{"key": k} for k in keys]


def test_run_specs_hands_store_keys_and_a_picklable_build_to_the_executor():
    from fedpaper.runs.experiment import store_key
    from fedpaper.papers.privlabels import runs as R
    from fedpaper.papers.privlabels.profiles import settings

    spec = R.run_spec(dict(settings("smoke"), profile="smoke"), "fashion-mnist", "FedAvg", "public", L=3, seed=1)
    ex = _RecordingExecutor()
    out = run_specs([spec], executor=ex, progress=False)
    assert out == [{"key": store_key(spec)}]
    assert isinstance(ex.setups[0], RunSetup) and ex.setups[0].federation.seed == 1
