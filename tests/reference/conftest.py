"""Hooks and the autouse fixture of the reference tests; the adapter to the engine lives in
reference_harness.py (a unique module name, so it never collides with another folder's conftest)."""
import pytest
import torch

from fedpaper.blocks import models as fp_models
from reference_harness import TinyBN, TinyMLP


def pytest_configure(config):
    config.addinivalue_line("markers", "float32: run this reference test in float32 (default: float64)")


@pytest.fixture(autouse=True)
def reference_setup(request, monkeypatch):
    """float64 everywhere unless marked float32 (restored afterwards); the tiny models registered by name."""
    monkeypatch.setitem(fp_models.MODELS, "ref_mlp", TinyMLP)
    monkeypatch.setitem(fp_models.MODELS, "ref_bn", TinyBN)
    old_dtype, old_threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(torch.float32 if request.node.get_closest_marker("float32") else torch.float64)
    torch.set_num_threads(1)
    yield
    torch.set_default_dtype(old_dtype)
    torch.set_num_threads(old_threads)
