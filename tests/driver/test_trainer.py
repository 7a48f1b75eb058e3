"""The batched engine against the sequential reference, and the algorithms' defining properties."""
import numpy as np
import pytest
import torch

from fedpaper.algorithms import algorithm_of, Method, get_method, semisup, standard_methods
from fedpaper.algorithms.privlabels import restrict_classifier
from fedpaper.algorithms.tuning import tuning_loss
from fedpaper.blocks.data import synthetic_images
from fedpaper.driver import FederatedTrainer, train
from fedpaper.engine import Federation, Pools, TrainConfig
from fedpaper.driver.sequential import train_sequential
from fedpaper.ground.errors import BadParameterError, UnknownNameError
from fedpaper.blocks.partition import private_label_partition, sparsity_partition

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def pools():
    ds = synthetic_images(num_classes=10, n_train=1200, n_test=300, shape=(1, 28, 28), seed=0)
    return Pools.from_dataset(ds)


def _feds(pools, seeds=(0, 1), C=3, clients=4):
    y = pools.y_train.numpy()
    out = []
    for s in seeds:
        part = sparsity_partition(y, clients, C, seed=s)
        clients_idx = [np.asarray(ix)[: len(ix) - 7 * i] for i, ix in enumerate(part.client_indices)]
        out.append(Federation(clients_idx, np.arange(300),
                              val_indices=np.arange(100), target_marginal=np.full(10, 0.1), seed=s))
    return out


def _cfg(**kw):
    base = dict(model="lenet", model_kwargs=dict(in_channels=1, image_size=28), optimizer="sgd", lr=0.05,
                batch_size=16, rounds=2)
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture
def pools64(pools):
    """The same pools in float64, with torch's default dtype float64 for the test (models built in
    float64), restored afterwards."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield Pools(pools.x_train[:].double(), pools.y_train, pools.x_test[:].double(), pools.y_test, pools.num_classes)
    torch.set_default_dtype(old)


@pytest.mark.parametrize("name", ["FedAvg", "FedProx", "SCAFFOLD", "FedAvg+l2"])
@pytest.mark.parametrize("backend", ["vmap", "loop", "grouped"])
def test_batched_equals_sequential(pools64, name, backend):
    """Every backend gives the same parameters after training (clients of unequal sizes: masking);
    the "l2" penalty against the sequential reference's optimiser weight_decay. In float64, so float32
    rounding (amplified over rounds: FedProx used 96% of a 1e-4 tolerance at 2 rounds on one CPU) cannot
    decide the outcome; what remains is the engine's float32 aggregation weights, ~4e-8 relative at
    2-3 rounds, hence rtol 1e-6."""
    pools = pools64
    feds = _feds(pools)
    method = {"FedProx": lambda: get_method(name, mu=0.1),
              "FedAvg+l2": lambda: Method(name, penalties=("l2",), weight_decay=0.05)}.get(name, lambda: get_method(name))()
    cfg = _cfg(backend=backend)
    assert len({len(c) for c in feds[0].client_indices}) > 1  # unequal sizes exercise the masks
    res = train(method, cfg, pools, feds, progress=False)
    for r, fed in enumerate(feds):
        ref = train_sequential(method, cfg, pools, fed)
        for k, v in ref.items():
            assert res.final_params[k].dtype == torch.float64
            torch.testing.assert_close(res.final_params[k][r], v, rtol=1e-6, atol=1e-7)


def test_adam_matches_torch_adam(pools):
    feds = _feds(pools, seeds=(3,))
    cfg = _cfg(optimizer="adam", lr=1e-3, backend="vmap")
    res = train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    ref = train_sequential(get_method("FedAvg"), cfg, pools, feds[0])
    # Adam divides by sqrt(v): where a gradient is ~0, float noise can move a weight by up to
    # ~lr per step, so compare at a fraction of the learning rate, and nearly all elements tightly.
    for k, v in ref.items():
        torch.testing.assert_close(res.final_params[k][0], v, rtol=1e-3, atol=3e-4)
        assert (res.final_params[k][0] - v).abs().le(1e-5).float().mean() > 0.99


def test_private_update_ignores_rows_outside_label_set(pools):
    """privlabels Alg. 1: a client's update cannot depend on classifier rows it does not hold."""
    y = pools.y_train.numpy()
    part = private_label_partition(y, 3, 3, samples_per_client=200, seed=0)
    fed = Federation([np.asarray(i) for i in part.client_indices], np.arange(300), seed=0)
    outs = []
    for perturb in (False, True):
        tr = FederatedTrainer(get_method("FedAvg (private)"), _cfg(rounds=1, backend="loop"), pools, [fed],
                              progress=False)
        if perturb:
            w = tr.global_params[tr.cls_w]
            absent = ~tr.present[0].any(0)  # rows held by no client
            held0 = tr.present[0, 0]
            w[0, ~held0] += 5.0  # change every row client 0 does not hold
            assert (~held0).any() and absent.numel()
        slots = np.array([(0, c) for c in range(3)])
        params = restrict_classifier(tr.ctx, {k: v[slots[:, 0]].clone() for k, v in tr.global_params.items()}, slots)
        new, *_ = tr.local_train(1, params, slots, [np.random.default_rng(1)] * 3)
        outs.append({k: v[0] for k, v in new.items()})
    held0 = tr.present[0, 0]
    for k in outs[0]:
        a, b = outs[0][k], outs[1][k]
        if k == tr.cls_w:
            a, b = a[held0], b[held0]
        if k == tr.cls_b:
            a, b = a[held0], b[held0]
        torch.testing.assert_close(a, b)


