"""`fedpaper plan` counts runs without building them one by one (fedpaper.plan._Counter) and builds
FedNCA-ML's composite pools from their labels only (plan.label_only_pools): what it counts equals
what the full build (RunSpec.build on the real pools) gives, run by run; the model costs measured
at small batches equal a direct measurement."""
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from fedpaper import plan as P
from fedpaper.blocks.data.multilabel import composite_split
from fedpaper.blocks.models import build_model
from fedpaper.engine.memory import pools_bytes, saved_tensor_bytes
from fedpaper.runs import model_costs as C
from fedpaper.runs.experiment import RunSpec, build_stored, get_pools, pools_key_of
from pipeline_harness import artifact_jobs


@pytest.mark.parametrize("singles, pairs, seed, offset", [(None, 2, 0, 7), (3, 1, 21, 3), (0, 4, 5, 0), (5, 0, 1, 7)])
def test_composite_labels_are_composite_splits_labels_in_its_order(singles, pairs, seed, offset):
    rng = np.random.default_rng(seed + 100)
    y = rng.integers(0, 4, size=40)
    y[:4] = np.arange(4)  # every class present
    x = rng.integers(0, 255, size=(40, 1, 4, 4)).astype(np.uint8)
    full = composite_split(x, y, 4, singles_per_class=singles, pairs_per_class_pair=pairs, seed=seed,
                           max_offset=offset, canvas=12)
    fast = P.composite_labels(y, 4, singles_per_class=singles, pairs_per_class_pair=pairs, seed=seed,
                              max_offset=offset)
    assert fast.dtype == full.y.dtype and np.array_equal(fast, full.y)
    other = P.composite_labels(y, 4, singles_per_class=singles, pairs_per_class_pair=pairs, seed=seed + 1,
                               max_offset=offset)
    assert not np.array_equal(other, full.y)  # the order follows the seed: the comparison can fail


def _fednca_smoke_key():
    from fedpaper.papers.fednca import runs as FR, settings

    p = settings("smoke")
    return pools_key_of(FR.data_spec(p, "cifar10"), None)


def _same_pools(fast, full):
    assert torch.equal(fast.y_train, full.y_train) and torch.equal(fast.y_test, full.y_test)
    assert fast.fednca_split == full.fednca_split and fast.num_classes == full.num_classes
    assert tuple(fast.x_train.shape) == tuple(full.x_train.shape) and fast.x_train.nbytes == full.x_train.nbytes
    assert pools_bytes(fast) == pools_bytes(full)


def test_label_only_pools_equal_the_real_pools_but_their_pixels():
    key = _fednca_smoke_key()
    assert key[0] in P.LABEL_ONLY
    _same_pools(P.label_only_pools(key), get_pools(key))


DATA = Path(os.environ.get("FEDPAPER_DATA", "../shared/data"))


@pytest.mark.skipif(not (DATA / "dermamnist" / "dermamnist.npz").is_file(), reason="DermaMNIST absent")
def test_label_only_pools_of_the_paper_profiles_dermamnist_composites():
    from fedpaper.papers.fednca import runs as FR, settings

    key = pools_key_of(FR.data_spec(settings("paper"), "dermamnist"), DATA)
    assert json.loads(key[3])["input_size"] == 224
    _same_pools(P.label_only_pools(key), get_pools(key))
    get_pools.cache_clear()


def _declared(fn, profile):
    """[(job, params as the pipeline hands them on)] of an artifact function's jobs that declare their
    runs (not those that train nothing: FedPALS's Fig 4), nothing run."""
    return [(c.job, p) for _, c, p in artifact_jobs(fn, profile=profile) if getattr(c, "job", None) is not None]


@pytest.mark.parametrize("fn", ["fednca.table6", "fedmt.estimation", "privlabels.epochs", "fedpals.fig9", "fedpals.table1",
                                "fedpals.pacs", "fedpals.iwildcam"])
