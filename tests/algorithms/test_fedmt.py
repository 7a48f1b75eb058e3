"""FedMT and its baselines on the algorithm seam (FedMT Sec. 3.3-3.4, eq. 3-5, Algorithm 1)."""
import copy

import numpy as np
import pytest
import torch

from fedpaper.algorithms.fedmt import (estimate_correspondence, projected_loss, FixMixClient, coarse_accuracy,
                                       weak_augment, strong_augment)
from fedpaper.algorithms.fedrep import PersonalHeads, HEAD
from fedpaper.algorithms.families import family_algorithm
from fedpaper.algorithms.methods import Method
from fedpaper.algorithms.semifl import static_bn_buffers
from fedpaper.driver import train
from fedpaper.engine import TrainConfig
from fedpaper.ground.errors import BadParameterError, UnknownNameError

from fedmt_stand_in import STAND_IN, fed as _fed, pools  # noqa: F401 (pools: a fixture)


SMALL = {"small_resnet": {"widths": (4, 8)}, "bn_convnet": {"width": 4, "dim": 8}}  # the CPU profiles' bodies


def _cfg(model="small_resnet", rounds=2, backbone="small_resnet", **kw):
    mk = {"num_classes": 8, **SMALL.get(model, SMALL[backbone])}
    if model in ("two_head", "with_correspondence"):
        mk.update(coarse_classes=4, backbone=backbone)
    return TrainConfig(model=model, model_kwargs=mk, lr=0.03, momentum=0.9, weight_decay=5e-4,
                       lr_schedule="cosine", batch_size=8, local_epochs=1, rounds=rounds, **kw)


FEDMT_E = family_algorithm("FedMT (E)", "fedmt", {"estimator": "estimate", "threshold": 0.13, "server_epochs": 1})


# ------------------------------------------------------------------ eq. (4)
def test_estimate_eq4_hand_example():
    # 2 coarse x 3 fine; confident rows: (coarse, y_hat)
    coarse = [0, 0, 1, 1, 1, 0]
    y_hat = [0, 0, 0, 1, 1, 1]
    m = estimate_correspondence(coarse, y_hat, J=2, K=3)
    # column 0: 2 of 3 rows with y_hat = 0 are coarse 0; column 1: 1 of 3 coarse 0; column 2: no row -> 1/J
    expected = torch.tensor([[2 / 3, 1 / 3, 0.5], [1 / 3, 2 / 3, 0.5]])
    assert torch.allclose(m, expected, atol=1e-6)
    prev = torch.tensor([[0.9, 0.9, 0.2], [0.1, 0.1, 0.8]])
    m2 = estimate_correspondence(coarse, y_hat, 2, 3, prev=prev)
    assert torch.allclose(m2[:, 2], prev[:, 2]) and torch.allclose(m2[:, :2], expected[:, :2], atol=1e-6)
    assert torch.allclose(m.sum(0), torch.ones(3))


# ------------------------------------------------------------------ R_p (eq. 3)
def test_projected_loss_true_m_is_coarse_ce_of_projected_scores():
    torch.manual_seed(0)
    f2c = torch.tensor([0, 0, 1, 1, 1, 2])
    M = torch.zeros(3, 6)
    M[f2c, torch.arange(6)] = 1
    logits = torch.randn(5, 6)
    coarse = torch.tensor([0, 1, 2, 1, 0])
    # independent: coarse probability = sum of the fine softmax over the coarse class's members
    p = torch.softmax(logits, -1)
    pc = torch.stack([p[:, f2c == j].sum(1) for j in range(3)], 1)
    expected = torch.nn.functional.nll_loss(torch.log(pc), coarse, reduction="none")
    assert torch.allclose(projected_loss(logits, coarse, M), expected, atol=1e-5)
    # stacked slots [G, B, K] with per-slot M [G, J, K]
    got = projected_loss(logits.expand(2, 5, 6), coarse.expand(2, 5), M.expand(2, 3, 6))
    assert torch.allclose(got[1], expected, atol=1e-5)
    assert coarse_accuracy(logits, coarse, M) == (pc.argmax(1) == coarse).float().mean().item()


