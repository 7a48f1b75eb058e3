"""Batched evaluation (issue 14): the models of several runs evaluated in one grouped pass give the
same logits as evaluating them model by model, and central tuning over runs in one grouped pass the
same parameters. Switched off by default (engine.evaluate.BATCHED_OVER_MODELS: measured no faster)."""
import numpy as np
import pytest
import torch

from fedpaper.algorithms import get_method
from fedpaper.blocks.data import synthetic_images
from fedpaper.driver import FederatedTrainer, train
from fedpaper.engine import Federation, GroupedForward, Pools, TrainConfig, evaluate, predict
from fedpaper.engine.grouped import stacked_layout
from fedpaper.blocks.models import build_model

_REAL = evaluate.predict_grouped
MODELS = {"lenet": dict(c1=4, c2=6), "privlabels_cnn": dict(widths=(4, 4, 8, 8), hidden=16)}


def _stacked(model, kw, G, shape):
    nets = []
    for g in range(G):
        torch.manual_seed(g)
        nets.append(dict(build_model(model, **kw).named_parameters()))
    return {k: stacked_layout(torch.stack([n[k].detach() for n in nets])) for k in nets[0]}


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("eval_batch", [7, 2048])
def test_grouped_predict_equals_model_by_model(model, eval_batch):
    shape = (3, 16, 16)
    kw = dict(MODELS[model], in_channels=3, image_size=16, num_classes=5)
    template = build_model(model, **kw)
    grouped = GroupedForward.build(template, shape)
    assert grouped is not None
    params = _stacked(model, kw, 4, shape)
    x = torch.randn(50, *shape)
    rng = np.random.default_rng(0)
    rows = [rng.choice(50, 30, replace=False), np.arange(0), rng.choice(50, 11, replace=False), np.arange(50)] * 3
    params = {k: torch.cat([v] * 3) for k, v in params.items()}  # 12 models: more than one chunk of GROUP_MODELS
    ref = predict(template, params, {}, x, rows, 5, eval_batch, "cpu")
    out = predict(template, params, {}, x, rows, 5, eval_batch, "cpu", grouped=grouped)
    assert [o.shape for o in out] == [r.shape for r in ref] == [(30, 5), (0, 5), (11, 5), (50, 5)] * 3
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert all(torch.equal(a.argmax(1), b.argmax(1)) for a, b in zip(out, ref))


@pytest.fixture
def batched(monkeypatch):
    monkeypatch.setattr(evaluate, "BATCHED_OVER_MODELS", True)


def test_batching_over_models_is_off_by_default():
    assert evaluate.BATCHED_OVER_MODELS is False  # measured no faster (benchmarks/results/eval.md)


def test_trainer_evaluates_grouped_models_as_the_loop_backend_does(batched, monkeypatch):
    ds = synthetic_images(num_classes=4, n_train=160, n_test=40, shape=(1, 16, 16), seed=0)
    pools = Pools.from_dataset(ds)
    feds = [Federation([np.arange(0, 30), np.arange(30, 50)], np.arange(5 * s, 40), val_indices=np.arange(120, 160),
                       seed=s) for s in (0, 1, 2)]  # test splits of different sizes
    cfg = dict(model="lenet", model_kwargs=dict(in_channels=1, image_size=16, num_classes=4, c1=4, c2=6), lr=0.05,
               batch_size=8, rounds=2)
    tr = FederatedTrainer(get_method("FedAvg"), TrainConfig(backend="grouped", **cfg), pools, feds, progress=False)
    tr.run()
    rows = [f.test_indices for f in feds]
    batched = tr.predict(tr.global_params, pools.x_test, rows)
    calls = []
    monkeypatch.setattr(evaluate, "predict_grouped", lambda *a, **k: calls.append(1) or _REAL(*a, **k))
    tr.predict(tr.global_params, pools.x_test, rows)
    assert calls  # the grouped path really ran
    tr.backend = "loop"  # the same models, evaluated model by model
    one_by_one = tr.predict(tr.global_params, pools.x_test, rows)
    for a, b in zip(batched, one_by_one):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    hist = train(get_method("FedAvg"), TrainConfig(backend="grouped", **cfg), pools, feds, progress=False).history
    assert list(hist.groupby("run").size()) == [2, 2, 2] and hist["test_acc"].notna().all()


