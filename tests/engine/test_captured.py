"""The captured backend on the CPU: what can be checked without CUDA.

- The rule: `supports` is False off CUDA, asking for "captured" there trains with "vmap" (the rule
  says why), and "auto" never picks it.
- The step a CUDA graph would capture (CapturedBackend.eager_step, the learning rate a 0-d tensor as
  in the graph) equals the vmap backend's step: same parameters, optimiser state, BatchNorm
  statistics and loss sums after K steps. Stated tolerance on the CPU: bitwise (torch.equal).
- The replay plumbing (static inputs copied in, outputs copied out, one recording per shape
  signature, a failed recording falling back to the eager step) with the CUDA graph replaced by a
  recording that recomputes into the same output tensors: bitwise equal to the vmap backend too.
The captured graph itself is checked on CUDA in tests/test_gpu.py."""
import numpy as np
import pytest
import torch
from torch import nn

from fedpaper.algorithms import get_method
from fedpaper.algorithms.base import Objective
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig, epoch_batches
from fedpaper.engine.backends import BACKENDS, CapturedBackend, ModelFacts, VmapBackend, choose_backend
from fedpaper.engine.optim import OptimSpec

torch.set_num_threads(1)
K_STEPS = 2  # epochs of local steps in _steps


class BNNet(nn.Module):
    def __init__(self, classes=3, norm=True):
        super().__init__()
        bn = (lambda c: nn.BatchNorm2d(c)) if norm else (lambda c: nn.Identity())
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), bn(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                      nn.Flatten())
        self.classifier = nn.Linear(4, classes)

    def forward(self, x):
        return self.classifier(self.features(x))


def _setup(norm, sizes=(7, 5, 3), seed=0):
    torch.manual_seed(seed)
    net = BNNet(norm=norm)
    G = len(sizes)
    g = torch.Generator().manual_seed(seed)
    params = {k: torch.stack([v.detach() + 0.05 * torch.randn(v.shape, generator=g) for _ in range(G)])
              for k, v in net.named_parameters()}
    buffers = {k: torch.stack([v.detach().clone() for _ in range(G)]) for k, v in net.named_buffers()}
    x_pool, y_pool = torch.randn(sum(sizes), 3, 6, 6, generator=g), torch.randint(0, 3, (sum(sizes),), generator=g)
    starts = np.cumsum((0,) + sizes[:-1])
    rows = [np.arange(s, s + n) for s, n in zip(starts, sizes)]
    return net, params, buffers, x_pool, y_pool, rows


def _steps(backend, step, params, buffers, x_pool, y_pool, rows, optim, lr, corr=None, frozen=()):
    """K_STEPS epochs of `step` (a backend's step function) over padded batches of unequal slots."""
    G = len(rows)
    rngs = [np.random.default_rng(s) for s in range(G)]
    present = torch.ones(G, 3, dtype=torch.bool)
    anchor = {k: v.clone() for k, v in params.items()}
    opt, losses, objective = optim.init(params), [], Objective()  # one objective: a trainer's is fixed
    for _ in range(K_STEPS):
        idx, mask = epoch_batches(rows, 4, rngs)
        for s in range(idx.shape[1]):
            i, m = torch.as_tensor(idx[:, s]), torch.as_tensor(mask[:, s])
            batch = {"x": x_pool[i], "y": y_pool[i], "mask": m.float()}
            params, opt, lsum = step(params, opt, batch, present, anchor, objective, optim=optim, lr=lr,
                                     buffers=buffers, active=m.any(1), corr=corr, frozen=frozen)
            losses.append(lsum)
    return params, opt, buffers, torch.stack(losses)


def _equal(a, b):
    pa, oa, ba, la = a
    pb, ob, bb, lb = b
    for x, y in ((pa, pb), (ba, bb)):
        assert set(x) == set(y)
        for k in x:
            assert torch.equal(x[k], y[k]), k
    assert torch.equal(la, lb)
    fa, fb = torch.utils._pytree.tree_flatten(oa)[0], torch.utils._pytree.tree_flatten(ob)[0]
    assert len(fa) == len(fb) and all(torch.equal(x, y) for x, y in zip(fa, fb))


CASES = {  # name -> (BatchNorm, optimiser, correction, frozen)
    "batchnorm momentum": (True, OptimSpec("sgd", lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3), False, ()),
    "plain sgd, correction, frozen": (False, OptimSpec("sgd", lr=0.1), True, ("classifier.bias",)),
}


