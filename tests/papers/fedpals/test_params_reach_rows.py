"""An override and explicit seeds reach every run of every FedPALS artifact that trains, Table 1's
PACS row included (its settings are built from Table 1's own params, not from the profile name).

The artifacts' computes (for those that declare their runs: the pipeline's sweep, then their
summarise) run on the smoke stand-ins with run_specs replaced by one that records the run specs it
is given and returns a flat result for each (no training); Table 1's PACS row is read from the runs
Table 1 declares where PACS is present."""
import pytest

import fedpaper.papers.fedpals as F
from fedpaper.runs import executors
from fedpaper.outputs.parameters import resolve_seeds
from fedpaper.papers.fedpals import profiles as P
from fedpaper.papers.fedpals import real as RL
from pipeline_harness import artifact_jobs, fake_result


@pytest.fixture
def recorded(monkeypatch):
    """The specs every run_specs call of the pipeline receives (results: fake_result)."""
    specs = []

    def fake_run_specs(sp, data_root=None, **kw):
        specs.extend(sp)
        return [fake_result(s) for s in sp]

    monkeypatch.setattr(executors, "run_specs", fake_run_specs)  # the pipeline's sweep of declared runs
    return specs


def _pacs_row_runs(**kw) -> tuple[list, list]:
    """(the PACS row's runs, the image rows' runs) Table 1 declares at the quick profile with PACS present."""
    [(aid, compute, params)] = artifact_jobs(F.table1, profile="quick", **kw)
    assert aid == "fedpals/table1"
    specs = compute.job.specs(dict(params, missing_datasets=[]))
    return [s for s in specs if RL.is_pacs(s)], [s for s in specs if not RL.is_pacs(s)]


def test_table1_pacs_row_takes_the_overrides_and_explicit_seeds_of_table1():
    pacs, _ = _pacs_row_runs(seeds=[4, 7], overrides={"rounds": 3, "hyper.mu": 0.5})
    assert pacs and {s.seed for s in pacs} == {4, 7}
    assert {s.training["rounds"] for s in pacs} == {3}
    default, _ = _pacs_row_runs()
    fedprox = {s.seed: s.method for s in pacs if s.tags["method"] == "FedProx"}
    fedprox0 = {s.seed: s.method for s in default if s.tags["method"] == "FedProx"}
    assert fedprox and fedprox0 and "0.5" in str(fedprox[4]) and "0.5" not in str(fedprox0[0])
    assert str(fedprox[4]).replace("0.5", "0.01") == str(fedprox0[0])  # mu, and nothing else, changed
    # only the PACS entry of rounds changed: the image rows keep theirs
    pacs, image = _pacs_row_runs(overrides={"rounds.pacs": 2})
    assert {s.training["rounds"] for s in pacs} == {2}
    assert {s.seed for s in pacs} == {0, 1, 2}  # the PACS profile's own 3 seeds
    assert {s.training["rounds"] for s in image} == {20}


def test_table1_pacs_row_without_overrides_is_the_pacs_profile():
    [(_, _, params)] = artifact_jobs(F.table1, profile="paper")
    q = RL.table1_pacs_settings(params)
    p = resolve_seeds(P.settings("paper", group="pacs"))
    assert q == p  # the same runs (and cache keys) as the pacs notebook's


@pytest.mark.parametrize("fn", [F.table1, F.accuracy_vs_shift, F.fig7, F.fig8a, F.fig8b, F.fig8c, F.pacs, F.iwildcam],
                         ids=lambda f: f.__name__)
def test_every_run_of_every_training_artifact_takes_the_overrides_and_explicit_seeds(fn, recorded):
    seeds = [3, 5]
    jobs = artifact_jobs(fn, profile="smoke", seeds=seeds, overrides={"rounds": 1})
    for aid, compute, params in jobs:  # the jobs of one function may share its runs (pacs, iwildcam)
        compute(dict(params, missing_datasets=params.get("missing_datasets", [])))
    ids = [aid for aid, _, _ in jobs]
    assert recorded, f"{ids}: no runs"
    assert {s.seed for s in recorded} == set(seeds), ids
    assert {s.training["rounds"] for s in recorded} == {1}, ids