@pytest.mark.parametrize("name", ["Tuning-MSE (private)", "Tuning-Pairwise"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_grouped_central_tuning_equals_the_loop_backend(name, precision, batched):
    """Central tuning over runs in one grouped pass (algorithms/tuning.py) against one run at a
    time: 2 runs, a server set of 100 rows at batch 16 (so the last tuning batch is partial)."""
    ds = synthetic_images(num_classes=10, n_train=600, n_test=50, shape=(1, 16, 16), seed=0)
    pools = Pools.from_dataset(ds)
    y = pools.y_train.numpy()
    feds = [Federation([np.flatnonzero(y < 5)[:60], np.flatnonzero(y >= 4)[:50]], np.arange(50),
                       server_indices=np.arange(400 + 50 * s, 500 + 50 * s), seed=s) for s in (0, 1)]
    cfg = dict(model="lenet", model_kwargs=dict(in_channels=1, image_size=16, num_classes=10, c1=4, c2=6),
               optimizer="adam", lr=1e-3, batch_size=16, rounds=1, precision=precision)
    out = {b: train(get_method(name), TrainConfig(backend=b, **cfg), pools, feds, progress=False).final_params
           for b in ("grouped", "loop")}
    tol = dict(rtol=1e-3, atol=1e-4) if precision == "fp32" else dict(rtol=2e-2, atol=2e-3)
    # Adam moves a weight whose gradient is ~0 by about +-lr per step whatever the gradient's size, so
    # summation-order noise can flip a few such steps (on an Intel Xeon with AMX, 8 of 200 first-layer
    # weights differed by up to 2.0e-3 = 2 steps of lr 1e-3 in fp32; session 14): every weight within
    # 3 steps, and at most 5 % of the weights beyond the tight tolerance.
    n_loose = n_all = 0
    for k in out["loop"]:
        g, l = out["grouped"][k], out["loop"][k]
        torch.testing.assert_close(g, l, rtol=tol["rtol"], atol=max(tol["atol"], 3 * cfg["lr"]))
        n_loose += int((~torch.isclose(g, l, **tol)).sum())
        n_all += g.numel()
    assert n_loose <= 0.05 * n_all, f"{n_loose} of {n_all} weights beyond {tol}"
    plain = train(get_method("FedAvg"), TrainConfig(backend="grouped", **cfg), pools, feds, progress=False)
    assert max((plain.final_params[k] - out["grouped"][k]).abs().max() for k in plain.final_params) > 1e-3  # tuned


def test_grouped_forward_is_refused_for_a_model_that_computes_something_else():
    """GroupedForward.build checks that its pass (features, then classifier) is the model's own
    function: a model of the same layers whose forward doubles the logits gets None (another
    backend), the plain one a grouped pass."""
    from torch import nn

    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten())
            self.classifier = nn.Linear(4 * 4 * 4, 3)

        def forward(self, x):
            return self.classifier(self.features(x))

    class Doubled(Plain):
        def forward(self, x):
            return 2.0 * self.classifier(self.features(x))

    torch.manual_seed(0)
    assert GroupedForward.build(Plain(), (3, 4, 4)) is not None
    assert GroupedForward.build(Doubled(), (3, 4, 4)) is None


def test_grouped_predict_of_models_without_rows_gives_empty_logits_of_k_columns():
    """Models with no rows to predict (all of them): empty logits [0, K], as model by model."""
    shape = (3, 16, 16)
    kw = dict(MODELS["lenet"], in_channels=3, image_size=16, num_classes=5)
    template = build_model("lenet", **kw)
    grouped = GroupedForward.build(template, shape)
    params = _stacked("lenet", kw, 2, shape)
    out = predict(template, params, {}, torch.randn(4, *shape), [np.arange(0), np.arange(0)], 5, 8, "cpu",
                  grouped=grouped)
    assert [o.shape for o in out] == [(0, 5), (0, 5)]