def _run_pair(case, make_captured):
    norm, optim, with_corr, frozen = CASES[case]
    out = []
    for which in ("vmap", "captured"):
        net, params, buffers, x_pool, y_pool, rows = _setup(norm)
        corr = {k: 0.01 * torch.ones_like(v) for k, v in params.items()} if with_corr else None
        if which == "vmap":
            step, lr = VmapBackend(net).step, 0.1
        else:
            be = make_captured(net)
            step, lr = be.step, 0.1
            out.append(be)
        out.append(_steps(which, step, params, buffers, x_pool, y_pool, rows, optim, lr, corr, frozen))
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_eager_step_equals_vmap_step(case):
    """The function the graph captures, with the learning rate as the graph's 0-d tensor."""
    norm, optim, with_corr, frozen = CASES[case]
    got = []
    for which in ("vmap", "eager"):
        net, params, buffers, x_pool, y_pool, rows = _setup(norm)
        corr = {k: 0.01 * torch.ones_like(v) for k, v in params.items()} if with_corr else None
        be = VmapBackend(net) if which == "vmap" else CapturedBackend(net)
        step = be.step if which == "vmap" else be.eager_step
        lr = 0.1 if which == "vmap" else torch.full((), 0.1)
        got.append(_steps(which, step, params, buffers, x_pool, y_pool, rows, optim, lr, corr, frozen))
    _equal(*got)
    if norm:  # the statistics moved: the check reads real state
        assert not torch.equal(got[0][2]["features.1.running_mean"], torch.zeros_like(got[0][2]["features.1.running_mean"]))


def _fake_record(self, run):
    """A CUDA graph's semantics on the CPU: the outputs are fixed tensors, replay() rewrites them
    from the static inputs."""
    result = run()
    flat = torch.utils._pytree.tree_flatten(result)[0]

    def replay():
        for o, n in zip(flat, torch.utils._pytree.tree_flatten(run())[0]):
            o.copy_(n)
    return replay, result


@pytest.mark.parametrize("case", list(CASES))
def test_replay_plumbing_equals_vmap_step(case, monkeypatch):
    monkeypatch.setattr(CapturedBackend, "_record", _fake_record)
    vm, be, cap = _run_pair(case, lambda net: CapturedBackend(net, capture=True))
    _equal(vm, cap)
    assert not be.fallbacks
    # one recording per shape signature: the slots' batches all have one shape here
    assert len(be.graphs) == 1


def test_a_failed_recording_runs_the_eager_step(monkeypatch):
    def broken(self, run):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(CapturedBackend, "_record", broken)
    vm, be, cap = _run_pair("batchnorm momentum", lambda net: CapturedBackend(net, capture=True))
    _equal(vm, cap)
    assert not be.graphs and any("capture failed: RuntimeError" in r for r in be.fallbacks.values())


def test_returned_tensors_do_not_alias_the_recording(monkeypatch):
    """A step's returned parameters stay as they were after later steps (copied out, not the
    recording's output tensors)."""
    monkeypatch.setattr(CapturedBackend, "_record", _fake_record)
    net, params, buffers, x_pool, y_pool, rows = _setup(True)
    be, optim = CapturedBackend(net, capture=True), OptimSpec("sgd", lr=0.1)
    G = len(rows)
    batch = {"x": x_pool[:G * 2].view(G, 2, 3, 6, 6), "y": y_pool[:G * 2].view(G, 2),
             "mask": torch.ones(G, 2)}
    present, opt, objective = torch.ones(G, 3, dtype=torch.bool), optim.init(params), Objective()
    p1, opt, _ = be.step(params, opt, batch, present, params, objective, optim=optim, lr=0.1, buffers=buffers)
    kept = {k: v.clone() for k, v in p1.items()}
    p2, _, _ = be.step(p1, opt, batch, present, params, objective, optim=optim, lr=0.1, buffers=buffers)
    assert len(be.graphs) == 1 and not torch.equal(p2["classifier.weight"], p1["classifier.weight"])
    assert all(torch.equal(p1[k], kept[k]) for k in p1)


def test_the_cpu_runs_the_eager_step():
    net = BNNet()
    assert "not CUDA" in CapturedBackend(net)._eager_rule(OptimSpec("sgd"))
    assert CapturedBackend(net, capture=True)._eager_rule(OptimSpec("adam", lr=1e-3)) is None
    assert CapturedBackend(net, capture=True)._eager_rule(OptimSpec("sgd", momentum=0.9)) is None


