"""TrainConfig.precision (issue 14): bf16 autocasts the forward pass and loss in every backend, the
sequential reference and the evaluation; parameters and optimiser state stay float32; the precision
is part of the results-cache key and of the stored run log; a bad value is one clear error."""
import numpy as np
import pytest
import torch
from engine_harness import lenet_config, two_runs

from fedpaper.runs import experiment as E
from fedpaper.algorithms import get_method
from fedpaper.driver import FederatedTrainer, train
from fedpaper.driver.sequential import train_sequential
from fedpaper.ground.errors import BadParameterError
from fedpaper.papers.privlabels import _settings as privlabels_params
from fedpaper.papers.privlabels import runs as PR

CLOSE = 0.05  # bf16 vs fp32 after 3 rounds: largest |difference| / largest |fp32 value| per tensor (~0.005-0.01 seen)


@pytest.fixture(scope="module")
def setup():
    return two_runs(with_val=False)


_cfg = lenet_config


def _rel_gap(a: dict, b: dict) -> float:
    return max(((a[k] - b[k]).abs().max() / b[k].abs().max()).item() for k in b)


@pytest.mark.parametrize("backend", ["grouped", "loop", "vmap"])
def test_bf16_differs_from_fp32_but_stays_close(setup, backend):
    pools, feds = setup
    fp = train(get_method("FedAvg"), _cfg(backend=backend), pools, feds, progress=False)
    bf = train(get_method("FedAvg"), _cfg(backend=backend, precision="bf16"), pools, feds, progress=False)
    assert all(v.dtype == torch.float32 for v in bf.final_params.values())
    gap = _rel_gap(bf.final_params, fp.final_params)
    assert 1e-4 < gap < CLOSE, gap  # bf16 really used (not a no-op), and no drift
    assert bf.log["precision"] == "bf16" and fp.log["precision"] == "fp32"


def test_sequential_reference_follows_the_precision_and_agrees_with_the_engine(setup):
    pools, feds = setup
    m = get_method("FedAvg")
    fp, bf = train_sequential(m, _cfg(), pools, feds[0]), train_sequential(m, _cfg(precision="bf16"), pools, feds[0])
    assert all(v.dtype == torch.float32 for v in bf.values())
    assert 1e-4 < _rel_gap(bf, fp) < CLOSE
    batched = train(m, _cfg(precision="bf16", backend="grouped"), pools, feds[:1], progress=False).final_params
    assert _rel_gap({k: v[0] for k, v in batched.items()}, bf) < CLOSE


def test_bf16_gradients_optimiser_state_and_evaluation(setup):
    pools, feds = setup
    tr = FederatedTrainer(get_method("FedAvg").algorithm(), _cfg(precision="bf16", optimizer="adam", lr=1e-3),
                          pools, feds, progress=False)
    params = {k: v.clone() for k, v in tr.global_params.items()}
    x = pools.x_train[:16].view(2, 8, *pools.x_train.shape[1:])
    batch = {"x": x, "y": pools.y_train[:16].view(2, 8), "mask": torch.ones(2, 8)}
    grads, lsum = tr._grads(params, batch, tr.present[:, 0], params, tr.objective)
    assert lsum.dtype == torch.float32 and all(g.dtype == torch.float32 for g in grads.values())
    state = tr.optim.init(params)
    new, state = tr.optim.step(params, grads, state, 1e-3, torch.ones(2, dtype=torch.bool))
    moments = [*state["m"].values(), *state["v"].values()]  # Adam's first and second moments
    assert len(moments) == 2 * len(params) and all(t.dtype == torch.float32 for t in [*new.values(), *moments])
    rows = [np.arange(40), np.arange(40)]
    lg_bf = tr.predict(params, pools.x_test, rows)
    tr.cfg = _cfg()  # the same models evaluated in fp32
    lg_fp = tr.predict(params, pools.x_test, rows)
    assert all(a.dtype == torch.float32 for a in lg_bf)
    gap = max((a - b).abs().max().item() / b.abs().max().item() for a, b in zip(lg_bf, lg_fp))
    assert 1e-5 < gap < CLOSE, gap  # the evaluation's forward runs under the bf16 autocast


