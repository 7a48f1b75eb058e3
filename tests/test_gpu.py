"""The engine and the artifacts on CUDA (issue #30 item 4). Tests marked `gpu` skip without a CUDA
device (tests/conftest.py prints why; CI has none); run them on a GPU machine with

    FEDPAPER_DATA=<data> python -m pytest -m gpu tests/test_gpu.py

Stated tolerance: with TF32 off (torch.backends.cuda.matmul.allow_tf32 / cudnn.allow_tf32 =
False), a run's final parameters on CUDA are within atol 1e-4 + rtol 1e-4 of the same run on the
CPU, and its per-round training losses within rtol 1e-4, for each backend (vmap, loop, grouped;
loop also with a BatchNorm model): float sums in another order, nothing else. The captured backend
(CUDA graphs of the vmap step) is within the same tolerance of the vmap backend on the same card,
and a run trained with it alone and in a group of two within it of each other; dropout inside its
graph draws fresh masks at each replay.

The unmarked tests at the end check on the CPU what the GPU tests rely on (the paper cut's
overrides are valid settings)."""
import json

import numpy as np
import pytest
import torch

from fedpaper.algorithms import get_method
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig
from fedpaper.blocks.data import synthetic_images
from fedpaper.blocks.partition import sparsity_partition

ATOL, RTOL = 1e-4, 1e-4

# fednca/table1 at the paper profile (ResNet-18 at 224 px, 10 clients, AdamW, the paper's metrics),
# cut to 1 round, 1 seed and a few composites per client
PAPER_CUT = {"rounds": 1,
             "data.cifar10.singles": {"train": 12, "val": 2, "test": 4},
             "data.cifar10.pairs": {"train": 1, "val": 1, "test": 1}}


@pytest.fixture
def no_tf32():
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _runs(device, backend, model="lenet", kwargs=None, dropout=False, lr=0.05, momentum=0.9):
    ds = synthetic_images(num_classes=4, n_train=240, n_test=60, shape=(3, 16, 16), seed=0)
    pools = Pools.from_dataset(ds, device=device)
    y = ds.y_train.numpy()
    feds = [Federation([np.asarray(c) for c in sparsity_partition(y, 3, 2, seed=s).client_indices],
                       np.arange(60), seed=s) for s in (0, 1)]
    kw = kwargs or dict(in_channels=3, image_size=16, num_classes=4)
    cfg = TrainConfig(model, kw, optimizer="sgd", lr=lr, momentum=momentum, batch_size=16, rounds=2, device=device,
                      backend=backend)
    return train(get_method("FedAvg"), cfg, pools, feds, progress=False)


def _agree(cpu, gpu):
    assert cpu.diverged == gpu.diverged == [None, None], "a diverged run tests no agreement: pick a stable setting"
    for k, v in cpu.final_params.items():
        torch.testing.assert_close(gpu.final_params[k], v, atol=ATOL, rtol=RTOL, msg=lambda m: f"{k}: {m}")
    np.testing.assert_allclose(gpu.history["train_loss"], cpu.history["train_loss"], rtol=RTOL)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["vmap", "loop", "grouped"])
def test_cpu_and_cuda_agree_per_backend(backend, no_tf32):
    cpu, gpu = _runs("cpu", backend), _runs("cuda", backend)
    assert gpu.log["backend"] == backend and gpu.final_params["classifier.weight"].device.type == "cpu"
    _agree(cpu, gpu)


BN_NET = dict(num_classes=4, backbone="convnet", width=4, dim=16, norm="batch", heads=2, in_channels=3)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["loop", "vmap"])
def test_cpu_and_cuda_agree_with_batchnorm(backend, no_tf32):
    """A BatchNorm model (running statistics per slot from its real rows: updated in place by the
    loop backend, returned by vmap). At the LeNet tests' lr 0.05 / momentum 0.9 this model's
    second run diverges in round 2 (loss 2,082 in round 1; seen on the H200 and the CPU alike), so
    it trains at lr 0.01 / momentum 0.5."""
    cpu = _runs("cpu", backend, "fednca_net", BN_NET, lr=0.01, momentum=0.5)
    gpu = _runs("cuda", backend, "fednca_net", BN_NET, lr=0.01, momentum=0.5)
    assert cpu.log["backend"] == gpu.log["backend"] == backend
    _agree(cpu, gpu)


