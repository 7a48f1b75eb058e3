"""The FedNCA-ML feature-model cache (fednca-models/*.pt) is checksummed: a flipped byte or a
truncated file is detected, named in one warning, retrained and overwritten; it is never used."""
import warnings

import pytest
import torch

from fedpaper.papers.fednca import features as F
from fedpaper.papers.fednca.profiles import settings


def _spec():
    p = settings("smoke")
    p["profile"], p["seeds"], p["rounds"] = "smoke", [0], 2
    return F.variant_spec(p, "table5", F.ROWS["c"][0])


def _params(net):
    return {k: v.clone() for k, v in net.state_dict().items()}


def _flip_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40  # inside the payload (a tensor's bytes), not the header
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("corrupt", [_flip_byte, _truncate], ids=["flipped-byte", "truncated"])
def test_corrupt_feature_model_is_detected_named_and_retrained(cache_tmp, corrupt):
    spec = _spec()
    first = _params(F.trained(spec)[0])
    (path,) = list((cache_tmp / "fednca-models").glob("*.pt"))
    good = path.read_bytes()
    corrupt(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        net = F.trained(spec)[0]
    msgs = [str(w.message) for w in caught if "feature model" in str(w.message)]
    assert len(msgs) == 1 and str(path) in msgs[0] and "retraining" in msgs[0]
    again = _params(net)
    assert again.keys() == first.keys() and all(torch.equal(again[k], first[k]) for k in first)
    assert path.read_bytes() == good  # rewritten whole, with its checksum


def test_intact_feature_model_is_read_without_retraining(cache_tmp, monkeypatch):
    spec = _spec()
    F.trained(spec)

    def no_training(*a, **k):
        raise AssertionError("retrained an intact cached model")

    monkeypatch.setattr(F, "_BestValidation", no_training)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.trained(spec)