def test_the_plans_counts_equal_the_full_builds(fn, cache_tmp):
    """Smoke profile: every declared run's samples, model key (its evaluation batch is the job's
    execution's), pools and slots as RunSpec.build on the real pools gives them (the sweep's build)."""
    import importlib

    mod, name = fn.split(".")
    jobs = _declared(getattr(importlib.import_module(f"fedpaper.papers.{mod}"), name), "smoke")
    assert jobs
    for job, params in jobs:
        [plan] = P.collect([job.artifact_id], "smoke", None)
        assert plan.status == "planned" and plan.runs
        got = {r.ident: r for r in plan.runs}
        found = P.declared_runs(job, params, None)
        assert {i for _, _, i in found} == set(got)
        for key, execution, ident in found:
            st = build_stored({ident: RunSpec(**key["run"])}, None, execution, key)
            full = P.count_run(ident, key["paper"], st.config, get_pools(st.pools_key), st.federation, st.pools_key)
            r = got[ident]
            assert (r.train_samples, r.eval_samples, r.model, r.pools, r.slots, r.rounds) == \
                (full.train_samples, full.eval_samples, full.model, full.pools, full.slots, full.rounds), ident


@pytest.mark.parametrize("model, kw, shape", [
    ("lenet", dict(in_channels=3, image_size=32, num_classes=10, c2=16), (3, 32, 32)),
    ("bn_convnet", dict(in_channels=3, num_classes=100, width=16, dim=64), (3, 32, 32)),
])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_step_memory_measured_at_batch_2_and_4_equals_a_direct_measurement(model, kw, shape, precision):
    torch.manual_seed(0)
    net = build_model(model, **kw).train()
    m = C.step_memory(net, shape, 32, lambda n: torch.optim.SGD(n.parameters(), lr=0.1, momentum=0.9), precision)
    direct = saved_tensor_bytes(net, torch.randn(32, *shape), precision) + 32 * int(np.prod(shape)) * 4
    assert m["saved"] == direct


def test_one_timing_per_class_others_scaled_by_macs(tmp_path):
    """Two keys of one timing class (a composite model with another head and number of classes): one
    engine timing, cached with the machine and its time; the second key's CPU seconds are the
    first's per MAC times its own MACs. Another backbone width is another class."""
    def key(k, head, width=8):
        return C.ModelKey("fednca_net", json.dumps({"backbone": "convnet", "dim": 16, "head": head, "num_classes": k,
                                                    "width": width, "in_channels": 3}), (3, 16, 16), 8, "adamw",
                          0.0, "fp32", 2, True, 64)

    a, b = key(7, "fc"), key(4, "ladm")
    assert C.timing_class(a) != C.timing_class(key(7, "fc", width=16))
    assert C.timing_class(a) == C.timing_class(b) and C.arch_signature(a) != C.arch_signature(b)
    said = []
    costs = C.model_costs_of([a, b], tmp_path / "costs.json", progress=said.append)
    assert sum(1 for s in said if s.startswith("timing")) == 1 and sum(1 for s in said if s.startswith("measuring")) == 2
    ta, tb = costs[a]["timed"], costs[b]["timed"]
    assert not ta["scaled_by_macs"] and tb["scaled_by_macs"] and ta["measured_at"] == tb["measured_at"]
    per_mac = costs[a]["cpu_s_per_train_sample"] / costs[a]["train_macs"]
    assert costs[b]["cpu_s_per_train_sample"] == pytest.approx(per_mac * costs[b]["train_macs"])
    again = []
    assert C.model_costs_of([a, b], tmp_path / "costs.json", progress=again.append) == costs and not again  # cached


def test_without_time_cpu_nothing_is_timed_and_cached_timings_are_used(tmp_path):
    """time_cpu=False (the paper profile's default in `fedpaper plan`): no engine timing; a class
    without a cached timing gets no CPU seconds and says so; once timed, its cached timing is used."""
    def key(k):
        return C.ModelKey("fednca_net", json.dumps({"backbone": "convnet", "dim": 16, "head": "fc", "num_classes": k,
                                                    "width": 8, "in_channels": 3}), (3, 16, 16), 8, "adamw",
                          0.0, "fp32", 2, True, 64)

    a = key(5)
    said = []
    costs = C.model_costs_of([a], tmp_path / "costs.json", progress=said.append, time_cpu=False)
    assert not any(s.startswith("timing") for s in said)
    assert costs[a]["cpu_s_per_train_sample"] is None and costs[a]["timed"]["not_timed"]
    assert costs[a]["train_macs"] > 0
    assert "without a timing on this CPU" in P.cpu_line(costs) and "--time-cpu" in P.cpu_line(costs)
    timed = C.model_costs_of([a], tmp_path / "costs.json", time_cpu=True)[a]
    assert timed["cpu_s_per_train_sample"] > 0
    assert C.model_costs_of([a], tmp_path / "costs.json", time_cpu=False)[a] == timed
