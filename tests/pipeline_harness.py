"""The tests' shorthand for one job through the pipeline (fedpaper.outputs.pipeline)."""
from fedpaper.outputs.pipeline import ArtifactJob, run_job


def run_artifact(artifact_id, *, params=None, compute, draw, datasets=("none",), optional_datasets=(), **parameters):
    """ArtifactJob(artifact_id, params, compute, draw, datasets, optional_datasets) run by run_job(**parameters)."""
    return run_job(ArtifactJob(artifact_id, {} if params is None else params, compute, draw, tuple(datasets),
                               tuple(optional_datasets)), **parameters)