@pytest.mark.gpu
def test_batchnorm_vmap_equals_loop_on_cuda(no_tf32):
    """On CUDA, auto trains a BatchNorm model with the vmap backend, and it agrees with the loop
    backend on the same card within the stated tolerance (final parameters, per-round training
    losses; test accuracy, which reads the averaged running statistics, within one of the 60 rows)."""
    loop = _runs("cuda", "loop", "fednca_net", BN_NET, lr=0.01, momentum=0.5)
    auto = _runs("cuda", "auto", "fednca_net", BN_NET, lr=0.01, momentum=0.5)
    assert (loop.log["backend"], auto.log["backend"]) == ("loop", "vmap")
    _agree(loop, auto)
    np.testing.assert_allclose(auto.history["test_acc"], loop.history["test_acc"], atol=1 / 60 + 1e-9)  # a row at most


@pytest.mark.gpu
def test_auto_picks_vmap_on_cuda_and_bf16_is_native():
    from fedpaper.engine.cpu import bf16_native, resolve_precision

    assert _runs("cuda", "auto").log["backend"] == "vmap"
    native, why = bf16_native("cuda")
    if native:
        assert resolve_precision("bf16", "cuda")[0] == "bf16"
        ds = synthetic_images(num_classes=4, n_train=120, n_test=30, shape=(3, 16, 16), seed=0)
        cfg = TrainConfig("lenet", dict(in_channels=3, image_size=16, num_classes=4), batch_size=16, rounds=1,
                          device="cuda", precision="bf16")
        res = train(get_method("FedAvg"), cfg, Pools.from_dataset(ds, device="cuda"),
                    [Federation([np.arange(60), np.arange(60, 120)], np.arange(30), seed=0)], progress=False)
        assert np.isfinite(res.history["train_loss"]).all()


@pytest.mark.gpu
@pytest.mark.parametrize("paper,name", [("fedpals", "table1"), ("privlabels", "tables"), ("fedmt", "main"),
                                        ("fednca", "table1"), ("fednca", "fig3_fig4")])
def test_smoke_artifact_runs_on_cuda(paper, name, monkeypatch, tmp_path, cache_tmp):
    import importlib

    from fedpaper.notebook import run

    monkeypatch.setenv("FEDPAPER_DEVICE", "cuda")
    fn = getattr(importlib.import_module(f"fedpaper.papers.{paper}"), name)
    res = run(fn, profile="smoke", out_dir=tmp_path)
    res = res[0] if isinstance(res, (list, tuple)) else res
    rec = json.loads(res.paths["json"].read_text())
    assert rec["profile"] == "smoke"


@pytest.mark.gpu
def test_paper_artifact_cut_runs_on_cuda(monkeypatch, tmp_path, cache_tmp):
    """fednca/table1 at the paper profile (ResNet-18 at 224 px from compact 64 px canvases), cut to
    PAPER_CUT; needs the CIFAR-10 copy (FEDPAPER_DATA)."""
    from fedpaper.blocks.data import dataset_available
    from fedpaper.notebook import run
    from fedpaper.papers.fednca import table1

    if not dataset_available("cifar10"):
        pytest.skip("CIFAR-10 not found: set FEDPAPER_DATA")
    monkeypatch.setenv("FEDPAPER_DEVICE", "cuda")
    res = run(table1, profile="paper", seeds=1, out_dir=tmp_path, overrides=PAPER_CUT)
    rec = json.loads(res.paths["json"].read_text())
    assert rec["profile"] == "paper" and rec["params"]["rounds"] == 1


def _captured_trainer(backend, seeds=(0, 1), model="lenet", kwargs=None, lr=0.05, momentum=0.9, optimizer="sgd"):
    """A trained FederatedTrainer on CUDA (the trainer, to read its backend object) and its result."""
    from fedpaper.driver import FederatedTrainer

    ds = synthetic_images(num_classes=4, n_train=240, n_test=60, shape=(3, 16, 16), seed=0)
    pools = Pools.from_dataset(ds, device="cuda")
    y = ds.y_train.numpy()
    feds = [Federation([np.asarray(c) for c in sparsity_partition(y, 3, 2, seed=s).client_indices],
                       np.arange(60), seed=s) for s in seeds]
    kw = kwargs or dict(in_channels=3, image_size=16, num_classes=4)
    cfg = TrainConfig(model, kw, optimizer=optimizer, lr=lr, momentum=momentum, batch_size=16, rounds=2,
                      device="cuda", backend=backend)
    tr = FederatedTrainer(get_method("FedAvg"), cfg, pools, feds, progress=False)
    return tr, tr.run()


