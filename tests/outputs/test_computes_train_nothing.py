"""An artifact that trains declares its runs (`ArtifactJob.specs`); one that gives a `compute` trains
nothing, so `fedpaper plan` counts no runs for it without calling it. Checked for every artifact
function of every paper at the smoke profile, under `pipeline.COMPUTE_HOOK` (nothing drawn or
written): each compute runs with every route to training failing the test (run_specs, RunSpec.build,
the trainer's constructor). Compute ladders are left out: their rungs are artifact functions."""
import importlib

import pandas as pd
import pytest

from fedpaper.outputs.registry import PAPERS, artifact
from pipeline_harness import artifact_jobs


def _functions():
    out = []
    for paper in PAPERS:
        mod = importlib.import_module(f"fedpaper.papers.{paper}")
        out += [pytest.param(getattr(mod, n), id=f"{paper}.{n}") for n in sorted(dir(mod))
                if getattr(getattr(mod, n), "fedpaper_artifact_function", False)]
    return out


def _jobs(fn):
    return artifact_jobs(fn, profile="smoke")


@pytest.mark.parametrize("fn", _functions())
def test_a_compute_trains_nothing(fn, no_training, cache_tmp):
    jobs = _jobs(fn)
    assert jobs, "the artifact function hands the pipeline no job"
    for aid, compute, params in jobs:
        job = getattr(compute, "job", None)
        if (job is not None and job.declares_runs) or artifact(aid).kind == "ladder":
            continue
        tab, info = compute(params)
        assert isinstance(tab, pd.DataFrame) and isinstance(info, dict), aid


def test_the_trap_catches_training(no_training, cache_tmp):
    """The trap above fails on a declared artifact's sweep (which trains)."""
    from fedpaper.papers.fedpals import fig9

    [(aid, compute, params)] = _jobs(fig9)
    with pytest.raises(AssertionError, match="trained"):
        compute(params)