def test_fixmix_options_are_checked():
    with pytest.raises(BadParameterError, match="estimator="):
        FixMixClient(estimator="guess")
    with pytest.raises(UnknownNameError, match="family"):
        family_algorithm("x", "nope", {})
    with pytest.raises(BadParameterError, match="unknown option"):
        family_algorithm("x", "fedmt", {"lambda3": 1})


def test_augmentations_keep_shape_and_are_seeded():
    x = torch.randn(4, 3, 8, 8)
    mean, std = torch.full((3,), 0.5), torch.full((3,), 0.25)
    a = strong_augment(x, np.random.default_rng(1), mean, std)
    b = strong_augment(x, np.random.default_rng(1), mean, std)
    assert a.shape == x.shape and torch.equal(a, b)
    assert weak_augment(x, np.random.default_rng(0)).shape == x.shape


# ------------------------------------------------------------------ clients never read fine labels
def _poisoned(pools, fed):
    """Pools whose fine labels are shuffled on every row that is not the server's."""
    bad = copy.copy(pools)
    y = pools.y_train.clone()
    rows = np.setdiff1d(np.arange(len(y)), fed.server_indices)
    y[rows] = y[rows][torch.as_tensor(np.random.default_rng(0).permutation(len(rows)))]
    bad.y_train = y
    assert (y[rows] != pools.y_train[rows]).any()
    return bad


@pytest.mark.parametrize("method,model,backbone", [
    (FEDMT_E, "small_resnet", None),
    (FEDMT_E, "bn_convnet", None),  # the quick and long profiles' backbone
    (family_algorithm("FedMT (T)", "fedmt", {"estimator": "true", "threshold": 0.13, "server_epochs": 1}),
     "small_resnet", None),
    (family_algorithm("FedRep", "fedrep", {}), "two_head", "small_resnet"),
    (family_algorithm("FedRep", "fedrep", {}), "two_head", "bn_convnet"),
    (family_algorithm("Learnable", "fedmt", {"estimator": "learnable", "threshold": 0.13, "server_epochs": 1}),
     "with_correspondence", "small_resnet"),
])
def test_clients_never_read_fine_labels(pools, method, model, backbone):
    fed = _fed(pools)
    cfg = _cfg(model, backbone=backbone or model)
    a = train(method, cfg, pools, [fed], progress=False)
    b = train(method, cfg, _poisoned(pools, fed), [fed], progress=False)
    assert a.history["train_loss"].iloc[-1] > 0  # clients trained
    for k in a.final_params:
        assert torch.equal(a.final_params[k], b.final_params[k]), k


def test_poisoned_fine_labels_do_change_a_fine_label_method(pools):
    """The control: plain FedAvg on the same rows reads fine labels, so the poisoning shows."""
    fed = _fed(pools)
    m = Method("FedAvg")
    a = train(m, _cfg(), pools, [fed], progress=False)
    b = train(m, _cfg(), _poisoned(pools, fed), [fed], progress=False)
    assert any(not torch.equal(a.final_params[k], b.final_params[k]) for k in a.final_params)


def test_fedmt_batches_carry_coarse_labels_only(pools):
    """The labels the FedMT clients' batches hold are the coarse ones (< J), for their own rows."""
    seen = []
    fed = _fed(pools)

    class Spy(FixMixClient):
        def augment(self, ctx, batch, mask_np, aug_rngs, data, epoch, step):
            if data is not None:
                m = batch["mask"].bool()
                seen.append((batch["y"][m], ctx.pools.labels["coarse"][0][batch["rows"][m]]))
            return super().augment(ctx, batch, mask_np, aug_rngs, data, epoch, step)

    from fedpaper.algorithms.base import Algorithm
    from fedpaper.algorithms.server_training import ServerTraining

    algo = Algorithm("spy", (Spy(threshold=0.13), ServerTraining(1)))
    train(algo, _cfg(), pools, [fed], progress=False)
    assert seen
    for y, coarse in seen:
        assert torch.equal(y, coarse) and int(y.max()) < 4


