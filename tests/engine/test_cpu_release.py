"""Memory the CPU engine gives back (issue 30): every engine call ends with the trainer's reference
cycles collected and glibc's free heap pages returned (cpu.release_freed_memory), and AdamW's
decoupled decay is applied tensor by tensor inside the Adam step (optim.opt_step(decay=...)),
bit for bit the step it replaced."""
import gc
import sys
import weakref

import numpy as np
import pytest
import torch

from fedpaper.algorithms import get_method
from fedpaper.engine import Federation, TrainConfig, cpu, optim
from fedpaper.driver import trainer as T
from fedpaper.runs.experiment import get_pools, pools_key_of

POOL = pools_key_of({"name": "synthetic-images", "options": dict(num_classes=4, n_train=80, n_test=20, seed=0)},
                    device="cpu")


def _old_adamw(spec, params, grads, state, lr, active):
    """The AdamW step as it was before: a decayed copy of every parameter, then Adam."""
    a = active.to(next(iter(params.values())).dtype)
    params = {k: p * (1 - lr * spec.weight_decay * optim._bcast(a, p)) for k, p in params.items()}
    return optim.opt_step(params, grads, state, "adam", lr, active, tuple(spec.betas))


@pytest.mark.parametrize("wd", [0.0, 0.01, 0.3])
def test_adamw_in_step_decay_is_bitwise_the_old_step(wd):
    g = torch.Generator().manual_seed(0)
    shapes = {"conv": (3, 4, 2, 3, 3), "fc": (3, 5, 4), "b": (3, 5)}
    spec = optim.OptimSpec("adamw", lr=3e-3, weight_decay=wd, betas=(0.9, 0.98))
    p_new = p_old = {k: torch.randn(s, generator=g) for k, s in shapes.items()}
    st_new = st_old = spec.init(p_new)
    for step in range(4):
        grads = {k: torch.randn(s, generator=g) for k, s in shapes.items()}
        active = torch.tensor([True, step % 2 == 0, False])
        p_new, st_new = spec.step(p_new, grads, st_new, 3e-3, active)
        p_old, st_old = _old_adamw(spec, p_old, grads, st_old, 3e-3, active)
        for k in shapes:
            assert torch.equal(p_new[k], p_old[k]) and torch.equal(st_new["m"][k], st_old["m"][k])
            assert torch.equal(st_new["v"][k], st_old["v"][k])
    assert torch.equal(p_new["fc"][2], p_old["fc"][2])  # the inactive slot kept its parameters


@pytest.mark.parametrize("kind,wd", [("adam", 0.0), ("adamw", 0.01), ("adam", 0.01)])
def test_a_consuming_step_is_the_same_step_and_frees_the_old_state(kind, wd):
    """consume=True (the trainer's steps): same parameters and moments, and the old moments and the
    gradients are dropped from the dicts passed in."""
    g = torch.Generator().manual_seed(1)
    shapes = {"conv": (2, 4, 2, 3, 3), "fc": (2, 5, 4)}
    spec = optim.OptimSpec(kind, lr=1e-2, weight_decay=wd, betas=(0.9, 0.98))
    p0 = {k: torch.randn(s, generator=g) for k, s in shapes.items()}
    st_a, st_b, p_a, p_b = spec.init(p0), spec.init(p0), p0, p0
    for step in range(3):
        grads = {k: torch.randn(s, generator=g) for k, s in shapes.items()}
        given_state, given_grads = st_b, dict(grads)
        p_a, st_a = spec.step(p_a, dict(grads), st_a, 1e-2, torch.tensor([True, step != 1]))
        p_b, st_b = spec.step(p_b, given_grads, st_b, 1e-2, torch.tensor([True, step != 1]), consume=True)
        for k in shapes:
            assert torch.equal(p_a[k], p_b[k]) and torch.equal(st_a["m"][k], st_b["m"][k])
            assert torch.equal(st_a["v"][k], st_b["v"][k])
        if kind == "adamw" or spec.plain:  # otherwise (adam + L2 decay, betas) the step makes a new gradient dict
            assert all(v is None for v in given_grads.values())
        assert all(v is None for key in ("m", "v") for v in given_state[key].values())