def test_rule_cpu_falls_back_and_auto_never_picks_captured():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    facts = ModelFacts("m", batchnorm=True)
    assert "captured" in BACKENDS
    assert not CapturedBackend.supports(facts, cpu, "fp32") and CapturedBackend.supports(facts, cuda, "fp32")
    backend, rule = choose_backend("captured", cpu, True, False, "m")
    assert backend == "vmap" and "not CUDA" in rule
    assert choose_backend("captured", cuda, False, True, "m") == ("captured", "requested")
    for bn in (True, False):
        for dev in (cpu, cuda):
            assert choose_backend("auto", dev, bn, not bn, "m")[0] != "captured"


def test_trainer_with_captured_on_cpu_trains_as_vmap():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (60,), generator=g)
    x = torch.randn(60, 3, 16, 16, generator=g) + y[:, None, None, None].float()
    pools = Pools(x[:50], y[:50], x[50:], y[50:], 3)
    feds = [Federation([np.arange(0, 12), np.arange(12, 30), np.arange(30, 50)], np.arange(10), seed=0)]
    res = {}
    for backend in ("vmap", "captured"):
        cfg = TrainConfig("lenet", dict(in_channels=3, image_size=16, num_classes=3, c1=4, c2=6), optimizer="sgd",
                          lr=0.05, momentum=0.9, batch_size=8, rounds=2, backend=backend)
        res[backend] = train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    assert res["captured"].log["backend"] == "vmap" and "captured asked for" in res["captured"].log["backend_rule"]
    for k, v in res["vmap"].final_params.items():
        assert torch.equal(res["captured"].final_params[k], v), k


@pytest.mark.parametrize("model,kwargs", [
    ("lenet", dict(in_channels=3, image_size=16, num_classes=3, c1=4, c2=6)),
    ("fednca_net", dict(num_classes=3, backbone="convnet", width=4, dim=8, norm="batch", heads=2, in_channels=3))],
    ids=["lenet", "batchnorm"])
def test_trainer_replaying_the_recording_equals_vmap(model, kwargs, monkeypatch):
    """The trainer driving the captured backend's replay path (the CUDA graph replaced by the CPU
    recording, `supports` forced): the runs end bitwise as with the vmap backend, BatchNorm
    statistics included, every step replayed (no eager fallback)."""
    from fedpaper.driver import FederatedTrainer

    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (60,), generator=g)
    x = torch.randn(60, 3, 16, 16, generator=g) + y[:, None, None, None].float()
    pools = Pools(x[:50], y[:50], x[50:], y[50:], 3)
    feds = [Federation([np.arange(0, 12), np.arange(12, 30), np.arange(30, 50)], np.arange(10), seed=s)
            for s in (0, 1)]
    res = {}
    for backend in ("vmap", "captured"):
        if backend == "captured":
            monkeypatch.setattr(CapturedBackend, "supports", classmethod(lambda cls, *a: True))
            monkeypatch.setattr(CapturedBackend, "_record", _fake_record)
            real_init = CapturedBackend.__init__
            monkeypatch.setattr(CapturedBackend, "__init__",
                                lambda self, *a, **k: real_init(self, *a, **{**k, "capture": True}))
        cfg = TrainConfig(model, kwargs, optimizer="sgd", lr=0.02, momentum=0.5, batch_size=8, rounds=2,
                          backend=backend)
        tr = FederatedTrainer(get_method("FedAvg"), cfg, pools, feds, progress=False)
        res[backend] = tr.run(), tr.global_buffers
        if backend == "captured":
            assert tr.backend == "captured" and tr.local.graphs and not tr.local.fallbacks, tr.local.fallbacks
    (vm, vm_bufs), (cap, cap_bufs) = res["vmap"], res["captured"]
    for k, v in vm.final_params.items():
        assert torch.equal(cap.final_params[k], v), k
    assert set(cap_bufs) == set(vm_bufs) and (model == "lenet" or vm_bufs)
    for k, v in vm_bufs.items():
        assert torch.equal(cap_bufs[k], v), k