def test_private_fedavg_equals_fedavg_with_all_labels(pools):
    feds = _feds(pools, seeds=(0,), C=10)
    cfg = _cfg(backend="vmap")
    a = train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    b = train(get_method("FedAvg (private)"), cfg, pools, feds, progress=False)
    for k in a.final_params:
        torch.testing.assert_close(a.final_params[k], b.final_params[k], rtol=1e-4, atol=1e-5)


def test_fedpals_with_huge_lambda_equals_fedavg(pools):
    feds = _feds(pools, seeds=(0,))
    cfg = _cfg(backend="vmap", rounds=1)
    a = train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    b = train(get_method("FedPALS", lam=1e9), cfg, pools, feds, progress=False)
    for k in a.final_params:
        torch.testing.assert_close(a.final_params[k], b.final_params[k], rtol=1e-3, atol=1e-4)


def test_short_run_learns(pools):
    feds = _feds(pools, seeds=(0,), C=10, clients=3)
    res = train(get_method("FedAvg"), _cfg(rounds=4, lr=0.05), pools, feds, progress=False)
    assert res.history["test_acc"].iloc[-1] > 0.5  # chance is 0.1
    best = res.best()
    assert list(best.columns) == ["run", "seed", "best_round", "test_acc"]
    h = res.history.sort_values("round")
    peak = h.loc[h["val_acc"] == h["val_acc"].max()].iloc[0]  # the earliest round where val peaks
    assert best[["best_round", "test_acc"]].values.tolist() == [[peak["round"], peak["test_acc"]]]


@pytest.mark.parametrize("name", ["Tuning-MSE (private)", "Tuning-Pairwise", "AFL", "FedRS", "FedProx (private)"])
def test_other_methods_run_and_backends_agree(pools, name):
    feds = _feds(pools, seeds=(0,))
    for f in feds:
        f.server_indices = np.arange(1000, 1100)
    cfg = _cfg(rounds=1, optimizer="adam", lr=1e-3)
    a = train(get_method(name), cfg.__class__(**{**cfg.__dict__, "backend": "vmap"}), pools, feds, progress=False)
    b = train(get_method(name), cfg.__class__(**{**cfg.__dict__, "backend": "loop"}), pools, feds, progress=False)
    for k in a.final_params:
        torch.testing.assert_close(a.final_params[k], b.final_params[k], rtol=1e-3, atol=1e-4)


