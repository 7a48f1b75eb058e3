"""The engine after issue 13: a deterministic backend rule (reruns are bit-identical), extra label
spaces on Pools, metrics from fedpaper.blocks.metrics, the best-validation model, frozen parameters, new
optimisers and schedules, and bf16 precision."""
import numpy as np
import pytest
import torch
from engine_harness import lenet_config, two_runs

from fedpaper.algorithms import get_method
from fedpaper.algorithms.base import Part
from fedpaper.driver import FederatedTrainer, train
from fedpaper.engine import Pools, choose_backend
from fedpaper.ground.errors import BadParameterError


@pytest.fixture(scope="module")
def setup():
    return two_runs(with_val=True)


_cfg = lenet_config


def test_auto_backend_is_a_fixed_rule_and_reruns_are_bit_identical(setup):
    pools, feds = setup
    a = train(get_method("FedProx"), _cfg(), pools, feds, progress=False)
    b = train(get_method("FedProx"), _cfg(), pools, feds, progress=False)
    assert a.log["backend"] == b.log["backend"] == "grouped" and a.log["backend_rule"].startswith("auto")
    assert all(torch.equal(a.final_params[k], b.final_params[k]) for k in a.final_params)
    assert choose_backend("auto", torch.device("cuda"), False, True, "m")[0] == "vmap"
    assert choose_backend("auto", torch.device("cpu"), False, False, "m")[0] == "loop"
    assert choose_backend("grouped", torch.device("cpu"), True, False, "m")[0] == "loop"  # BatchNorm
    # auto on CPU by the widest convolution (backends.GROUPED_MAX_CONV): the quick privlabels CNN
    # grouped, the paper's 32-32-64-64 the loop (fp32 from 32 channels, bf16 from 64); an explicit backend as asked
    from fedpaper.engine.backends import widest_conv
    from fedpaper.blocks.models import build_model

    quick, paper = (build_model("privlabels_cnn", in_channels=3, image_size=32, widths=w, hidden=h)
                    for w, h in (((8, 8, 16, 16), 128), ((32, 32, 64, 64), 512)))
    assert (widest_conv(quick), widest_conv(paper)) == (16, 64)
    cpu = torch.device("cpu")
    assert choose_backend("auto", cpu, False, True, "privlabels_cnn", widest_conv(quick))[0] == "grouped"
    assert choose_backend("auto", cpu, False, True, "privlabels_cnn", widest_conv(paper)) == \
        ("loop", "auto: cpu, fp32, widest convolution 64 >= 32 channels -> loop")
    assert choose_backend("auto", cpu, False, True, "privlabels_cnn", 64, "bf16")[0] == "loop"
    assert choose_backend("auto", cpu, False, True, "privlabels_cnn", 32)[0] == "loop"
    assert choose_backend("auto", cpu, False, True, "privlabels_cnn", 32, "bf16")[0] == "grouped"
    assert choose_backend("auto", cpu, False, True, "privlabels_cnn", 31)[0] == "grouped"
    assert choose_backend("grouped", cpu, False, True, "privlabels_cnn", 64)[0] == "grouped"
    assert choose_backend("auto", torch.device("cuda"), False, True, "privlabels_cnn", 64)[0] == "vmap"


def test_keep_best_returns_the_best_validation_params(setup):
    pools, feds = setup
    res = train(get_method("FedAvg"), _cfg(keep_best="val_acc", backend="grouped", lr=0.2), pools, feds,
                progress=False)
    assert res.log["backend"] == "grouped"
    best = res.best()
    rounds = [int(b) for b in best["best_round"]]
    again = {rnd: train(get_method("FedAvg"), _cfg(backend="grouped", lr=0.2, rounds=rnd), pools, feds,
                        progress=False) for rnd in set(rounds)}
    assert again[rounds[0]].snapshots is None  # off by default
    for r, rnd in enumerate(rounds):
        assert res.snapshots[r]["round"] == rnd
        assert res.snapshots[r]["params"].keys() == res.final_params.keys()
        for k in res.final_params:
            assert torch.equal(res.snapshots[r]["params"][k], again[rnd].final_params[k][r])
    assert _cfg(keep_best="val_acc").spec()["keep_best"] == "val_acc" and "keep_best" not in _cfg().spec()
    with pytest.raises(BadParameterError, match="keep_best"):
        _cfg(keep_best=True)