def test_a_read_only_input_is_copied_again_only_when_it_changed(monkeypatch):
    """The anchor (the same tensors every step) is copied in once; changed in place (its version
    moves) it is copied again, and the step then equals the vmap backend's on the changed anchor."""
    monkeypatch.setattr(CapturedBackend, "_record", _fake_record)
    copied = []
    real_copy = torch._foreach_copy_
    monkeypatch.setattr(torch, "_foreach_copy_", lambda dst, src: copied.append(len(dst)) or real_copy(dst, src))
    net, params, buffers, x_pool, y_pool, rows = _setup(False)
    G, P = len(rows), len(params)
    batch = {"x": x_pool[:G * 2].view(G, 2, 3, 6, 6), "y": y_pool[:G * 2].view(G, 2), "mask": torch.ones(G, 2)}
    present, optim = torch.ones(G, 3, dtype=torch.bool), OptimSpec("sgd", lr=0.1)
    active = torch.tensor([True, False, True])
    anchor = {k: v.clone() for k, v in params.items()}
    from fedpaper.algorithms.fedprox import Penalty

    objective = Objective(parts=(Penalty("prox", 0.5),))  # FedProx's term reads the anchor
    be, vm = CapturedBackend(net, capture=True), VmapBackend(net)

    def both(p):
        a = be.step(p, {}, batch, present, anchor, objective, optim=optim, lr=0.1, active=active)[0]
        b = vm.step(p, {}, batch, present, anchor, objective, optim=optim, lr=0.1, active=active)[0]
        assert all(torch.equal(a[k], b[k]) for k in a)
        return a

    p1 = both(params)
    copied.clear()
    p2 = both(p1)
    n_in = copied[0]  # the first copy of the step is the copy-in
    copied.clear()
    for v in anchor.values():
        v.add_(0.25)
    both(p2)
    assert copied[0] == n_in + P  # the anchor's P tensors again


def test_bf16_eager_step_equals_vmap_step():
    """Under bf16 autocast (without its weight cache in the captured backend) the step is still the
    vmap backend's, bitwise, on the CPU."""
    optim = OptimSpec("sgd", lr=0.1, momentum=0.9)
    got = []
    for which in ("vmap", "captured"):
        net, params, buffers, x_pool, y_pool, rows = _setup(True)
        be = (VmapBackend if which == "vmap" else CapturedBackend)(net, precision="bf16")
        step = be.step if which == "vmap" else be.eager_step
        got.append(_steps(which, step, params, buffers, x_pool, y_pool, rows, optim, 0.1))
    _equal(*got)


#: Adam/AdamW: the captured step's adam_step against engine/optim.py's fused Adam, after K steps
ADAM_TOL = dict(atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("optim", [OptimSpec("adam", lr=1e-2), OptimSpec("adam", lr=1e-2, weight_decay=0.01),
                                   OptimSpec("adamw", lr=1e-2, weight_decay=0.01, betas=(0.9, 0.98))],
                         ids=["adam", "adam-l2", "adamw"])
def test_adam_eager_step_equals_vmap_step_within_tolerance(optim):
    """Adam in the step the graph captures (adam_step: every slot at once, inactive slots kept by
    torch.where) against the fused Adam of the vmap backend's step (active slots only): parameters,
    moments and loss sums within ADAM_TOL, step counts equal. Without BatchNorm: a bias before a
    BatchNorm layer has a gradient of pure rounding noise, which Adam scales to steps of about lr
    whose sign is the noise's, in either implementation (no tolerance compares those)."""
    got = []
    for which in ("vmap", "captured"):
        net, params, buffers, x_pool, y_pool, rows = _setup(False)
        be = (VmapBackend if which == "vmap" else CapturedBackend)(net)
        step = be.step if which == "vmap" else be.eager_step
        got.append(_steps(which, step, params, buffers, x_pool, y_pool, rows, optim, 1e-2))
    (pa, oa, ba, la), (pb, ob, bb, lb) = got
    for k in pa:
        torch.testing.assert_close(pb[k], pa[k], **ADAM_TOL)
        torch.testing.assert_close(ob["m"][k], oa["m"][k], **ADAM_TOL)
        torch.testing.assert_close(ob["v"][k], oa["v"][k], **ADAM_TOL)
    for k in ba:
        torch.testing.assert_close(bb[k], ba[k], **ADAM_TOL)
    torch.testing.assert_close(lb, la, **ADAM_TOL)
    assert torch.equal(ob["t"], oa["t"]) and oa["t"].min() < oa["t"].max()  # slots of unequal size: some idled


def test_adam_step_keeps_an_inactive_slot():
    from fedpaper.engine.backends.captured import adam_step

    p = {"w": torch.randn(3, 4)}
    state = {"m": {"w": torch.randn(3, 4)}, "v": {"w": torch.rand(3, 4)}, "t": torch.tensor([2.0, 0.0, 5.0])}
    g = {"w": torch.full((3, 4), float("nan"))}  # an idle slot's gradient may be anything
    g["w"][0] = 1.0
    new, st = adam_step(p, g, state, torch.tensor(0.1), torch.tensor([True, False, False]))
    assert torch.equal(new["w"][1:], p["w"][1:]) and torch.equal(st["m"]["w"][1:], state["m"]["w"][1:])
    assert torch.equal(st["t"], torch.tensor([3.0, 0.0, 5.0])) and not torch.equal(new["w"][0], p["w"][0])