def test_partial_participation_trains_a_fraction(pools):
    feds = _feds(pools, seeds=(0,), clients=10, C=2)
    tr = FederatedTrainer(get_method("FedAvg"), _cfg(participation=0.3, rounds=1), pools, feds, progress=False)
    part = tr._participants([np.random.default_rng(0)])
    assert part.shape == (1, 3) and len(set(part[0])) == 3


def test_tuning_losses():
    """eq. 6 and eq. 5 vanish when the central model equals the client; the all-pairs variant
    (App B) penalises probability on a label no client holds, eq. 5 does not."""
    present = torch.tensor([[True, True, False]])
    h_k = torch.tensor([[[0.6, 0.4, 0.0]]])
    w = torch.tensor([1.0])
    same = torch.tensor([[0.6, 0.4, 0.0]])
    assert tuning_loss(same, h_k, w, present, "mse") < 1e-12
    assert tuning_loss(same, h_k, w, present, "pairwise") < 1e-12
    scaled = torch.tensor([[0.3, 0.2, 0.5]])  # proportional on Y_k, mass on the absent label
    assert tuning_loss(scaled, h_k, w, present, "pairwise") < 1e-12
    assert tuning_loss(scaled, h_k, w, present, "pairwise_all") > 0.01
    assert tuning_loss(scaled, h_k, w, present, "mse") > 0.01


def test_private_with_scaffold_is_refused():
    with pytest.raises(Exception, match="private"):
        Method("x", client="scaffold", private=True)