# ------------------------------------------------------------------ estimates and metrics
def test_fedmt_e_records_per_client_estimate_errors(pools):
    res = train(FEDMT_E, _cfg(rounds=2), pools, [_fed(pools)], progress=False)
    h = res.history
    assert {"m_err_c0", "m_err_c1", "m_err_mean", "test_acc_coarse_true", "test_acc_coarse_est"} <= set(h.columns)
    assert np.isfinite(h["m_err_mean"]).all() and (h["m_err_mean"] >= 0).all()
    assert 0 <= h["test_acc_coarse_true"].iloc[-1] <= 1


# ------------------------------------------------------------------ FedRep heads never leave their client
def test_fedrep_heads_stay_on_their_client(pools):
    fed = _fed(pools)
    algo = family_algorithm("FedRep", "fedrep", {})
    part = next(p for p in algo.parts if isinstance(p, PersonalHeads))
    seen = {}

    class Spy(PersonalHeads):
        def broadcast(self, ctx, state, params, slots):
            out = super().broadcast(ctx, state, params, slots)
            seen.setdefault("rounds", []).append({k: out[k].clone() for k in HEAD})
            return out

        def aggregate(self, ctx, state, agg, glob):
            seen.setdefault("returned", []).append({k: agg.new[k].clone() for k in HEAD})
            out = super().aggregate(ctx, state, agg, glob)
            seen.setdefault("glob", []).append({k: out[k].clone() for k in HEAD})
            seen.setdefault("prev", []).append({k: agg.prev[k].clone() for k in HEAD})
            return out

    from fedpaper.algorithms.base import Algorithm

    spy = Algorithm("FedRep", tuple(Spy() if p is part else p for p in algo.parts))
    res = train(spy, _cfg("two_head", rounds=3), pools, [fed], progress=False)
    for r in range(2):
        # what client c receives in round r+1 is exactly what client c returned in round r
        for k in HEAD:
            assert torch.equal(seen["rounds"][r + 1][k], seen["returned"][r][k])
            # the global model's head is never an aggregate of the clients' heads
            assert torch.equal(seen["glob"][r][k], seen["prev"][r][k])
    # the two clients' heads differ (not averaged), and the final global head is the initial one
    assert not torch.equal(seen["returned"][-1][HEAD[0]][0], seen["returned"][-1][HEAD[0]][1])
    assert "test_acc_coarse" in res.history


def test_fedtrans_finetunes_a_new_head_at_the_end(pools):
    res = train(family_algorithm("FedTrans", "fedtrans", {"finetune_epochs": 1}), _cfg("two_head"), pools,
                [_fed(pools)], progress=False)
    assert np.isfinite(res.history["test_acc_coarse"].iloc[-1])


def test_fedtrans_options_reach_its_part():
    """finetune_epochs, finetune_lr and finetune_batch given as the family's options are the ones
    the server fine-tuning uses (not the defaults 100, 0.01, 250)."""
    from fedpaper.algorithms.fedtrans import CoarsePretrainThenFinetune

    algo = family_algorithm("FedTrans", "fedtrans", {"finetune_epochs": 3, "finetune_lr": 0.05, "finetune_batch": 32})
    part = next(p for p in algo.parts if isinstance(p, CoarsePretrainThenFinetune))
    assert (part.finetune_epochs, part.finetune_lr, part.finetune_batch) == (3, 0.05, 32)