def test_release_collects_reference_cycles():
    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b
    gc.disable()  # only release_freed_memory may collect the cycle here
    try:
        cpu.release_freed_memory()
    finally:
        gc.enable()
    assert ref() is None


def test_a_large_step_engine_call_releases_and_frees_its_trainer(monkeypatch):
    """train() releases once per call with a large step (not with a small one), after the trainer (a
    reference cycle through its Context) is unreachable: by then the trainer is gone."""
    pools = get_pools(POOL)
    feds = [Federation([np.arange(0, 40), np.arange(40, 80)], np.arange(20), seed=0)]
    cfg = TrainConfig("lenet", dict(in_channels=1, image_size=28, num_classes=4), batch_size=16, rounds=1)
    made, alive_at_release = [], []
    init = T.FederatedTrainer.__init__

    def spy_init(self, *a, **k):
        made.append(weakref.ref(self))
        init(self, *a, **k)

    def spy_release():
        gc.collect()
        alive_at_release.append(made[-1]() is not None)

    monkeypatch.setattr(cpu, "LARGE_STEP_BYTES", 1)  # LeNet's step counts as large here: released
    monkeypatch.setattr(T.FederatedTrainer, "__init__", spy_init)
    monkeypatch.setattr(T, "release_freed_memory", spy_release)
    T.train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    assert alive_at_release == [False]
    monkeypatch.setattr(cpu, "LARGE_STEP_BYTES", 256 * 2**20)  # a small step: no release (speed)
    T.train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    assert alive_at_release == [False]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim")
def test_release_returns_freed_heap_pages_to_the_os():
    """With the engine's malloc thresholds (cpu._tune_cpu_allocator) freed tensors stay in the heap;
    release_freed_memory hands them back."""
    def rss():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))

    cpu._tune_cpu_allocator()
    if cpu._IN_FORCE != cpu.RAISED_THRESHOLDS:
        pytest.skip("allocator tuning switched off (FEDPAPER_MALLOC_TUNING=0)")
    keep = [torch.ones(1 << 20) for _ in range(96)]  # 96 x 4 MiB, from the heap
    del keep
    before = rss()
    cpu.release_freed_memory()
    assert before - rss() > 200 * 2**20


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("R,M,shape", [(1, 10, (64, 3, 7, 7)), (2, 10, (512,)), (3, 4, (8, 5, 3, 3)), (1, 2, ())])
def test_fedcurv_others_sum_is_bitwise_the_gathered_sum(R, M, shape, threads):
    from fedpaper.algorithms.fedcurv import others_sum

    g = torch.Generator().manual_seed(R * 100 + M)
    t = torch.rand((R, M, *shape), generator=g) * 10 ** torch.randint(-6, 3, (R, M, *shape), generator=g)
    slots = np.array([(r, c) for r in range(R) for c in range(M)])
    r, c = slots[:, 0], slots[:, 1]
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert torch.equal(others_sum(t, r, c), t[r].sum(1) - t[r, c])
        sub = slots[::2]  # partial participation: some clients of each run
        assert torch.equal(others_sum(t, sub[:, 0], sub[:, 1]), t[sub[:, 0]].sum(1) - t[sub[:, 0], sub[:, 1]])
    finally:
        torch.set_num_threads(old)


def test_every_step_gets_the_raised_malloc_thresholds_and_large_ones_are_released(monkeypatch):
    """Every engine call on Linux gets the raised thresholds, small (LeNet) and large (FedNCA-ML's
    224 px ResNet-18: ~670 MiB at batch 32) alike; from LARGE_STEP_BYTES a step counts as large (its
    engine call is followed by the release); FEDPAPER_MALLOC_TUNING=0 switches the tuning off."""
    from fedpaper.engine.memory import step_memory

    monkeypatch.delenv("FEDPAPER_MALLOC_TUNING", raising=False)
    lenet = step_memory(TrainConfig("lenet", dict(in_channels=1, image_size=28), batch_size=64), (1, 28, 28))
    linux = sys.platform.startswith("linux")
    assert cpu.allocator_tuned() is linux  # whatever the step's size
    assert not cpu.large_step(lenet.activations(64)) and not cpu.large_step(None)
    assert not cpu.large_step(cpu.LARGE_STEP_BYTES - 1) and cpu.large_step(cpu.LARGE_STEP_BYTES)
    assert cpu.large_step(21 * 2**20 * 32)  # FedNCA-ML paper profile, measured 21 MiB per sample
    monkeypatch.setenv("FEDPAPER_MALLOC_TUNING", "0")
    assert not cpu.allocator_tuned()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc thresholds")