def test_batchnorm_model_keeps_per_client_statistics_and_averages_them():
    """ResNet-18 (BatchNorm) runs on the loop path; running statistics are per client, then averaged."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 3, 8, 8, generator=g)
    y = torch.randint(0, 4, (24,), generator=g)
    pools = Pools.from_arrays(x, y, x[:8], y[:8], 4)
    fed = Federation([np.arange(0, 8), np.arange(8, 24)], np.arange(8), seed=0)
    cfg = TrainConfig(model="resnet18_cifar", model_kwargs=dict(num_classes=4), optimizer="sgd", lr=0.01,
                      batch_size=8, rounds=1)
    tr = FederatedTrainer(get_method("FedAvg"), cfg, pools, [fed], progress=False)
    assert tr.backend == "loop"
    before = tr.global_buffers["bn1.running_mean"].clone()
    tr.run()
    after = tr.global_buffers["bn1.running_mean"]
    assert not torch.allclose(before, after)


def test_multilabel_bce_trains_and_reports_auc():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 1, 28, 28, generator=g)
    y = (torch.rand(64, 5, generator=g) < 0.3).float()
    y[:, 0] = (x.mean((1, 2, 3)) > 0).float()  # one learnable label
    pools = Pools.from_arrays(x, y, x, y, 5)
    fed = Federation([np.arange(32), np.arange(32, 64)], np.arange(64), seed=0)
    cfg = _cfg(model_kwargs=dict(in_channels=1, image_size=28, num_classes=5), rounds=2)
    res = train(get_method("FedAvg"), cfg, pools, [fed], progress=False)
    assert {"test_acc", "test_f1", "test_auc"} <= set(res.history.columns)
    # the values are those of the final global model on the test rows (sklearn as the reference)
    from sklearn.metrics import f1_score, roc_auc_score

    from fedpaper.blocks.models import build_model

    net = build_model(cfg.model, **cfg.model_kwargs)
    net.load_state_dict({k: v[0] for k, v in res.final_params.items()})
    with torch.no_grad():
        sc = net.eval()(x).numpy()
    yt = y.numpy().astype(int)
    last = res.history.sort_values("round").iloc[-1]
    assert last["test_acc"] == pytest.approx(((sc > 0) == (yt == 1)).mean(), abs=1e-6)
    assert last["test_f1"] == pytest.approx(f1_score(yt, (sc > 0).astype(int), average="macro"), abs=1e-6)
    assert last["test_auc"] == pytest.approx(roc_auc_score(yt, sc, average="macro"), abs=1e-6)


# ----------------------------------------------------------------------------- extension points
def test_a_method_is_its_parts_and_its_spec_builds_it_again():
    """A Method is a way of writing an Algorithm: the run's key is the algorithm's spec (parts with
    their constructor arguments, in order), and algorithms.parts.algorithm_of builds it back."""
    for m in standard_methods().values():
        a = m.algorithm()
        assert algorithm_of(a.spec()) == a and algorithm_of(a.spec()).spec() == a.spec()
        assert [type(p) for p in algorithm_of(a.spec()).parts] == [type(p) for p in a.parts]
    m = Method("x", client="fedprox", mu=0.3, penalties=["l2"], weight_decay=1e-3)
    assert m.penalties == ("l2",)
    assert m.algorithm().spec()["parts"] == [["Penalty", {"name": "prox", "coef": 0.3, "skip_classifier": False}],
                                             ["Penalty", {"name": "l2", "coef": 1e-3, "skip_classifier": False}],
                                             ["FedAvgWeights", {}]]
    assert m.algorithm() != Method("x", client="fedprox", mu=0.31, penalties=["l2"], weight_decay=1e-3).algorithm()


@pytest.mark.parametrize("kw, match", [(dict(penalties=("fedcurv",)), "unknown penalty"),
                                       (dict(weight_decay=-1.0), "weight_decay"),
                                       (dict(client="fedprox", penalties=("prox",)), "twice"),
                                       (dict(mixup_alpha=-0.5), "mixup_alpha"),
                                       (dict(pseudo_label_threshold=0.0), r"\(0, 1\]"),
                                       (dict(pseudo_label_threshold=1.5), r"\(0, 1\]"),
                                       (dict(pseudo_label_weight=-1.0), "pseudo_label_weight"),
                                       (dict(pseudo_label_threshold=0.9, private=True), "private"),
                                       (dict(server_train_epochs=-1), "server_train_epochs"),
                                       (dict(server_train_epochs=0.5), "server_train_epochs")])
def test_bad_extension_values_are_refused(kw, match):
    with pytest.raises((BadParameterError, UnknownNameError), match=match):
        Method("x", **kw)


def _step_grads(tr, method, params, anchor, seed=0):
    g = torch.Generator().manual_seed(seed)
    G, B = next(iter(params.values())).shape[0], 8
    idx = torch.randint(0, len(tr.pools.y_train), (G, B), generator=g)
    mask = torch.ones(G, B)
    mask[0, 5:] = 0
    batch = {"x": tr.pools.x_train[idx], "y": tr.pools.y_train[idx], "mask": mask}
    return tr._grads(params, batch, tr.present[0, :G], anchor, method)[0]


@pytest.mark.parametrize("backend", ["vmap", "loop", "grouped"])
@pytest.mark.parametrize("private", [False, True])
def test_penalty_gradients_are_analytic(pools, backend, private):
    """d/dw [mu/2 ||w - w_t||^2 + wd/2 ||w||^2] = mu (w - w_t) + wd w; no prox term on the
    classifier with private label sets (privlabels Sec 4.1)."""
    feds = _feds(pools, seeds=(0,))
    tr = FederatedTrainer(get_method("FedAvg"), _cfg(backend=backend), pools, feds, progress=False)
    params = {k: torch.stack([v[0], v[0] * 0.9, v[0] + 0.01]) for k, v in tr.global_params.items()}
    anchor = {k: v + 0.1 * torch.randn_like(v) for k, v in params.items()}
    plain = Method("plain", private=private)
    reg = Method("reg", client="fedprox", mu=0.3, penalties=("l2",), weight_decay=0.2, private=private)
    g0, g1 = _step_grads(tr, plain, params, anchor), _step_grads(tr, reg, params, anchor)
    for k in params:
        mu = 0.0 if private and k in (tr.cls_w, tr.cls_b) else 0.3
        want = mu * (params[k] - anchor[k]) + 0.2 * params[k]
        torch.testing.assert_close(g1[k] - g0[k], want, rtol=1e-4, atol=1e-5)


def test_mixup_off_and_at_lambda_one_is_plain_training(pools, monkeypatch):
    """mixup_alpha=0 is FedAvg; so is mixup with lambda fixed at 1 (x and the loss unmixed)."""
    feds = _feds(pools, seeds=(0, 1))
    cfg = _cfg(backend="vmap")
    plain = train(get_method("FedAvg"), cfg, pools, feds, progress=False).final_params
    off = train(Method("FedAvg", mixup_alpha=0.0), cfg, pools, feds, progress=False).final_params
    monkeypatch.setattr(semisup, "draw_lambda", lambda rng, alpha: 1.0)
    for backend in ("vmap", "loop", "grouped"):
        one = train(Method("mix", mixup_alpha=0.75), _cfg(backend=backend), pools, feds, progress=False).final_params
        for k in plain:
            assert torch.equal(off[k], plain[k])
            torch.testing.assert_close(one[k], plain[k], rtol=1e-5, atol=1e-6)


def test_mixup_mixes_real_rows_only():
    rng = np.random.default_rng(0)
    x = torch.arange(2 * 6, dtype=torch.float32).view(2, 6, 1)
    y = torch.arange(2 * 6).view(2, 6)
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=bool)
    out = semisup.mixup(x, y, mask, 0.75, [rng, rng])
    assert sorted(out["y2"][0, :4].tolist()) == [0, 1, 2, 3] and out["y2"][0, 4:].tolist() == [4, 5]
    lam = out["lam"].view(2, 1, 1)
    y2 = out["y2"].unsqueeze(-1).float()
    torch.testing.assert_close(out["x"], lam * x + (1 - lam) * y2)  # here x equals the row's label


@pytest.mark.parametrize("backend", ["vmap", "grouped"])
def test_short_run_with_mixup_learns(pools, backend):
    feds = _feds(pools, seeds=(0,), C=10, clients=3)
    res = train(Method("mix", mixup_alpha=0.75), _cfg(rounds=4, backend=backend), pools, feds, progress=False)
    assert res.history["test_acc"].iloc[-1] > 0.5  # chance is 0.1


def _semi_feds(pools, seeds=(0,)):
    """Each client keeps the first 60% of its rows labelled and the rest unlabeled."""
    out = []
    for f in _feds(pools, seeds=seeds):
        cut = [int(0.6 * len(c)) for c in f.client_indices]
        out.append(Federation([c[:k] for c, k in zip(f.client_indices, cut)], f.test_indices, seed=f.seed,
                              client_unlabeled_indices=[c[k:] for c, k in zip(f.client_indices, cut)],
                              server_indices=np.arange(1000, 1100)))
    return out


def test_pseudo_labels_never_read_the_unlabeled_rows_labels(pools):
    feds = _semi_feds(pools)
    method, cfg = Method("pl", pseudo_label_threshold=0.12), _cfg(rounds=3, backend="vmap")
    unl = np.concatenate(feds[0].client_unlabeled_indices)
    y = pools.y_train.clone()
    y[unl] = y[unl][torch.randperm(len(unl), generator=torch.Generator().manual_seed(0))]
    assert (y != pools.y_train).any()
    shuffled = Pools(pools.x_train, y, pools.x_test, pools.y_test, pools.num_classes)
    a = train(method, cfg, pools, feds, progress=False).final_params
    b = train(method, cfg, shuffled, feds, progress=False).final_params
    plain = train(get_method("FedAvg"), cfg, pools, feds, progress=False).final_params
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert max((a[k] - plain[k]).abs().max() for k in a) > 1e-3  # rounds 2-3 keep pseudo-labels: a real change


@pytest.mark.parametrize("backend", ["vmap", "loop", "grouped"])
def test_pseudo_labels_at_threshold_one_are_plain_training(pools, backend):
    """No prediction reaches confidence 1.0 here, so nothing is kept: the FedAvg update (SGD)."""
    feds = _semi_feds(pools)
    cfg = _cfg(backend=backend)
    a = train(Method("pl", pseudo_label_threshold=1.0), cfg, pools, feds, progress=False).final_params
    b = train(get_method("FedAvg"), cfg, pools, feds, progress=False).final_params
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5)


def test_pseudo_label_rule():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1], [0.4, 0.5, 0.1]]))
    y_hat, keep = semisup.pseudo_labels(logits, 0.6)
    assert y_hat.tolist() == [0, 1] and keep.tolist() == [True, False]


def test_extensions_agree_across_backends(pools):
    feds = _semi_feds(pools)
    m = Method("all", mixup_alpha=0.75, pseudo_label_threshold=0.11, penalties=("l2",), weight_decay=0.01,
               server_train_epochs=1)
    out = [train(m, _cfg(backend=b), pools, feds, progress=False).final_params for b in ("vmap", "loop", "grouped")]
    for o in out[1:]:
        for k in o:
            torch.testing.assert_close(o[k], out[0][k], rtol=1e-4, atol=1e-5)


def test_pseudo_labels_need_unlabeled_rows(pools):
    with pytest.raises(BadParameterError, match="client_unlabeled_indices"):
        FederatedTrainer(Method("pl", pseudo_label_threshold=0.9), _cfg(), pools, _feds(pools, seeds=(0,)), progress=False)


def test_server_training_off_and_on(pools):
    feds = _semi_feds(pools)
    cfg = _cfg(rounds=1, backend="vmap")
    plain = train(get_method("FedAvg"), cfg, pools, feds, progress=False).final_params
    off = train(Method("FedAvg", server_train_epochs=0), cfg, pools, feds, progress=False).final_params
    on = train(Method("st", server_train_epochs=1), cfg, pools, feds, progress=False).final_params
    assert all(torch.equal(off[k], plain[k]) for k in plain)
    assert max((on[k] - plain[k]).abs().max() for k in plain) > 1e-3
    with pytest.raises(BadParameterError, match="server_indices"):
        FederatedTrainer(Method("st", server_train_epochs=1), cfg, pools, _feds(pools, seeds=(0,)), progress=False)


def test_server_training_teaches_a_class_only_the_server_holds(pools):
    """FedMT's setting in miniature: no client holds class 0, the server has 20 labelled images of
    each class; training on them each round gives the global model class 0."""
    y = pools.y_train.numpy()
    rng = np.random.default_rng(0)
    server = np.concatenate([rng.choice(np.flatnonzero(y == k), 20, replace=False) for k in range(10)])
    rest = np.setdiff1d(np.flatnonzero(y != 0), server)
    fed = Federation(list(np.array_split(rng.permutation(rest), 3)), np.arange(300), server_indices=server, seed=0)
    cfg = _cfg(rounds=3)
    test0 = pools.y_test[:300] == 0

    def acc0(method):
        res = FederatedTrainer(method, cfg, pools, [fed], progress=False)
        res.run()
        pred = res.predict(res.global_params, pools.x_test, [np.arange(300)])[0].argmax(1)
        return (pred[test0] == 0).float().mean().item()

    assert acc0(get_method("FedAvg")) < 0.1 < 0.5 < acc0(Method("st", server_train_epochs=1))