def test_fixmix_objective_uses_the_models_learned_m_over_the_batchs():
    """App. D.4 "Learnable": a model that outputs its own correspondence M (outputs["M"]) has R_p
    computed with that M, not the batch's Mp. By hand (w_p = 1, lambda2 = 0: R_p alone, one row):
    with M = I, R_p = -log softmax(f(x))_y; with the batch's uniform Mp it would be log 2."""
    from fedpaper.algorithms.fedmt import FixMixObjective

    logits = torch.tensor([[1.0, -1.0], [0.3, 0.2], [0.0, 0.4]])  # weak, strong, mix rows (B = 1)
    batch = {"mask": torch.ones(1), "y": torch.tensor([0]), "yfix": torch.tensor([1]), "ymix": torch.tensor([0]),
             "lam": torch.tensor(0.7), "Mp": torch.full((2, 2), 0.5)}
    obj = FixMixObjective(1.0, 1.0, 0.0)
    loss, _ = obj({"logits": logits, "M": torch.eye(2)}, batch, None, {}, {})
    assert float(loss) == pytest.approx(float(torch.log1p(torch.exp(torch.tensor(-2.0)))), rel=1e-6)
    loss, _ = obj(logits, batch, None, {}, {})  # no M among the outputs: the batch's Mp
    assert float(loss) == pytest.approx(float(np.log(2.0)), rel=1e-6)


def test_fixmix_estimate_keeps_a_clients_last_column_where_nothing_is_confident():
    """Eq. (4) per client and round: a fine class with no confident row this round keeps the
    client's estimate from the last round (M_hat's column), not the uniform 1/J it starts from.
    Round 1: rows 0, 1, 3 (coarse 0, 1, 0) confidently class 0, row 2 (coarse 1) class 1, so
    M_hat = [[2/3, 0], [1/3, 1]]; round 2: only rows 1, 2 (class 1) are confident, so column 0
    stays (2/3, 1/3)."""
    from types import SimpleNamespace

    from part_harness import make_ctx

    K = 2
    pools = SimpleNamespace(x_train=torch.zeros(4, 1), labels={"coarse": (torch.tensor([0, 1, 1, 0]), None)},
                            correspondence=np.array([[0.9, 0.1], [0.1, 0.9]]))
    feds = [SimpleNamespace(client_indices=[np.array([0, 1, 2, 3])], seed=0)]
    rounds = [torch.tensor([[9.0, 0.0], [9.0, 0.0], [0.0, 9.0], [9.0, 0.0]]),
              torch.tensor([[0.1, 0.0], [0.0, 9.0], [0.0, 9.0], [0.0, 0.1]])]
    calls = []

    def predict(params, xp, rows, buffers=None):
        calls.append(1)
        return [rounds[len(calls) - 1]]

    ctx = make_ctx(np.ones((1, 1, K)), pools=pools, feds=feds, predict=predict)
    part = FixMixClient(threshold=0.9, estimator="estimate")
    state = {part.key: part.init_state(ctx)}
    slots = np.array([[0, 0]])
    part.prepare_round(ctx, state, None, slots, {})
    want = torch.tensor([[2 / 3, 0.0], [1 / 3, 1.0]])
    torch.testing.assert_close(state[part.key]["M_hat"][0, 0], want)
    part.prepare_round(ctx, state, None, slots, {})
    torch.testing.assert_close(state[part.key]["M_hat"][0, 0], want)


def test_learnable_m_reports_the_projected_accuracy_after_the_last_round_only():
    """LearnableCorrespondence reads the Context's round: after round 1 of 2 no test_acc_coarse_est, after
    round 2 the 20-class accuracy with the clients' mean learned matrix (by hand: learned M ~ I, the
    fine predictions 0, 1, 1 project to coarse 0, 1, 1, all right: 1.0)."""
    import dataclasses
    from types import SimpleNamespace

    from part_harness import aggregation, full_slots, make_ctx

    from fedpaper.algorithms.fedmt import LearnableCorrespondence

    pools = SimpleNamespace(correspondence=np.eye(2), x_test=torch.zeros(3, 1),
                            labels={"coarse": (None, torch.tensor([0, 1, 1]))})
    feds = [SimpleNamespace(seed=0, test_indices=np.arange(3))]
    predict = lambda params, xp, rows, buffers=None: [torch.tensor([[5.0, 0.0], [0.0, 5.0], [0.0, 5.0]])  # noqa
                                                      for _ in rows]
    ctx = make_ctx(np.ones((1, 2, 2)), cfg=SimpleNamespace(rounds=2), pools=pools, feds=feds, predict=predict,
                   init_params={"m_logits": torch.zeros(1, 2, 2)})
    part = LearnableCorrespondence()
    state = {part.key: part.init_state(ctx)}
    slots, part_idx = full_slots(1, 2)
    new = {"m_logits": (10.0 * torch.eye(2)).expand(2, 2, 2).clone()}
    for rnd in (1, 2):
        ctx = dataclasses.replace(ctx, round=rnd)  # the driver's Context of round rnd
        agg = aggregation(new, slots, part_idx, {"m_logits": torch.zeros(1, 2, 2)})
        glob = part.aggregate(ctx, state, agg, {})
        metrics = part.round_metrics(ctx, state, glob, {})
        assert ("test_acc_coarse_est" in metrics[0]) == (rnd == 2)
    assert metrics[0]["test_acc_coarse_est"] == 1.0