def test_extra_metrics_and_label_spaces(setup):
    pools, feds = setup
    res = train(get_method("FedAvg"), _cfg(backend="vmap", rounds=1, metrics=("micro_f1",)), pools, feds,
                progress=False)
    h = res.history
    np.testing.assert_allclose(h["test_micro_f1"], h["test_acc"], atol=1e-6)  # single-label micro-F1 = accuracy
    with pytest.raises(BadParameterError, match="unknown metric"):
        _cfg(metrics=("top5",))
    coarse = (pools.y_train // 2, pools.y_test // 2)
    p2 = Pools(pools.x_train, pools.y_train, pools.x_test, pools.y_test, 4, labels={"coarse": coarse})
    assert torch.equal(p2.label_space("coarse")[0], coarse[0]) and p2.label_space()[1] is pools.y_test
    with pytest.raises(BadParameterError, match="label space"):
        p2.label_space("fine")
    with pytest.raises(BadParameterError, match="rows"):
        Pools(pools.x_train, pools.y_train, pools.x_test, pools.y_test, 4, labels={"bad": (coarse[0][:3], coarse[1])})


class FrozenClassifier(Part):
    """A part declaring parameters that never train (e.g. a fixed ETF classifier)."""

    key = "frozen"
    frozen = ("classifier.weight", "classifier.bias")


def test_frozen_parameters_never_change(setup):
    pools, feds = setup
    algo = get_method("FedAvg").algorithm().with_parts(FrozenClassifier())
    tr = FederatedTrainer(algo, _cfg(backend="vmap", optimizer="adamw", lr=1e-3, weight_decay=0.1), pools, feds,
                          progress=False)
    before = {k: v.clone() for k, v in tr.global_params.items()}
    tr.run()
    for k, v in tr.global_params.items():
        assert torch.equal(v, before[k]) == (k in FrozenClassifier.frozen)


def test_momentum_cosine_and_bf16_train(setup):
    pools, feds = setup
    base = train(get_method("FedAvg"), _cfg(backend="vmap"), pools, feds, progress=False).final_params
    mom = _cfg(backend="vmap", momentum=0.9, nesterov=True, weight_decay=5e-4, lr_schedule="cosine")
    assert {"momentum", "nesterov", "weight_decay", "lr_schedule"} <= set(mom.spec())
    assert set(_cfg().spec()) == {"model", "model_kwargs", "optimizer", "lr", "batch_size", "local_epochs",
                                  "rounds", "participation", "eval_every"}  # cache keys of existing configs
    out = train(get_method("FedAvg"), mom, pools, feds, progress=False)
    assert max((out.final_params[k] - base[k]).abs().max() for k in base) > 1e-3
    for backend in ("vmap", "grouped"):
        bf = train(get_method("FedAvg"), _cfg(backend=backend, precision="bf16"), pools, feds, progress=False)
        assert all(v.dtype == torch.float32 for v in bf.final_params.values())
        assert 0 < max((bf.final_params[k] - base[k]).abs().max() for k in base) < 0.5
    assert _cfg(precision="bf16").spec()["precision"] == "bf16"


# engine/memory.py's own tests are in tests/engine/test_memory.py (not in the mutation selection:
# it measures real models); these two, by hand, reach StepMemory.run_bytes and available_bytes
def test_step_memory_run_bytes_by_hand():
    from fedpaper.engine import memory as MEM

    base = dict(param_bytes=100, state_copies=1, saved_fixed=7, saved_per_sample=30, input_row_bytes=12)
    # per slot: (4 + 1) parameter copies + 8 input rows (+ vmap: every slot's activations)
    assert MEM.StepMemory(backend="loop", **base).run_bytes(slots=2, batch=8) == 2 * (5 * 100 + 8 * 12)
    assert MEM.StepMemory(backend="vmap", **base).run_bytes(slots=2, batch=8) == 2 * (5 * 100 + 8 * 12 + 7 + 8 * 30)


def test_available_bytes_of_the_cpu_is_memavailable_of_proc_meminfo(monkeypatch, tmp_path):
    """On the CPU: MemAvailable of /proc/meminfo (kB), not the free pages (served here from a file
    with a value no machine's free pages would match)."""
    import builtins

    from fedpaper.engine import memory as MEM

    fake = tmp_path / "meminfo"
    fake.write_text("MemTotal:       16000000 kB\nMemFree:          123456 kB\nMemAvailable:    7654321 kB\n")
    real_open = builtins.open

    def fake_open(path, *a, **kw):
        return real_open(fake if str(path) == "/proc/meminfo" else path, *a, **kw)

    monkeypatch.setattr(builtins, "open", fake_open)
    assert MEM.available_bytes("cpu") == 7654321 * 1024


def test_dropout_masks_do_not_depend_on_batch_mates_small():
    """A small copy of engine/test_cpu.py's check (which is too slow for the mutation selection): the
    privlabels CNN with dropout, grouped backend, one round: a run trained alone and as the second
    of two runs ends with the same parameters, bit for bit (its dropout masks come from its own
    generator, randomness.RunGenerators)."""
    from fedpaper.engine import TrainConfig

    pools, feds = two_runs()
    cfg = TrainConfig("privlabels_cnn", dict(in_channels=1, image_size=16, num_classes=4, widths=(2, 2, 4, 4),
                                             hidden=8), lr=0.05, batch_size=8, rounds=1, backend="grouped")
    algo = get_method("FedAvg")
    alone = train(algo, cfg, pools, [feds[1]], progress=False)
    pair = FederatedTrainer(algo, cfg, pools, feds, progress=False)
    first = pair.run()
    assert pair.backend == "grouped"
    for k in alone.final_params:
        assert torch.equal(alone.final_params[k][0], first.final_params[k][1]), k
    # dropout acts: a model without it ends elsewhere
    no_drop = train(algo, TrainConfig(cfg.model, dict(cfg.model_kwargs, dropout=0.0), lr=0.05, batch_size=8,
                                      rounds=1, backend="grouped"), pools, [feds[1]], progress=False)
    assert not all(torch.equal(alone.final_params[k][0], no_drop.final_params[k][0]) for k in alone.final_params)
