"""Device-dependent branches that can be checked on the CPU (the CUDA runs themselves: test_gpu.py):
the bf16 rule given a device, the pools moved to the device once per process and never per batch,
and one clear error when the pools and the run are on different devices."""
import numpy as np
import pytest
import torch

from fedpaper.algorithms import get_method
from fedpaper.blocks.data.compact import CompactImages
from fedpaper.driver import train
from fedpaper.engine import Federation, TrainConfig
from fedpaper.engine import cpu as C
from fedpaper.ground.errors import BadParameterError
from fedpaper.runs.experiment import get_pools, pools_key_of

KEY = pools_key_of({"name": "synthetic-images", "options": dict(num_classes=4, n_train=120, n_test=30, seed=2)},
                   device="cpu")


def _fake_cuda(monkeypatch, bf16: bool):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "NVIDIA H100 80GB HBM3")


def test_bf16_rule_follows_the_device(monkeypatch, capsys):
    _fake_cuda(monkeypatch, True)
    native, why = C.bf16_native("cuda")
    assert native and "H100" in why
    assert C.resolve_precision("bf16", "cuda", who="t-cuda")[0] == "bf16"
    assert C.resolve_precision("bf16", "cuda:0", who="t-cuda0")[0] == "bf16"
    _fake_cuda(monkeypatch, False)
    assert C.resolve_precision("bf16", "cuda", who="t-old-gpu") == ("fp32", "cuda: bf16 not supported by the GPU")
    assert C.bf16_native("mps")[0] is False
    assert C.resolve_precision("fp32", "cuda") == ("fp32", "as requested")
    assert "precision bf16" in capsys.readouterr().out


def test_pools_move_to_the_device_once_and_never_per_batch(monkeypatch):
    moves = []
    real_to = CompactImages.to

    def counted(self, device=None, **kw):
        moves.append(str(device))
        return real_to(self, device, **kw)

    monkeypatch.setattr(CompactImages, "to", counted)
    get_pools.cache_clear()
    pools = get_pools(KEY)
    assert get_pools(KEY) is pools and len(moves) == 2  # x_train and x_test, once per process
    moves.clear()
    cfg = TrainConfig("lenet", dict(in_channels=1, image_size=28, num_classes=4), batch_size=8, rounds=2)
    feds = [Federation([np.arange(0, 60), np.arange(60, 120)], np.arange(30), val_indices=np.arange(10), seed=0)]
    train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    assert moves == []  # batches are read from the pixels where they already are
    get_pools.cache_clear()


def test_pools_on_another_device_are_one_clear_error():
    pools = get_pools(KEY)
    cfg = TrainConfig("lenet", dict(in_channels=1, image_size=28, num_classes=4), rounds=1, device="meta")
    with pytest.raises(BadParameterError, match="data pools are on cpu but the run trains on meta"):
        train(get_method("FedAvg"), cfg, pools, [Federation([np.arange(60)], np.arange(30), seed=0)], progress=False)
