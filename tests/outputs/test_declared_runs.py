"""Artifacts that declare their runs (fedpaper.outputs.pipeline.ArtifactJob.specs): an override and
explicit seeds reach every declared run of every such artifact, and `fedpaper plan` reads the
declared runs without running a sweep. (FedPALS's artifacts, declared or not, are checked by
tests/papers/fedpals/test_params_reach_rows.py.)"""
import pytest

from fedpaper import plan as P
from fedpaper.outputs import pipeline
from fedpaper.runs import executors

import fedpaper.papers.fedmt as FM
import fedpaper.papers.fednca as FN
import fedpaper.papers.privlabels as PL
from pipeline_harness import artifact_jobs

#: artifact functions whose jobs declare their runs, with an override of every rounds setting of the paper
DECLARING = [
    (FN.table1, {"rounds": 1}), (FN.table2, {"rounds": 1}), (FN.table5, {"rounds": 1}), (FN.table6, {"rounds": 1}),
    (FN.table7, {"rounds": 1}), (FN.table8, {"rounds": 1}),
    (FM.main, {"rounds": 1, "single_rounds": 1}), (FM.scaling, {"rounds": 1, "single_rounds": 1}),
    (FM.estimation, {"rounds": 1, "single_rounds": 1}), (FM.ablations, {"rounds": 1, "single_rounds": 1}),
    (PL.accuracy_vs_labels, {"rounds": 1}), (PL.bars, {"rounds": 1}), (PL.rounds, {"rounds": 1}),
    (PL.epochs, {"epochs.rounds": 1}),
]


def _jobs(fn, **kw):
    """[(job, params as the pipeline hands them on)] of an artifact function, nothing run."""
    return [(getattr(c, "job", None), p) for _, c, p in artifact_jobs(fn, **kw)]


@pytest.mark.parametrize("fn,rounds", DECLARING, ids=lambda x: getattr(x, "__qualname__", ""))
@pytest.mark.parametrize("profile", ["smoke", "paper"])
def test_an_override_and_explicit_seeds_reach_every_declared_run(fn, rounds, profile):
    seeds = [3, 5]
    jobs = _jobs(fn, profile=profile, seeds=seeds, overrides=rounds)
    assert jobs
    for job, params in jobs:
        assert job is not None and job.declares_runs, f"{fn.__qualname__}: a job that does not declare its runs"
        specs = job.specs(params)
        assert specs, job.artifact_id
        assert {s.seed for s in specs} == set(seeds), job.artifact_id
        assert {s.training["rounds"] for s in specs} == {1}, job.artifact_id
        # without the override and seeds the profile's own settings come back: the test can fail
        [(default, dparams)] = [(j, p) for j, p in _jobs(fn, profile=profile) if j.artifact_id == job.artifact_id]
        dspecs = default.specs(dparams)
        assert {s.training["rounds"] for s in dspecs} != {1} or {s.seed for s in dspecs} != set(seeds)


def test_plan_reads_declared_runs_without_a_sweep(monkeypatch, cache_tmp):
    """fedmt/fig3 and fednca/table6 at smoke: the plan counts their declared runs while any sweep fails."""
    def no_sweep(*a, **k):
        raise AssertionError("the plan ran a sweep")

    monkeypatch.setattr(executors, "run_specs", no_sweep)
    fig3, table6 = P.collect(["fedmt/fig3", "fednca/table6"], "smoke", None)
    [(job, params)] = _jobs(FM.estimation, profile="smoke")
    assert fig3.status == "planned" and len(fig3.runs) == len(set(job.specs(params)))
    assert table6.status == "planned" and len(table6.runs) == 3 and all(r.train_samples for r in table6.runs)


def test_a_job_that_declares_specs_needs_a_summarise():
    from fedpaper.ground.errors import BadParameterError

    job = pipeline.ArtifactJob("fedmt/fig3", {}, None, lambda t, p: None, ("cifar100",), specs=lambda p: [])
    with pytest.raises(BadParameterError, match="summarise"):
        pipeline.run_job(job, profile="smoke")


def test_a_declared_artifacts_sweeps_get_its_scope_as_an_argument(monkeypatch, cache_tmp, figures_tmp, tmp_path):
    """The pipeline hands a declared artifact's sweeps its scope (bar label, owner in the store's
    index, run tally) as run_specs' `scope` argument, with no sweep scope set around them; the tally
    it passed is the provenance's run count."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from fedpaper.papers.privlabels import runs as R
    from fedpaper.papers.privlabels.profiles import settings
    from fedpaper.runs import sweep as W

    base = dict(settings("smoke"), profile="smoke")
    specs = [R.run_spec(base, "fashion-mnist", "FedAvg", "public", L=3, seed=s) for s in (0, 1, 1)]
    seen = []

    def run_specs(part, data_root=None, *, scope=None, desc="runs", **_):
        seen.append((scope, W.current_scope(), desc))
        return W.run_sweep([s.to_json() for s in part], lambda k: {"acc": len(k)}, desc=desc, progress=False,
                           scope=scope)

    monkeypatch.setattr(executors, "run_specs", run_specs)
    job = pipeline.ArtifactJob("fedmt/fig3", {}, None, lambda t, p: plt.figure(), ("none",),
                               specs=lambda p: specs, desc="fedmt estimation",
                               summarise=lambda sp, res, p: (pd.DataFrame({"acc": [x["acc"] for x in res]}), {}))
    r = pipeline.run_job(job, profile="smoke", out_dir=tmp_path / "out")
    [(scope, ambient, desc)] = seen
    assert (scope.artifact, scope.owner, desc) == ("fedmt/fig3", ("fedmt/fig3", "smoke"), "fedmt estimation")
    assert scope.label(desc) == "fedmt/fig3 estimation"
    assert ambient == W.SweepScope()  # passed, not read from a context
    assert r.provenance["runs"] == scope.tally.record() == {"runs": 2, "from_cache": 0, "computed": 2}
