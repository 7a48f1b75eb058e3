"""Every CPU, the same answer (issue #27): the guard against oneDNN's AVX2 1x1 stride-2 kernel, and
determinism of two identical trainings. `make test` runs this file a second time under the AVX2
emulation (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from fedpaper.algorithms import Method
from fedpaper.blocks.data import synthetic_images
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig, channels_last_ok
from fedpaper.blocks.models import build_model

torch.set_num_threads(1)

SMALL_RESNET = {"num_classes": 8, "widths": (4, 8)}  # its shortcut: a 1x1 stride-2 conv on 4 channels


def test_channels_last_rule_rules_out_the_small_strided_1x1_conv_only():
    ok, rule = channels_last_ok(build_model("small_resnet", **SMALL_RESNET))
    assert not ok and "1x1 stride-(2, 2)" in rule and "4 input channels" in rule and "body.4.downsample.0" in rule
    for name, kw in [("small_resnet", {"num_classes": 8, "widths": (8, 16)}), ("lenet", {}),
                     ("privlabels_cnn", {"widths": (8, 8, 16, 16), "hidden": 32})]:
        assert channels_last_ok(build_model(name, **kw)) == (True, "channels_last"), name


def _pools(shape=(3, 16, 16), classes=8):
    ds = synthetic_images(num_classes=classes, n_train=160, n_test=40, shape=shape, seed=0)
    return Pools.from_dataset(ds)


def _fed(pools, seed=0, clients=3):
    rows = np.array_split(np.random.default_rng(seed).permutation(len(pools.y_train)), clients)
    return Federation(rows, np.arange(len(pools.y_test)), seed=seed)


def _cfg(model, **kw):
    base = dict(model=model, optimizer="sgd", lr=0.05, momentum=0.9, batch_size=8, rounds=2)
    base.update(kw)
    return TrainConfig(**base)


CASES = {  # model, its kwargs, backend
    "small_resnet-loop": ("small_resnet", SMALL_RESNET, "auto"),
    "lenet-grouped": ("lenet", {"in_channels": 3, "image_size": 16, "num_classes": 8, "c1": 4, "c2": 6}, "grouped"),
    "privlabels_cnn-grouped": ("privlabels_cnn", {"in_channels": 3, "image_size": 16, "num_classes": 8,
                                                  "widths": (4, 4, 8, 8), "hidden": 16}, "grouped"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_two_identical_trainings_give_identical_parameters(case):
    """Determinism where it is promised: the same runs, trained twice in one process, end with the
    same parameters bit for bit (on every ISA: `make test` runs this under the AVX2 emulation too)."""
    model, kw, backend = CASES[case]
    pools = _pools()
    feds = [_fed(pools, s) for s in (0, 1)]
    a, b = (train(Method("FedAvg"), _cfg(model, model_kwargs=kw, backend=backend), pools, feds, progress=False)
            for _ in range(2))
    assert a.log["backend"] == ("loop" if model == "small_resnet" else "grouped")
    assert a.log["layout"].startswith("contiguous" if model == "small_resnet" else "channels_last")
    for k in a.final_params:
        assert torch.equal(a.final_params[k], b.final_params[k]), k


@pytest.mark.parametrize("method", ["FedAvg", "FedProx", "SCAFFOLD"])
def test_grouped_backend_skips_finished_slots_without_changing_a_bit(method, monkeypatch):
    """Clients of unequal size (12 to 60 images: most slots finish their epoch early): the grouped
    backend passes only the slots that still step, and the runs end with the same parameters and
    history bit for bit as when every slot is passed (two runs in one call, 1 and 2 of them
    finishing early; FedProx's anchor and SCAFFOLD's correction ride along)."""
    from fedpaper.engine import backends

    model, kw, _ = CASES["lenet-grouped"]
    pools = _pools()
    rng = np.random.default_rng(0)
    feds = []
    for seed, sizes in ((0, (60, 12, 30, 18)), (1, (24, 40, 12, 12))):
        perm = rng.permutation(len(pools.y_train))
        cuts = np.cumsum(sizes)[:-1]
        feds.append(Federation(np.split(perm[:sum(sizes)], cuts), np.arange(len(pools.y_test)), seed=seed))
    options = {"FedProx": {"client": "fedprox", "mu": 0.1}, "SCAFFOLD": {"client": "scaffold"}}.get(method, {})
    cfg = _cfg(model, model_kwargs=kw, backend="grouped", local_epochs=2, rounds=2)
    passed = []
    real = backends.GroupedBackend._grouped

    def spy(self, params, batch, *a, **k):
        passed.append(batch["x"].shape[0])
        return real(self, params, batch, *a, **k)

    monkeypatch.setattr(backends.GroupedBackend, "_grouped", spy)
    skip = train(Method(method, **options), cfg, pools, feds, progress=False)
    assert min(passed) < max(passed)  # finished slots were left out
    monkeypatch.setattr(backends.GroupedBackend, "_grouped_active",
                        lambda self, params, batch, present, anchor, objective, gens, active:
                        real(self, params, batch, present, anchor, objective, gens))
    full = train(Method(method, **options), cfg, pools, feds, progress=False)
    for k in full.final_params:
        assert torch.equal(skip.final_params[k], full.final_params[k]), k
    pd.testing.assert_frame_equal(skip.history.drop(columns=["seconds"], errors="ignore"),
                                  full.history.drop(columns=["seconds"], errors="ignore"))


def test_guarded_model_trains_under_the_avx2_kernels():
    """The regression test of the crash: a model with a 1x1 stride-2 conv on 4 channels trains
    twice under oneDNN's AVX2 kernels (a subprocess with ONEDNN_MAX_CPU_ISA=AVX2, whatever this
    process runs) to identical parameters, in the contiguous layout. Without the guard
    (channels_last) that process dies of heap corruption with one thread (with two it gives
    different parameters or dies; docs/onednn-avx2-1x1-stride2.md)."""
    code = textwrap.dedent("""
        import torch, numpy as np
        from fedpaper.algorithms import Method
        from fedpaper.blocks.data import synthetic_images
        from fedpaper.driver import train
        from fedpaper.engine import Federation, Pools, TrainConfig
        pools = Pools.from_dataset(synthetic_images(num_classes=8, n_train=160, n_test=40, shape=(3, 8, 8), seed=0))
        rows = np.array_split(np.arange(160), 4)
        cfg = TrainConfig(model="small_resnet", model_kwargs={"num_classes": 8, "widths": (4, 8)}, optimizer="sgd",
                          lr=0.05, batch_size=8, rounds=2)
        a, b = (train(Method("FedAvg"), cfg, pools, [Federation(rows, np.arange(40), seed=0)], progress=False)
                for _ in range(2))
        assert all(torch.equal(a.final_params[k], b.final_params[k]) for k in a.final_params), "differ"
        print("layout", a.log["layout"].split(":")[0])
    """)
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "OMP_NUM_THREADS": "1", "FEDPAPER_PROGRESS": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert "layout contiguous" in out.stdout


# ------------------------------------------------------------------ batch invariance
@pytest.fixture(scope="module")
def fedmt_smoke():
    from fedpaper.papers.fedmt import runs
    from fedpaper.papers.fedmt.profiles import settings

    p = settings("smoke")
    target = runs.spec(p, "FedMT (E)", 0, threshold=0.055, lambda2=1)
    mates = [runs.spec(p, "FedMT (E)", s, threshold=0.055, lambda2=1, n=n) for s, n in [(1, 4), (2, 2), (0, 2), (3, 4)]]
    return target, mates


@pytest.mark.parametrize("threads", [1, 2])
def test_a_run_gives_the_same_result_alone_and_in_any_group(fedmt_smoke, threads):
    """Batch invariance: a threshold-sensitive FedMT (E) run (smoke size; confidence threshold
    0.055 on 20 classes) trained alone, in a group of 2 (first) and in a group of 4 (last) has the
    same history, bit for bit, and the same final parameters, with 1 and with 2 threads."""
    from fedpaper.driver import train as engine_train
    from fedpaper.runs.experiment import get_pools

    target, mates = fedmt_smoke
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = []
        for group in ([target], [target, mates[0]], [mates[1], mates[2], mates[3], target]):
            setups = [s.build() for s in group]
            s0 = setups[0]
            assert s0.config.backend == "auto" and all(s.config == s0.config for s in setups)
            res = engine_train(s0.method, s0.config, get_pools(s0.pools_key), [s.federation for s in setups],
                               progress=False)
            r = group.index(target)
            out.append((res.history[res.history["run"] == r].drop(columns=["run"]).reset_index(drop=True),
                        {k: v[r] for k, v in res.final_params.items()}, res.log["backend"]))
    finally:
        torch.set_num_threads(old)
    (h0, p0, backend), rest = out[0], out[1:]
    assert backend == "grouped"
    assert 0 < h0["fix_clients_share"].iloc[-1] < 1 or h0["fix_rows_mean"].iloc[-1] > 0  # the threshold acts
    for h, p, _ in rest:
        pd.testing.assert_frame_equal(h, h0, check_exact=True)
        for k in p0:
            assert torch.equal(p[k], p0[k]), k


@pytest.mark.parametrize("backend,tuning", [("grouped", None), ("loop", None), ("grouped", "mse")])
def test_dropout_masks_do_not_depend_on_batch_mates(backend, tuning):
    """The privlabels CNN (dropout 0.5): a run trained alone and as the second of two runs ends
    with the same parameters, bit for bit: its dropout masks come from its own generator (in
    local training, and in central tuning on the server's rows)."""
    model, kw, _ = CASES["privlabels_cnn-grouped"]
    pools = _pools()
    cfg = _cfg(model, model_kwargs=kw, backend=backend)
    method = Method("FedAvg", tuning=tuning, tuning_epochs=1)

    def fed(seed):
        f = _fed(pools, seed)
        f.server_indices = np.arange(100, 132)
        return f

    alone = train(method, cfg, pools, [fed(1)], progress=False)
    pair = train(method, cfg, pools, [fed(0), fed(1)], progress=False)
    for k in alone.final_params:
        assert torch.equal(alone.final_params[k][0], pair.final_params[k][1]), k


# ------------------------------------------------------------------ the same on AVX2 and AVX-512
ISA_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_isa_reference.json"
ISA_TOL = 1e-5  # absolute, on parameters of size ~0.1-0.4; AVX2 vs AVX-512 measured 4.5e-8 (fedmt smoke, 2 rounds)


def _isa_summary(fedmt_target) -> dict:
    """The FedMT (E) smoke run (threshold-sensitive), 1 thread: each final tensor's size, sum, L2
    norm and first 6 values, and the per-round history."""
    from fedpaper.runs.experiment import get_pools

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        s = fedmt_target.build()
        res = train(s.method, s.config, get_pools(s.pools_key), [s.federation], progress=False)
    finally:
        torch.set_num_threads(old)
    params = {k: {"numel": v[0].numel(), "sum": float(v[0].double().sum()), "norm": float(v[0].double().norm()),
                  "head": [float(x) for x in v[0].flatten()[:6]]} for k, v in res.final_params.items()}
    hist = res.history.drop(columns=["run"]).to_dict("records")
    return {"machine": {"torch": torch.__version__.split("+")[0],
                        "cpu_capability": torch.backends.cpu.get_cpu_capability()}, "params": params, "history": hist}


def test_the_same_numbers_on_avx2_and_avx512(fedmt_smoke):
    """The FedMT (E) smoke run against a reference recorded on an AVX-512 CPU
    (tests/fixtures/cpu_isa_reference.json; regenerate: PYTHONPATH=$PWD python tests/engine/test_cpu.py):
    every parameter summary within ISA_TOL and the same history (accuracies, the threshold's
    counts). `make test` runs this under the AVX2 emulation as well."""
    ref = json.loads(ISA_FIXTURE.read_text())
    got = _isa_summary(fedmt_smoke[0])
    assert got["params"].keys() == ref["params"].keys()
    for k, r in ref["params"].items():
        g = got["params"][k]
        # every element within ISA_TOL bounds the sum's change by numel * ISA_TOL, the norm's by sqrt(numel) * ISA_TOL
        assert abs(g["sum"] - r["sum"]) <= ISA_TOL * r["numel"], k
        assert abs(g["norm"] - r["norm"]) <= ISA_TOL * r["numel"] ** 0.5, k
        assert np.allclose(g["head"], r["head"], rtol=0, atol=ISA_TOL), k
    for g, r in zip(got["history"], ref["history"], strict=True):
        for key in ("round", "test_acc", "fix_clients_share", "fix_rows_mean"):
            assert g[key] == r[key], (key, g, r)
        assert abs(g["train_loss"] - r["train_loss"]) <= 1e-4

@pytest.mark.parametrize("per_slot", ["none", "first", "features"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("channels", [1, 3])
def test_every_safe_width_gives_a_slot_the_same_gradient_bits(channels, threads, per_slot):
    """safe_width's promise, checked on this CPU (and under the AVX2 emulation in `make test`): a
    LeNet slot's weight gradients in a grouped pass are the same bits at every width safe_width
    gives for 1-9 slots, whatever its group mates. Under oneDNN's AVX2 kernels a pass of 3
    one-channel slots (3 input channels in all, the image first-layer kernel) summed differently;
    skipping finished slots (live subsets of every size) exposed it (tests/driver/test_diverge.py)."""
    from fedpaper.engine.backends import safe_width
    from fedpaper.engine.grouped import GroupedForward, stacked_layout

    model = build_model("lenet", in_channels=channels, image_size=16, num_classes=4, c1=4, c2=6)
    net = GroupedForward.build(model, (channels, 16, 16), per_slot)  # also with layers slot by slot (per_slot_rule)
    assert net is not None
    base = {k: v.detach() for k, v in model.named_parameters()}
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(8, channels, 16, 16, generator=g)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        seen = {}
        for n in range(1, 10):
            w = safe_width(n, threads, channels)
            assert w >= n and w % threads == 0
            mates = torch.Generator().manual_seed(n)
            x = torch.stack([x0] + [torch.randn(8, channels, 16, 16, generator=mates) for _ in range(w - 1)])
            p = {k: stacked_layout(torch.stack([v] + [v + 0.1 * torch.randn(v.shape, generator=mates)
                                                      for _ in range(w - 1)])).requires_grad_(True)
                 for k, v in base.items()}
            out = net(p, x)
            grads = torch.autograd.grad((out ** 2).sum(), list(p.values()))
            seen[w] = [gr[0].clone() for gr in grads]
    finally:
        torch.set_num_threads(old)
    ref = seen[min(seen)]
    for w, grads in seen.items():
        for name, a, b in zip(base, grads, ref):
            assert torch.equal(a, b), f"width {w}: slot 0's {name} gradient differs from width {min(seen)}"


if __name__ == "__main__":
    from fedpaper.papers.fedmt import runs
    from fedpaper.papers.fedmt.profiles import settings

    summary = _isa_summary(runs.spec(settings("smoke"), "FedMT (E)", 0, threshold=0.055, lambda2=1))
    ISA_FIXTURE.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    print(f"wrote {ISA_FIXTURE} on {summary['machine']}")



def test_fast_layout_gives_one_channel_tensors_channels_last_strides():
    """A contiguous [N, 1, H, W] tensor already passes is_contiguous(channels_last), so .contiguous()
    would keep its NCHW strides and the convolution would run (and hand on) NCHW: fast_layout must
    write channels_last strides, for images and for a first convolution's [O, 1, kh, kw] weight."""
    from fedpaper.engine.grouped import fast_layout
    x, w = torch.randn(4, 1, 8, 8), torch.randn(6, 1, 3, 3, requires_grad=True)
    xl, wl = fast_layout(x), fast_layout(w)
    assert xl.stride(1) == 1 and wl.stride(1) == 1 and torch.equal(xl, x) and torch.equal(wl, w)
    y = torch.nn.functional.conv2d(xl, wl, padding=1)
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    y.sum().backward()  # the gradient reaches the original weight
    assert w.grad is not None and w.grad.shape == w.shape
    three = torch.randn(4, 3, 8, 8)
    assert fast_layout(three).stride() == three.contiguous(memory_format=torch.channels_last).stride()


def test_loop_backend_gradients_are_torch_func_grads_bit_for_bit():
    """The loop backend (LoopBackend) takes each slot's gradients with torch.autograd.grad: the same bits
    as torch.func.grad of the slot's loss (dropout drawn from the same generator), zeros for an
    unused parameter."""
    from torch.func import grad
    from fedpaper.engine.backends import SlotGradients
    from fedpaper.engine.grouped import fast_layout

    model = build_model("privlabels_cnn", in_channels=1, image_size=28, widths=(4, 4, 8, 8), hidden=16)
    sg = SlotGradients(model, None, "loop")
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))

    def objective(out, batch, present, p, anchor):
        loss = torch.nn.functional.cross_entropy(out, batch["y"])
        return loss, loss.detach()
    batch = fast_layout({"x": x, "y": y})
    got = []
    for fn in (sg._slot_grad(objective), grad(lambda *a: sg._slot_loss(*a, objective), has_aux=True)):
        torch.manual_seed(3)
        got.append(fn(fast_layout(params), {}, batch, None, {}))
    for k in params:
        assert torch.equal(got[0][0][k], got[1][0][k]), k
    assert torch.equal(got[0][1], got[1][1])
    unused = sg._slot_grad(lambda out, b, pr, p, a: (p["classifier.bias"].sum(), out.sum()))
    g, _ = unused(params, {}, batch, None, {})
    assert torch.count_nonzero(g["features.0.weight"]) == 0 and torch.equal(g["classifier.bias"],
                                                                              torch.ones_like(params["classifier.bias"]))


def test_pool_before_relu_changes_no_bit_of_outputs_or_gradients():
    """GroupedForward runs a ReLU that precedes a max-pool after it (grouped.pool_before_relu): the
    outputs and every parameter gradient are the same bits as in the model's own order, also where
    whole pooling windows are negative (a shifted bias) and with ties (a rounded input)."""
    from fedpaper.engine.grouped import GroupedForward, stacked_layout

    model = build_model("lenet", in_channels=1, num_classes=10, image_size=28)
    net = GroupedForward.build(model, (1, 28, 28))
    assert [type(op[1]).__name__ for op in net.ops[:3]] == ["Conv2d", "MaxPool2d", "ReLU"]
    order = {id(m): i for i, m in enumerate(model.features)}  # the model's own order (the head last)
    plain = GroupedForward(sorted(net.ops[:-1], key=lambda op: order[id(op[1])]) + net.ops[-1:])
    assert [type(op[1]).__name__ for op in plain.ops[:3]] == ["Conv2d", "ReLU", "MaxPool2d"]
    gen = torch.Generator().manual_seed(0)
    base = {k: torch.stack([v.detach(), v.detach() * 0.5, v.detach() - 0.05]) for k, v in model.named_parameters()}
    base["features.0.bias"] = base["features.0.bias"] - 0.3  # many all-negative windows
    x = (torch.randn(3, 16, 1, 28, 28, generator=gen) * 4).round() / 4  # ties
    got = []
    for f in (net, plain):
        p = {k: stacked_layout(v.clone()).requires_grad_(True) for k, v in base.items()}
        out = f(p, x)
        got.append((out, torch.autograd.grad((out * torch.arange(10.0)).sum(), list(p.values()))))
    assert torch.equal(got[0][0], got[1][0])
    assert all(torch.equal(a, b) for a, b in zip(got[0][1], got[1][1]))
