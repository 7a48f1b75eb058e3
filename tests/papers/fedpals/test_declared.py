"""Every FedPALS artifact that trains declares its runs (`ArtifactJob.specs`) and summarises their
results without training; the others' computes train nothing. Checked at the smoke profile, under
`pipeline.COMPUTE_HOOK` (nothing drawn or written), with every way to train replaced by one that
fails the test (conftest's `no_training`: run_specs, `RunSpec.build`, which every run that trains
goes through, and the trainer's constructor)."""
import pandas as pd
import pytest

import fedpaper.papers.fedpals as F
from fedpaper.papers.fedpals import real as RL
from fedpaper.papers.fedpals import train as TR
from fedpaper.runs.executors import run_specs as run_specs_imported  # as a module that trains imports it
from fedpaper.runs.experiment import RunSpec
from pipeline_harness import artifact_jobs, fake_result

#: every artifact function of the paper module (the compute ladder, ladder.py, runs these as its rungs)
FUNCTIONS = [getattr(F, n) for n in dir(F) if getattr(getattr(F, n), "fedpaper_artifact_function", False)]
#: the artifacts that train at the smoke profile
TRAINING = {"fedpals/fig9", "fedpals/table1", "fedpals/fig2c", "fedpals/fig6b", "fedpals/fig5c", "fedpals/fig7",
            "fedpals/fig8a", "fedpals/fig8b", "fedpals/fig8c", "fedpals/fig3a", "fedpals/table2", "fedpals/table4",
            "fedpals/fig3b", "fedpals/table3"}


def test_the_artifact_functions_are_found():
    assert {f.__name__ for f in FUNCTIONS} >= {"fig1", "label_marginals", "fig9", "table1", "accuracy_vs_shift",
                                               "fig7", "fig8", "fig8a", "pacs", "iwildcam"}


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_what_trains_is_declared_and_summarised_without_training(fn, no_training, cache_tmp):
    jobs = artifact_jobs(fn, profile="smoke")
    assert jobs
    for aid, compute, params in jobs:
        job = getattr(compute, "job", None)
        if aid not in TRAINING:  # trains nothing: its compute runs here, with training refused
            assert job is None, f"{aid} declares runs but is not listed as training"
            tab, _ = compute(params)
            assert isinstance(tab, pd.DataFrame) and len(tab), aid
            continue
        assert job is not None and job.declares_runs and job.compute is None, f"{aid}: its runs are not declared"
        specs = job.specs(params)
        assert specs and all(isinstance(s, RunSpec) for s in specs), aid
        tab, info = job.summarise(specs, [fake_result(s) for s in specs], params)
        assert isinstance(tab, pd.DataFrame) and len(tab) and isinstance(info, dict), aid


def test_the_check_fails_on_a_compute_that_trains(no_training, cache_tmp):
    """The trap of the test above catches training: the pipeline's sweep of declared runs, and Table 1's
    runs trained by a compute itself, through a run_specs it imported before the trap was set."""
    [(_, compute, params)] = artifact_jobs(F.fig9, profile="smoke")
    with pytest.raises(AssertionError, match="trained"):
        compute(params)
    [(_, _, params)] = artifact_jobs(F.table1, profile="smoke")
    with pytest.raises(AssertionError, match="trained"):
        run_specs_imported(TR.settings_specs(params, TR.table1_run_settings(params)), execution=F.R.execution())


def test_table1_declares_its_pacs_row_with_the_pacs_notebooks_execution():
    """At the quick profile with PACS present, Table 1 declares the PACS row's runs (the pacs
    notebook's, from Table 1's settings), trained as the pacs notebook trains them, in sweeps of
    their own; absent PACS, or at smoke, it declares none."""
    [(_, compute, params)] = artifact_jobs(F.table1, profile="quick")
    job = compute.job
    specs = job.specs(dict(params, missing_datasets=[]))
    pacs = [s for s in specs if RL.is_pacs(s)]
    [(_, pacs_compute, pacs_params)] = [j for j in artifact_jobs(F.pacs, profile="quick") if j[0] == "fedpals/table4"]
    assert [s.to_json() for s in pacs] == [s.to_json() for s in pacs_compute.job.specs(pacs_params)]
    assert {job.how(s) for s in pacs} == {pacs_compute.job.how(s) for s in pacs} == {(RL.execution("resnet50_imagenet"),
                                                                                      RL.MAX_BATCH)}
    image = [s for s in specs if not RL.is_pacs(s)]
    assert image and {job.how(s) for s in image} == {(F.R.execution(), TR.runs_per_engine_call())}
    sweeps = job.sweeps(specs)
    assert [label for label, part in sweeps if any(RL.is_pacs(s) for s in part.values())] == ["fedpals table1 PACS C=6"]
    assert all(all(RL.is_pacs(s) for s in part.values()) or not any(RL.is_pacs(s) for s in part.values())
               for _, part in sweeps)
    assert not [s for s in job.specs(dict(params, missing_datasets=["pacs"])) if RL.is_pacs(s)]
    [(_, compute, params)] = artifact_jobs(F.table1, profile="smoke")
    assert not [s for s in compute.job.specs(dict(params, missing_datasets=[])) if RL.is_pacs(s)]


def test_table1_summarises_its_pacs_row_from_its_runs(cache_tmp):
    """The PACS row's results become Table 1's PACS row; without them the notes say why it is absent.
    (The smoke settings, their PACS row declared as at any other profile: stand-ins, no images read.)"""
    [(_, compute, params)] = artifact_jobs(F.table1, profile="smoke")
    job, q = compute.job, dict(params, missing_datasets=[])
    specs = job.specs(dict(q, profile="quick"))
    image = [s for s in specs if not RL.is_pacs(s)]
    pacs = [s for s in specs if RL.is_pacs(s)]
    assert image and pacs
    expected = RL.table1_rows(RL.pacs_records(pacs, [fake_result(s) for s in pacs], RL.table1_pacs_settings(q)))
    tab, info = job.summarise(specs, [fake_result(s) for s in specs], q)
    got = tab[tab["dataset"] == "PACS"].reset_index(drop=True)
    assert len(got) == len(expected) > 0
    pd.testing.assert_frame_equal(got[expected.columns], expected)
    assert not any("PACS row" in n for n in info["notes"])
    tab, info = job.summarise(image, [fake_result(s) for s in image], dict(q, profile="quick", missing_datasets=["pacs"]))
    assert "PACS" not in set(tab["dataset"]) and "PACS row not regenerated: data set missing" in info["notes"]