def test_thresholds_follow_the_engine_call_and_are_set_only_when_they_change(monkeypatch):
    calls = []
    monkeypatch.delenv("FEDPAPER_MALLOC_TUNING", raising=False)
    monkeypatch.setattr(cpu, "_mallopt", lambda trim, mmap: calls.append((trim, mmap)) or True)
    monkeypatch.setattr(cpu, "_IN_FORCE", None)
    monkeypatch.setenv("FEDPAPER_MALLOC_TUNING", "0")
    cpu._tune_cpu_allocator()
    assert calls == [] and cpu._IN_FORCE is None  # switched off: nothing set
    monkeypatch.delenv("FEDPAPER_MALLOC_TUNING")
    cpu._tune_cpu_allocator()  # any step, large or small: its buffers come from the heap
    assert calls == [cpu.RAISED_THRESHOLDS] == [(1 << 30, 1 << 30)]
    for _ in range(3):
        cpu._tune_cpu_allocator()
    assert len(calls) == 1  # set once while in force
    cpu._tune_cpu_allocator(in_parts=True)  # clients in parts: buffers over 4 MiB mmapped
    cpu._tune_cpu_allocator(in_parts=True)
    assert calls[1:] == [cpu.PARTS_THRESHOLDS] == [(8 << 20, 4 << 20)]
    cpu._tune_cpu_allocator()
    assert calls[2:] == [cpu.RAISED_THRESHOLDS] and cpu._IN_FORCE == cpu.RAISED_THRESHOLDS


def test_an_engine_call_in_parts_or_of_a_large_model_counts_as_a_large_step(monkeypatch):
    """A call whose rounds train in parts (their stacked parameter copies exceed SLOT_BYTES: FedMT
    Fig. 2c's 80 ResNet-18 clients) or whose model has at least LARGE_PARAM_BYTES of parameters (a
    ResNet-18's 45 MB) counts as a large step (the release at its end), whatever its step's
    activations; only the call in parts gets PARTS_THRESHOLDS; the same small-model call in one part
    is neither."""
    import fedpaper.engine.memory as MEM

    pools = get_pools(POOL)
    feds = [Federation([np.arange(0, 40), np.arange(40, 80)], np.arange(20), seed=0)]
    cfg = TrainConfig("lenet", dict(in_channels=1, image_size=28, num_classes=4), batch_size=16, rounds=1)
    tuned, released = [], []
    sized = T.allocator_bytes  # the step size the release rule sees, recorded with the call's in_parts
    monkeypatch.setattr(T, "allocator_bytes", lambda *a: tuned.append([sized(*a)]) or tuned[-1][0])
    monkeypatch.setattr(T, "_tune_cpu_allocator", lambda in_parts: tuned[-1].append(in_parts))
    monkeypatch.setattr(T, "release_freed_memory", lambda: released.append(True))
    T.train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    assert not cpu.large_step(tuned[-1][0]) and not tuned[-1][1] and not released
    monkeypatch.setattr(MEM, "SLOT_BYTES", 1)  # the round's 2 clients train in parts of one
    T.train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    assert cpu.large_step(tuned[-1][0]) and tuned[-1][1] and released == [True]
    monkeypatch.setattr(MEM, "SLOT_BYTES", 4 * 2**30)
    monkeypatch.setattr(cpu, "LARGE_PARAM_BYTES", 1)  # LeNet counts as a large model here
    T.train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    assert cpu.large_step(tuned[-1][0]) and not tuned[-1][1] and released == [True, True]