def test_a_bad_precision_is_one_clear_error(setup):
    with pytest.raises(BadParameterError, match=r"precision='fp16'; choose one of \('fp32', 'bf16'\)"):
        _cfg(precision="fp16")
    spec = PR.run_spec(privlabels_params("smoke"), "cifar10", "FedAvg", "public", 3, seed=0)
    with pytest.raises(BadParameterError, match="precision"):
        spec.with_(training={"precision": "half"}).build()


def test_precision_is_part_of_the_cache_key_and_the_config():
    spec = PR.run_spec(privlabels_params("smoke"), "cifar10", "FedAvg", "public", 3, seed=0)
    bf = spec.with_(training={"precision": "bf16"})
    assert E.store_key(bf) != E.store_key(spec) and E.store_key(bf)["run"]["training"]["precision"] == "bf16"
    cfg_bf, cfg_fp = bf.build().config, spec.build().config
    assert cfg_bf.precision == "bf16" and cfg_fp.precision == "fp32"
    assert cfg_bf.spec()["precision"] == "bf16" and "precision" not in cfg_fp.spec()  # fp32 keys unchanged
    assert cfg_bf != cfg_fp and hash(cfg_bf) != hash(cfg_fp)  # never trained in one batch


# ------------------------------------------------------------------ bf16 only where it is native (#28)
@pytest.mark.parametrize("cap,hw,isa,native", [
    ("AVX512", True, None, True),
    ("AVX512", True, "AVX512_CORE_BF16", True),
    ("AVX512", True, "AVX2", False),  # oneDNN capped below bf16: emulated
    ("AVX2", True, None, False),  # torch's AVX2 kernels (ATEN_CPU_CAPABILITY=avx2 or an AVX2-only CPU)
    ("AVX512", False, None, False),  # AVX-512 without BF16 (e.g. Skylake-X)
])
def test_bf16_native_reads_capability_hardware_and_onednn_cap(monkeypatch, cap, hw, isa, native):
    from fedpaper.engine import cpu

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: cap)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: hw)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    if isa is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", isa)
    ok, why = cpu.bf16_native("cpu")
    assert ok is native and why
    assert cpu.resolve_precision("bf16", "cpu")[0] == ("bf16" if native else "fp32")
    assert cpu.resolve_precision("fp32", "cpu")[0] == "fp32"
    # the device defaults to the CPU
    assert cpu.resolve_precision("bf16") == cpu.resolve_precision("bf16", "cpu")


@pytest.mark.parametrize("native", [True, False])
def test_privlabels_profiles_use_bf16_only_where_native(monkeypatch, capsys, native):
    """quick/long ask for bf16: they get it where it is native, else fp32, with the run key of an
    fp32 run (precision omitted), a note and a precision_rule saying why; printed once."""
    from fedpaper.engine import cpu
    from fedpaper.papers.privlabels import runs
    from fedpaper.papers.privlabels.profiles import SETTINGS, settings

    monkeypatch.setattr(cpu, "bf16_native", lambda device="cpu": (native, "monkeypatched"))
    monkeypatch.setattr(cpu, "_ANNOUNCED", set())
    assert SETTINGS["quick"]["precision"] == "bf16"
    for profile in ("quick", "long"):
        p = settings(profile)
        settings(profile)
        assert p["precision"] == ("bf16" if native else "fp32")
        assert "monkeypatched" in p["precision_rule"]
        assert any("bf16" in n for n in p["notes"])
        assert native or any(n.startswith("fp32 instead of the profile's bf16") for n in p["notes"])
        p.update(profile=profile, seeds=[0])
        spec = runs.run_spec(p, "cifar10", "FedAvg", "public", 10, seed=0)
        assert spec.training.get("precision", "fp32") == p["precision"]
        assert ("precision" in spec.training) == native  # fp32: the key of an fp32 run
    out = capsys.readouterr().out
    assert out.count("privlabels quick profile: precision") == 1 and out.count("privlabels long profile: precision") == 1
