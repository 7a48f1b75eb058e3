"""FedNCA-ML's feature figures (figs 3-7) declare their runs: each job's one run is the Table 5 / 7
variant's run of the first seed with the engine's best-round snapshot (TrainConfig.keep_best),
stored in the results store like every run. A corrupt store entry of such a run (a flipped byte,
a truncated file) is detected, named in a warning and retrained, never used; an intact one is
read without training."""
import warnings

import pytest
import torch

from fedpaper.runs import experiment
from fedpaper.runs.experiment import store_key
from fedpaper.runs.store import ResultStore

import fedpaper.papers.fednca as FN
from fedpaper.papers.fednca import features as F
from fedpaper.papers.fednca import runs
from pipeline_harness import artifact_jobs


def _jobs(fn, **kw):
    """[(job, params as the pipeline hands them on)] of an artifact function, nothing run."""
    return [(getattr(c, "job", None), p) for _, c, p in artifact_jobs(fn, **kw)]


@pytest.mark.parametrize("fn,table,ids", [
    (FN.fig3_fig4, "table5", ["fig3a", "fig4a", "fig3b", "fig4b", "fig3c", "fig4c"]),
    (FN.fig6_fig7, "table7", ["fig6a", "fig7a", "fig6b", "fig7b", "fig6c", "fig7c"]),
    (FN.fig5, "table5", ["fig5"])], ids=["fig3_fig4", "fig6_fig7", "fig5"])
@pytest.mark.parametrize("profile", ["smoke", "paper"])
def test_feature_figures_declare_the_variant_runs_with_the_snapshot(fn, table, ids, profile):
    jobs = _jobs(fn, profile=profile, seeds=[3, 5], overrides={"rounds": 1})
    assert [j.artifact_id for j, _ in jobs] == [f"fednca/{i}" for i in ids]
    for job, params in jobs:
        assert job.declares_runs and job.compute is None, job.artifact_id
        (spec,) = job.specs(params)
        panel = "c" if job.artifact_id.endswith(("5", "c")) else job.artifact_id[-1]
        assert spec.seed == 3 and spec.training["rounds"] == 1 and spec.training["keep_best"] == runs.SELECT_BY
        # the table's run of that variant and seed, with the snapshot option and nothing else changed
        table_runs = [s for k, s in runs.component_specs(params, table) if k["components"] == F.ROWS[panel][0]]
        plain = spec.with_(replace_training={k: v for k, v in spec.training.items() if k != "keep_best"})
        assert plain in table_runs and spec not in table_runs


def _fig5_run():
    """fig5's job and its one spec at a 2-round smoke profile."""
    [(job, params)] = _jobs(FN.fig5, profile="smoke", seeds=[0], overrides={"rounds": 2})
    (spec,) = job.specs(params)
    return job, spec


def _state(result):
    snap = result["snapshot"]
    return snap["round"], {**snap["params"], **snap["buffers"]}


def _same(a, b):
    return a[0] == b[0] and a[1].keys() == b[1].keys() and all(torch.equal(a[1][k], b[1][k]) for k in a[1])


def _flip_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40  # inside the payload, not the checksum header
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("corrupt", [_flip_byte, _truncate], ids=["flipped-byte", "truncated"])
def test_a_corrupt_feature_run_is_detected_named_and_retrained(cache_tmp, corrupt, monkeypatch):
    job, spec = _fig5_run()
    (first,) = job.run_declared([spec])
    path = ResultStore().path(store_key(spec))
    assert path.is_file() and "snapshot" in first
    corrupt(path)
    trained = []
    real = experiment.train
    monkeypatch.setattr(experiment, "train", lambda *a, **k: trained.append(1) or real(*a, **k))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (again,) = job.run_declared([spec])
    msgs = [str(w.message) for w in caught if str(path) in str(w.message)]
    assert msgs and all("recomputed" in m for m in msgs)  # each read of the entry says so
    assert trained == [1] and _same(_state(again), _state(first))
    assert _same(_state(ResultStore().get(store_key(spec))), _state(first))  # stored again, whole


def test_an_intact_feature_run_is_read_without_training(cache_tmp, monkeypatch):
    job, spec = _fig5_run()
    (first,) = job.run_declared([spec])

    def no_training(*a, **k):
        raise AssertionError("retrained an intact stored run")

    monkeypatch.setattr(experiment, "train", no_training)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (again,) = job.run_declared([spec])
    assert _same(_state(again), _state(first))