@pytest.mark.gpu
@pytest.mark.parametrize("model,kwargs,lr,momentum,optimizer", [
    ("lenet", None, 0.05, 0.9, "sgd"), ("fednca_net", BN_NET, 0.01, 0.5, "sgd"), ("lenet", None, 1e-3, 0.0, "adam")],
    ids=["lenet", "batchnorm", "lenet-adam"])
def test_captured_equals_vmap_on_cuda(model, kwargs, lr, momentum, optimizer, no_tf32):
    """The captured backend (the vmap step replayed from CUDA graphs; Adam as its capturable
    adam_step) agrees with the vmap backend on the same card within the stated tolerance, and its
    steps were replayed, not run eagerly."""
    kw = dict(model=model, kwargs=kwargs, lr=lr, momentum=momentum, optimizer=optimizer)
    tr, cap = _captured_trainer("captured", **kw)
    assert cap.log["backend"] == "captured" and tr.local.graphs and not tr.local.fallbacks, tr.local.fallbacks
    _, vm = _captured_trainer("vmap", **kw)
    _agree(vm, cap)


@pytest.mark.gpu
def test_captured_is_batch_invariant_on_cuda(no_tf32):
    """A run trained alone and as the first of two runs with the captured backend ends within the
    stated tolerance (a group's slots are other graph shapes: other kernels, another rounding)."""
    _, alone = _captured_trainer("captured", seeds=(0,))
    _, pair = _captured_trainer("captured", seeds=(0, 1))
    for k, v in alone.final_params.items():
        torch.testing.assert_close(pair.final_params[k][0], v[0], atol=ATOL, rtol=RTOL, msg=lambda m: f"{k}: {m}")


@pytest.mark.gpu
def test_captured_dropout_draws_fresh_masks_at_each_replay():
    """Dropout inside the captured graph: two replays of the same step on the same inputs (lr 0:
    the parameters stay) give different loss sums (fresh masks), a run of the replay path, not an
    eager fallback."""
    from torch import nn

    from fedpaper.algorithms.base import Objective
    from fedpaper.engine.backends import CapturedBackend
    from fedpaper.engine.optim import OptimSpec

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Flatten(), nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.5))
            self.classifier = nn.Linear(32, 3)

        def forward(self, x):
            return self.classifier(self.features(x))

    torch.manual_seed(0)
    net = Net().cuda()
    G, B = 4, 8
    params = {k: v.detach().unsqueeze(0).repeat(G, *[1] * v.dim()).contiguous() for k, v in net.named_parameters()}
    batch = {"x": torch.randn(G, B, 3, 2, 2, device="cuda"), "y": torch.randint(0, 3, (G, B), device="cuda"),
             "mask": torch.ones(G, B, device="cuda")}
    present = torch.ones(G, 3, dtype=torch.bool, device="cuda")
    be, optim, objective = CapturedBackend(net, device="cuda"), OptimSpec("sgd", lr=0.0), Objective()
    losses = []
    for _ in range(3):
        _, _, lsum = be.step(params, optim.init(params), batch, present, params, objective, optim=optim, lr=0.0)
        losses.append(lsum)
    assert len(be.graphs) == 1 and not be.fallbacks, be.fallbacks
    assert not torch.equal(losses[1], losses[2]) and torch.isfinite(torch.stack(losses)).all()


# ----------------------------------------------------------------------------- on the CPU
def test_paper_cut_overrides_are_valid_settings():
    from fedpaper.papers.fednca.profiles import settings
    from fedpaper.outputs.parameters import apply_overrides

    p = apply_overrides(settings("paper"), PAPER_CUT)
    assert p["rounds"] == 1 and p["data"]["cifar10"]["singles"]["train"] == 12
    assert p["data"]["cifar10"]["input_size"] == 224 and p["model"]["backbone"] == "resnet18"
