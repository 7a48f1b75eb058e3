"""The tests' shorthand for one job through the pipeline (fedpaper.outputs.pipeline), and for the job an
artifact function declares."""
from fedpaper.outputs import pipeline
from fedpaper.outputs.pipeline import ArtifactJob, run_job


def run_artifact(artifact_id, *, params=None, compute, draw, datasets=("none",), optional_datasets=(), **parameters):
    """ArtifactJob(artifact_id, params, compute, draw, datasets, optional_datasets) run by run_job(**parameters)."""
    return run_job(ArtifactJob(artifact_id, {} if params is None else params, compute, draw, tuple(datasets),
                               tuple(optional_datasets)), **parameters)


def artifact_jobs(fn, **parameters) -> list:
    """[(artifact id, compute, params)] of every job artifact function `fn` hands the pipeline when
    called with `parameters`, taken under pipeline.COMPUTE_HOOK (nothing computed, drawn or written):
    `compute.job` is the ArtifactJob, `params` what the pipeline hands its compute (seeds resolved)."""
    got = []
    token = pipeline.COMPUTE_HOOK.set(lambda aid, compute, params, missing: got.append((aid, compute, params)))
    try:
        fn(**parameters)
    finally:
        pipeline.COMPUTE_HOOK.reset(token)
    return got


def declared_job(fn, artifact_id, **parameters):
    """(job, params) of `artifact_id` among the jobs of artifact function `fn` called with `parameters`
    (artifact_jobs): the ArtifactJob as the pipeline runs it and the params it hands its compute."""
    [(compute, params)] = [(c, p) for aid, c, p in artifact_jobs(fn, **parameters) if aid == artifact_id][:1]
    return compute.job, params


def fake_result(spec) -> dict:
    """A stored result's shape for `spec` without training it: every round at 0.5 (train loss,
    test/validation accuracy and F1), best at round 1, no divergence."""
    n = int(spec.training["rounds"])
    row = {"train_loss": 0.5, "test_acc": 0.5, "val_acc": 0.5, "test_f1": 0.5, "val_f1": 0.5}
    return {"history": [dict(row, seed=spec.seed, round=t) for t in range(1, n + 1)], "log": {}, "diverged_at": None,
            "best": {"round": 1, "test_acc": 0.5, "test_f1": 0.5}, "final": dict(row)}
