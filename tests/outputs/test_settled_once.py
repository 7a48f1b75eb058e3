"""The pipeline owns an artifact's settings: an artifact function declares its jobs from the profile
and the data root only, and the overrides and the seeds reach a job's settings in one call,
`parameters.settle` (apply_overrides, then resolve_seeds), made by the pipeline."""
import ast
import importlib
import inspect
from pathlib import Path

import pytest

import fedpaper
from fedpaper.ground.errors import BadParameterError
from fedpaper.outputs import parameters
from fedpaper.outputs.pipeline import ArtifactJob, declared_jobs, run_job

PACKAGE = Path(fedpaper.__file__).parent
PAPERS = ("fedpals", "privlabels", "fedmt", "fednca")


def _names_used(path: Path) -> set:
    """Every name a module imports, reads or reads as an attribute."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(a.name.split(".")[-1] for a in node.names)
    return out


def _modules_using(name: str) -> set:
    return {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if name in _names_used(p)}


def test_only_settle_applies_overrides_and_resolves_seeds():
    assert _modules_using("apply_overrides") == {"outputs/parameters.py"}
    assert _modules_using("resolve_seeds") == {"outputs/parameters.py"}
    # the pipeline settles every job; a compute ladder settles a rung's settings to weigh its work
    assert _modules_using("settle") == {"outputs/pipeline.py", "outputs/ladder.py"}


def _artifact_functions():
    for paper in PAPERS:
        for name in (f"fedpaper.papers.{paper}", f"fedpaper.papers.{paper}.ladder"):
            mod = importlib.import_module(name)
            for attr, fn in sorted(vars(mod).items()):
                if getattr(fn, "fedpaper_artifact_function", False) and fn.__module__ == name:
                    yield f"{name}.{attr}", fn


def test_no_artifact_function_sees_the_overrides_or_the_seeds():
    found = list(_artifact_functions())
    assert len(found) >= 36
    for name, fn in found:
        assert list(inspect.signature(fn.__wrapped__).parameters) == ["profile", "data_root"], name
        assert list(inspect.signature(fn).parameters) == ["profile", "data_root", "out_dir", "seeds", "overrides"], name


def test_a_job_declares_the_profile_settings_and_the_pipeline_settles_them():
    from fedpaper.papers import fedpals

    declared = fedpals.fig7.__wrapped__(profile="smoke", data_root=None)
    assert declared.params["rounds"] == {"fashion-mnist": 2, "cifar10": 2} and "overrides" not in declared.params
    [job] = declared_jobs(fedpals.fig7, profile="smoke", seeds=3, overrides={"rounds": 4})
    assert job.params["rounds"] == {"fashion-mnist": 4, "cifar10": 4} and job.params["overrides"] == {"rounds": 4}
    assert job.params["seeds"] == [0, 1, 2]
    assert declared.params["rounds"] == {"fashion-mnist": 2, "cifar10": 2}  # the declared settings are kept


def test_settle_is_apply_overrides_then_resolve_seeds():
    settings = {"rounds": 2, "seeds": 3, "epochs": {"seeds": 2}, "methods": ["A"]}
    p = parameters.validate(overrides={"rounds": 5, "methods": ["B"]}, seeds=[4])
    got = parameters.settle(settings, p, where="x", choices={"methods": ["A", "B"]})
    assert got == {"rounds": 5, "seeds": [4], "epochs": {"seeds": [4]}, "methods": ["B"],
                   "overrides": {"rounds": 5, "methods": ["B"]}}
    assert settings == {"rounds": 2, "seeds": 3, "epochs": {"seeds": 2}, "methods": ["A"]}  # a copy
    with pytest.raises(BadParameterError, match=r"^override methods: C is not a valid entry; valid entries: A, B$"):
        parameters.settle(settings, parameters.validate(overrides={"methods": ["C"]}), choices={"methods": ["A", "B"]})
    with pytest.raises(BadParameterError, match=r"unknown override 'lr'; settings of the x profile: rounds"):
        parameters.settle(settings, parameters.validate(overrides={"lr": 0.1}), where="the x profile")


def test_a_job_derives_its_data_sets_and_execution_from_the_settled_settings():
    from fedpaper.runs.experiment import Execution

    job = ArtifactJob("x/y", {"data": "cifar10", "batch": 8}, compute=lambda p: None, draw=lambda t, p: None,
                      datasets=lambda p: (p["data"],), execution=lambda p: Execution(eval_batch=p["batch"]),
                      follow=lambda p: dict(p, followed=True))
    settled = job.settled(parameters.validate(overrides={"data": "fashion-mnist", "batch": 16}))
    assert settled.datasets == ("fashion-mnist",) and settled.execution == Execution(eval_batch=16)
    assert settled.params["followed"] is True and job.params == {"data": "cifar10", "batch": 8}


def test_run_job_settles_the_overrides(figures_tmp):
    import pandas as pd

    seen = {}

    def compute(p):
        seen.update(p)
        return pd.DataFrame({"x": [1]}), {}

    import matplotlib.pyplot as plt

    run_job(ArtifactJob("fedpals/fig1", {"rounds": 2}, compute, lambda t, p: plt.figure()), profile="smoke",
            overrides={"rounds": 3}, out_dir=str(figures_tmp / "x"))
    assert seen["rounds"] == 3 and seen["overrides"] == {"rounds": 3}
