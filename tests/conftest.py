"""Test isolation: headless matplotlib, caches/figures in temporary folders (tests never
touch the real cache, the committed figures/ or README.md), and the shared fixtures."""
import os
import tempfile

os.environ["MPLBACKEND"] = "Agg"
_SESSION_TMP = tempfile.mkdtemp(prefix="fedpaper-tests-")
os.environ["FEDPAPER_CACHE"] = os.path.join(_SESSION_TMP, "cache")
os.environ["FEDPAPER_FIGURES"] = os.path.join(_SESSION_TMP, "figures")
os.environ["FEDPAPER_README"] = os.path.join(_SESSION_TMP, "README.md")
os.environ["FEDPAPER_PROGRESS"] = "0"

import pytest  # noqa: E402



@pytest.fixture
def figures_tmp(tmp_path, monkeypatch):
    """A fresh, empty committed-figures folder for one test."""
    d = tmp_path / "figures"
    monkeypatch.setenv("FEDPAPER_FIGURES", str(d))
    return d


@pytest.fixture
def readme_tmp(tmp_path, monkeypatch):
    p = tmp_path / "README.md"
    monkeypatch.setenv("FEDPAPER_README", str(p))
    return p


@pytest.fixture
def cache_tmp(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("FEDPAPER_CACHE", str(d))
    return d


@pytest.fixture
def no_training(monkeypatch):
    """Every route to training a run fails the test: the executors' run_specs, RunSpec.build (which
    every run that trains goes through) and the trainer's constructor."""
    from fedpaper.driver import trainer
    from fedpaper.runs import executors
    from fedpaper.runs.experiment import RunSpec

    def refuse(*a, **k):
        raise AssertionError("trained (or asked to train) a run outside the runs it declares")

    monkeypatch.setattr(executors, "run_specs", refuse)
    monkeypatch.setattr(RunSpec, "build", refuse)
    monkeypatch.setattr(trainer.FederatedTrainer, "__init__", refuse)


@pytest.fixture
def empty_data_root(tmp_path, monkeypatch):
    """A data root that holds nothing (a fresh machine without data)."""
    d = tmp_path / "nodata"
    d.mkdir()
    monkeypatch.setenv("FEDPAPER_DATA", str(d))
    return d


def pytest_terminal_summary(terminalreporter, config):
    """With pytest-randomly on (`make test`: -p randomly), print the seed even under -q."""
    if config.pluginmanager.has_plugin("randomly"):
        seed = config.getoption("randomly_seed")
        terminalreporter.write_line(f"tests ran in random order, seed {seed}; repeat this order with "
                                    f"`pytest -p randomly --randomly-seed={seed}`")


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` skip where torch sees no CUDA device, saying so (CI has no GPU)."""
    import torch

    if torch.cuda.is_available():
        return
    reason = (f"no CUDA GPU (torch {torch.__version__}, torch.cuda.is_available() is False): "
              "the gpu tests run on a machine with one, e.g. `pytest -m gpu tests/test_gpu.py`")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))