def test_semifl_static_bn_equals_batch_statistics():
    from fedpaper.blocks.models import build_model

    torch.manual_seed(0)
    net = build_model("small_resnet", num_classes=3, widths=(4,))
    x = torch.randn(30, 3, 6, 6)
    params = dict(net.named_parameters())
    bufs = static_bn_buffers(net, {k: v.detach() for k, v in params.items()}, dict(net.named_buffers()), x, batch=10)
    first = net.body[0](x)  # the stem conv: the first BN's input
    assert torch.allclose(bufs["body.1.running_mean"], first.mean((0, 2, 3)).detach(), atol=1e-5)


@pytest.mark.parametrize("average", [False, True])
def test_learnable_m_stays_per_client_or_is_averaged(pools, average):
    from fedpaper.algorithms.fedmt import LearnableCorrespondence

    seen = {}

    class Spy(LearnableCorrespondence):
        def aggregate(self, ctx, state, agg, glob):
            out = super().aggregate(ctx, state, agg, glob)
            seen["new"] = agg.new[self.PARAM].clone()
            seen["state"] = state[self.key]["logits"].clone()
            seen["glob"], seen["prev"] = out[self.PARAM].clone(), agg.prev[self.PARAM].clone()
            return out

    est = "learnable_average" if average else "learnable"
    algo = family_algorithm("L", "fedmt", {"estimator": est, "threshold": 0.13, "server_epochs": 1})
    from fedpaper.algorithms.base import Algorithm

    algo = Algorithm("L", tuple(Spy(average) if isinstance(p, LearnableCorrespondence) else p for p in algo.parts))
    res = train(algo, _cfg("with_correspondence"), pools, [_fed(pools)], progress=False)
    assert torch.equal(seen["glob"], seen["prev"])  # never aggregated into the global model
    if average:
        m = torch.softmax(seen["new"], 1).mean(0)
        assert torch.allclose(torch.softmax(seen["state"][0, 0], 0), m, atol=1e-5)
        assert torch.equal(seen["state"][0, 0], seen["state"][0, 1])
    else:
        assert torch.equal(seen["state"][0], seen["new"])
        assert not torch.equal(seen["state"][0, 0], seen["state"][0, 1])
    assert np.isfinite(res.history["m_err_mean"]).all()


def test_seam_hooks_added_for_fedmt_default_to_no_change(pools):
    """The hooks FedMT added to the seam (label space, round rows, batch rows, round metrics, a
    replacing objective) change nothing for an algorithm that does not use them."""
    from fedpaper.algorithms.base import Objective

    algo = Method("FedAvg").algorithm()
    assert algo.client_labels == "default" and algo.batch_rows is False
    rows = [np.arange(3), np.arange(5)]
    assert algo.round_rows(None, {}, np.array([[0, 0], [0, 1]]), rows) is rows
    assert isinstance(algo.objective(("classifier.weight", "classifier.bias")), Objective)

    class Ctx:
        R = 2
    assert algo.round_metrics(Ctx(), {}, {}, {}) == [{}, {}]
    fedmt = FEDMT_E.algorithm()
    assert fedmt.client_labels == "coarse" and fedmt.batch_rows is True
