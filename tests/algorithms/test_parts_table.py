"""Every setting of every part reaches its maths (the explicit parts table, algorithms/parts.py).

For each part type and each of its numeric constructor arguments, changing the argument changes
what the part gives the trainer (its loss, aggregation weights or update), called through the
part's hooks as the trainer calls them (a small Context, part_harness; a real trainer's Context
for the parts that train a model). For the papers' named weights (FedMT's lambda1, lambda2, w_p
and threshold xi; FedProx's mu; FedPALS's lambda; FedNCA-ML's lambda1, lambda2 and tau; SCAFFOLD's
control-variate step 1 / (K_i lr)) and for every part with two or more numeric arguments, the
value equals a computation written out here (not the library's function) at several distinct
values, so that a dropped argument, or two arguments swapped between the constructor and the maths
they build, fails a test. Where the maths is a library routine (RandAugment, the Beta draw of the
mixing weight, FedTrans's fine-tuning loop), the test checks the arguments that routine receives.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from part_harness import aggregation, full_slots, make_ctx
from torch import nn
from torch.func import functional_call

import fedpaper.algorithms.fedmt as FM
import fedpaper.algorithms.fedtrans as FT
from fedpaper.algorithms.base import Algorithm
from fedpaper.algorithms.parts import PARTS
from fedpaper.engine.batching import gather

CLS = ("classifier.weight", "classifier.bias")
DEV = torch.device("cpu")


# ----------------------------------------------------------------------------- hand maths
def ce(z: torch.Tensor, y: int) -> torch.Tensor:
    """Cross-entropy of one row of logits, written out: log sum_k exp z_k - z_y."""
    return torch.log(torch.exp(z).sum()) - z[y]


def softmax(z: torch.Tensor) -> torch.Tensor:
    e = torch.exp(z - z.max())
    return e / e.sum()


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _flat(v) -> np.ndarray:
    """Everything a probe returns, as one float64 vector."""
    if isinstance(v, dict):
        return np.concatenate([_flat(v[k]) for k in sorted(v)]) if v else np.zeros(0)
    if isinstance(v, (list, tuple)):
        return np.concatenate([_flat(x) for x in v]) if v else np.zeros(0)
    if isinstance(v, torch.Tensor):
        return v.detach().double().reshape(-1).numpy()
    return np.asarray(v, dtype=np.float64).reshape(-1)


# ----------------------------------------------------------------------------- probes: one per part type
# A probe builds the part from keyword arguments and returns what the trainer would get from it.

def probe_fedpals(kw):
    counts = np.array([[[6, 2, 2], [2, 6, 4], [1, 1, 6]]], dtype=float)
    ctx = make_ctx(counts, feds=[SimpleNamespace(target_marginal=np.array([0.5, 0.3, 0.2]))])
    part = PARTS["FedPALSWeights"](**kw)
    slots, part_idx = full_slots(1, 3)
    return part.weights(ctx, {part.key: part.init_state(ctx)}, slots, part_idx, torch.zeros(3))


AFL_LOSSES = torch.tensor([0.2, 0.5, 0.9])


def probe_afl(kw):
    """The weights of round 2, after round 1's mixture step on the clients' losses."""
    ctx = make_ctx(np.ones((1, 3, 2)))
    part = PARTS["AFLMixture"](**kw)
    state = {part.key: part.init_state(ctx)}
    slots, part_idx = full_slots(1, 3)
    w = torch.zeros(1, 2)
    part.aggregate(ctx, state, aggregation({"w": torch.zeros(3, 2)}, slots, part_idx, {"w": w}, losses=AFL_LOSSES),
                   {"w": w})
    return part.weights(ctx, state, slots, part_idx, AFL_LOSSES)


MOM_PREV = torch.tensor([[1.0, 2.0]])
MOM_AVG1 = torch.tensor([[0.5, 1.0]])
MOM_STEP2 = torch.tensor([[0.2, 0.1]])  # round 2's averaged update theta_t - avg


def probe_momentum(kw):
    """Two rounds of aggregation: the global models after round 1 and round 2."""
    ctx = make_ctx(np.ones((1, 1, 2)), params={"w": torch.zeros(1, 2)})
    part = PARTS["ServerMomentum"](**kw)
    state = {part.key: part.init_state(ctx)}
    slots, part_idx = full_slots(1, 1)
    out1 = part.aggregate(ctx, state, aggregation({"w": MOM_AVG1}, slots, part_idx, {"w": MOM_PREV}),
                          {"w": MOM_AVG1.clone()})
    avg2 = out1["w"] - MOM_STEP2
    out2 = part.aggregate(ctx, state, aggregation({"w": avg2}, slots, part_idx, out1), {"w": avg2.clone()})
    return out1["w"], out2["w"]


def _one_slot():
    """One slot's logits [B=2, K=3], batch, parameters and anchor (features and classifier)."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, generator=g)
    batch = {"x": torch.zeros(2, 1), "y": torch.tensor([2, 0]), "mask": torch.ones(2)}
    params = {"features.w": torch.randn(4, 2, generator=g), CLS[0]: torch.randn(3, 2, generator=g),
              CLS[1]: torch.randn(3, generator=g)}
    anchor = {k: torch.randn(v.shape, generator=g) for k, v in params.items()}
    return logits, batch, params, anchor


def _loss(parts, logits, batch, present, params, anchor):
    """The clients' objective of an algorithm made of `parts`, as the backends call it."""
    loss, _ = Algorithm("probe", parts).objective(CLS)(logits, batch, present, params, anchor)
    return loss


def probe_penalty(kw):
    logits, batch, params, anchor = _one_slot()
    return _loss((PARTS["Penalty"](**kw),), logits, batch, torch.ones(3, dtype=torch.bool), params, anchor)


# FedCurv: three clients of one run; client j's Fisher F_j and parameters theta_j as the server keeps them
CURV_F = torch.tensor([[0.0, 0.0, 0.0], [0.5, 1.0, 2.0], [3.0, 0.25, 1.5]]).unsqueeze(-1) * torch.tensor([1.0, 0.5])
CURV_THETA = (torch.tensor([[0.0, 0.0, 0.0], [1.0, -1.0, 0.5], [0.2, 0.3, -2.0]]).unsqueeze(-1)
              * torch.tensor([1.0, -2.0]))
CURV_P = torch.tensor([[[0.7, 0.1], [-0.4, 0.2], [1.1, -0.3]]])  # client 0's weights [3, 2] in a step (one slot)


class _Lin(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(3, 2))

    def forward(self, x):
        return x @ self.w.T


def _curv_ctx():
    g = torch.Generator().manual_seed(1)
    pools = SimpleNamespace(x_train=torch.randn(12, 2, generator=g), y_train=torch.tensor([0, 1, 2] * 4))
    feds = [SimpleNamespace(client_indices=[np.arange(0, 4), np.arange(4, 8), np.arange(8, 12)])]
    return make_ctx(np.ones((1, 3, 3)), params={"w": torch.zeros(1, 3, 2)}, pools=pools, feds=feds,
                    cfg=SimpleNamespace(batch_size=2), template=_Lin())


def probe_fedcurv(kw):
    """The client objective of client 0 given the others' (F_j, theta_j), and the Fisher the server
    computes of the participants' new models after the round."""
    ctx = _curv_ctx()
    part = PARTS["FedCurvPenalty"](**kw)
    state = {part.key: part.init_state(ctx)}
    st = state[part.key]
    st["F"]["w"][0], st["P"]["w"][0] = CURV_F, CURV_F * CURV_THETA
    st["Q"][0] = (CURV_F * CURV_THETA ** 2).sum((1, 2))
    slots = np.array([[0, 0]])
    data = part.prepare_round(ctx, state, None, slots, {})
    batch = {"x": torch.zeros(1, 2, 1), "y": torch.tensor([[0, 1]]), "mask": torch.ones(1, 2)}
    part.augment(ctx, batch, np.ones((1, 2), bool), None, data, None, 0)
    logits = torch.tensor([[[0.3, -0.2, 0.1], [1.0, 0.0, -1.0]]])
    loss = _loss((part,), logits, batch, torch.ones(1, 3, dtype=torch.bool), {"w": CURV_P}, {"w": CURV_P})
    new = {"w": torch.tensor([[[0.5, -0.5], [0.1, 0.2], [-0.3, 0.4]]]).expand(3, 3, 2).clone()}
    all_slots, part_idx = full_slots(1, 3)
    part.aggregate(ctx, state, aggregation(new, all_slots, part_idx, {"w": torch.zeros(1, 3, 2)}), {})
    return loss, st["F"]["w"]


def probe_restricted(kw):
    logits, batch, params, anchor = _one_slot()
    return _loss((PARTS["RestrictedSoftmax"](**kw),), logits, batch, torch.tensor([True, False, True]), {}, {})


def _nca_batch():
    """Two samples, C = 3 classes: multi-hot labels, logits, and the class-wise scores z_icr."""
    y = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    logits = torch.tensor([[0.4, -0.3, 1.2], [-0.5, 0.8, 0.1]])
    pair = torch.tensor([[[2.0, -1.0, 0.5], [0.3, -2.0, -0.2], [1.0, -0.1, 1.5]],
                         [[-1.5, 0.9, -0.4], [0.2, 1.8, -2.2], [-0.6, 0.0, -1.0]]])
    return {"logits": logits, "pair_logits": pair}, {"x": torch.zeros(2, 1), "y": y, "mask": torch.ones(2)}


def probe_fednca(kw):
    outputs, batch = _nca_batch()
    return _loss((PARTS["FedNCALoss"](**kw),), outputs, batch, None, {}, {})


def probe_mixup(kw):
    x = torch.arange(8, dtype=torch.float32).view(1, 4, 2) / 8
    batch = {"x": x, "y": torch.tensor([[0, 1, 2, 1]]), "mask": torch.ones(1, 4)}
    part = PARTS["Mixup"](**kw)
    part.augment(None, batch, np.ones((1, 4), bool), [np.random.default_rng(0)], None, None, 0)
    logits = torch.cat([batch["x"], -batch["x"].sum(-1, keepdim=True)], -1)  # a fixed linear "model"
    return _loss((part,), logits, batch, None, {}, {})


# PseudoLabels: two labelled rows (0, 1) and three unlabeled rows (2, 3, 4) whose broadcast-model
# confidences are 0.95, 0.7 and 0.55 (classes 1, 0, 1)
PL_CONF = {2: (1, 0.95), 3: (0, 0.7), 4: (1, 0.55)}


def _two_class_logits(cls: int, conf: float) -> list:
    z = math.log(conf / (1 - conf))
    return [0.0, z] if cls == 1 else [z, 0.0]


def _pseudo_model(x):
    """The "model" the objective reads: logits of each batch row from its input value."""
    return torch.cat([x, 0.5 - x], -1)


def probe_pseudo(kw):
    x = torch.tensor([[0.1], [0.9], [0.3], [0.6], [0.8]])
    pools = SimpleNamespace(x_train=x, y_train=torch.tensor([0, 1, 0, 0, 0]))
    feds = [SimpleNamespace(client_unlabeled_indices=[np.array([2, 3, 4])])]
    predict = lambda p, xp, rows, buffers=None: [torch.tensor([_two_class_logits(*PL_CONF[i]) for i in r])  # noqa: E731
                                                 for r in rows]
    ctx = make_ctx(np.ones((1, 1, 2)), pools=pools, feds=feds, predict=predict)
    part = PARTS["PseudoLabels"](**kw)
    data = part.prepare_round(ctx, {}, None, np.array([[0, 0]]), {})
    epoch = part.begin_epoch(data, 1, [np.random.default_rng(0)], 3, DEV)
    batch = {"x": x[[0, 1]].unsqueeze(0), "y": torch.tensor([[0, 1]]), "mask": torch.ones(1, 2)}
    part.augment(ctx, batch, None, None, data, epoch, 0)
    return _loss((part,), _pseudo_model(batch["x"]), batch, None, {}, {})


# FedMT: one client of 12 images (3 x 8 x 8), K = 4 fine classes, J = 2 coarse (coarse = fine mod 2);
# the broadcast model predicts class i mod 4 for row i with confidence FIX_CONF[i]
FIX_CONF = [0.3, 0.5, 0.65, 0.7, 0.8, 0.9, 0.96, 0.97, 0.98, 0.99, 0.4, 0.62]
FIX_M = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]])


def _fix_logits(i: int) -> list:
    """Logits of row i: class i mod 4 with softmax confidence FIX_CONF[i] (the others equal)."""
    c = FIX_CONF[i]
    z = [0.0] * 4
    z[i % 4] = math.log(3 * c / (1 - c))
    return z


def _fix_ctx():
    g = torch.Generator().manual_seed(2)
    x = torch.rand(12, 3, 8, 8, generator=g) * 2 - 1
    pools = SimpleNamespace(x_train=x, correspondence=FIX_M, norm=(torch.full((3,), 0.5), torch.full((3,), 0.5)),
                            labels={"coarse": (torch.arange(12) % 2, None)})
    feds = [SimpleNamespace(client_indices=[np.arange(12)], seed=4)]
    predict = lambda p, xp, rows, buffers=None: [torch.tensor([_fix_logits(i) for i in r]) for r in rows]  # noqa: E731
    return make_ctx(np.ones((1, 1, 2)), pools=pools, feds=feds, predict=predict, round=1)


FIX_W = torch.randn(3 * 8 * 8, 4, generator=torch.Generator().manual_seed(3)) * 0.1


def probe_fixmix(kw):
    """A round of FedMT's client step as the trainer runs it: S_fix and S_mix (prepare_round,
    round_rows, begin_epoch), the batch's weak / strong / mixed images (augment), and the eq. (5)
    loss (client_objective) of a fixed linear model on them."""
    ctx = _fix_ctx()
    part = PARTS["FixMixClient"](**kw)
    state = {part.key: part.init_state(ctx)}
    slots = np.array([[0, 0]])
    data = part.prepare_round(ctx, state, None, slots, {})
    fix = part.round_rows(ctx, data, slots, None)[0]
    rngs = [np.random.default_rng(5)]
    epoch = part.begin_epoch(data, 1, rngs, len(fix), DEV)
    rows = torch.as_tensor(fix).unsqueeze(0)
    batch = {"x": gather(ctx.pools.x_train, rows), "y": (rows % 2), "mask": torch.ones(1, len(fix)), "rows": rows}
    part.augment(ctx, batch, np.ones((1, len(fix)), bool), rngs, data, epoch, 0)
    logits = batch["x"].flatten(2) @ FIX_W
    loss, _ = part.client_objective(CLS)(logits, batch, None, {}, {})
    return loss, torch.as_tensor(fix)


_TRAINERS = {}


def _trainer(model: str):
    """A real trainer (its Context, template, pools with server rows) on the FedMT stand-in data."""
    if model not in _TRAINERS:
        from fedpaper.driver.trainer import FederatedTrainer
        from fedpaper.engine import Federation, TrainConfig
        from fedpaper.papers.fedmt.data import build_pools, split

        pools = build_pools({"stand_in": {"num_classes": 8, "coarse_classes": 4, "n_train": 160, "n_test": 16,
                                          "shape": [3, 8, 8], "seed": 3}}, None, "cpu")
        server, p = split(pools, {"n": 2, "num_clients": 2, "samples_per_client": 20, "seed": 0})
        fed = Federation([np.asarray(c) for c in p.client_indices], np.arange(len(pools.y_test)),
                         server_indices=server, seed=0)
        mk = {"num_classes": 8, "widths": (4, 8)}
        if model == "two_head":
            mk.update(coarse_classes=4, backbone="small_resnet")
        cfg = TrainConfig(model=model, model_kwargs=mk, lr=0.05, momentum=0.9, batch_size=8, local_epochs=1,
                          rounds=2)
        algo = Algorithm("t", (PARTS["CoarsePretrainThenFinetune"](),)) if model == "two_head" else Algorithm("t")
        _TRAINERS[model] = FederatedTrainer(algo, cfg, pools, [fed], progress=False)
    return _TRAINERS[model]


def _copy(d):
    return {k: v.clone() for k, v in d.items()}


def probe_server_training(kw):
    tr = _trainer("small_resnet")
    ctx = dataclasses.replace(tr.ctx, round=1)
    glob, bufs = PARTS["ServerTraining"](**kw).server_step(ctx, {}, _copy(tr.global_params), _copy(tr.global_buffers),
                                                          None, [np.random.default_rng(0)])
    return glob


def probe_fedtrans(kw):
    """The server step after the last round: a new K-class head and the body fine-tuned."""
    tr = _trainer("two_head")
    ctx = dataclasses.replace(tr.ctx, round=tr.cfg.rounds)
    part = PARTS["CoarsePretrainThenFinetune"](**kw)
    glob, bufs = part.server_step(ctx, {part.key: part.init_state(ctx)}, _copy(tr.global_params),
                                  _copy(tr.global_buffers), None, None)
    return glob


class _Cls(nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = nn.Linear(2, 3)

    def forward(self, x):
        return self.classifier(x)


TUNE_PRESENT = [[True, True, False], [False, True, True]]


def _tuning_case():
    """One run, two clients (label sets TUNE_PRESENT, 4 and 12 rows), six unlabeled server rows."""
    g = torch.Generator().manual_seed(6)
    x = torch.randn(6, 2, generator=g)
    glob = {CLS[0]: torch.randn(1, 3, 2, generator=g), CLS[1]: torch.randn(1, 3, generator=g)}
    new = {CLS[0]: torch.randn(2, 3, 2, generator=g), CLS[1]: torch.randn(2, 3, generator=g)}
    return x, glob, new


def probe_tuning(kw):
    x, glob, new = _tuning_case()
    tmpl = _Cls()

    def predict(params, xp, rows, train=False, buffers=None):
        return [functional_call(tmpl, {k: v[i] for k, v in params.items()}, (xp[torch.as_tensor(r)],))
                for i, r in enumerate(rows)]

    counts = np.array([[[2, 2, 0], [0, 6, 6]]], dtype=float)
    ctx = make_ctx(counts, params=glob, pools=SimpleNamespace(x_train=x), template=tmpl, predict=predict,
                   feds=[SimpleNamespace(server_indices=np.arange(6))],
                   cfg=SimpleNamespace(batch_size=8, lr=0.1, precision="fp32"))
    slots, part_idx = full_slots(1, 2)
    agg = aggregation(new, slots, part_idx, glob)
    out, _ = PARTS["CentralTuning"](**kw).server_step(ctx, {}, _copy(glob), {}, agg, [np.random.default_rng(0)])
    return out


# ----------------------------------------------------------------------------- the table
# part -> (a probe, its base arguments, {numeric argument: another value}); parts with no numeric
# argument name why they are here without a probe
TABLE = {
    "FedAvgWeights": (None, {}, {}),
    "FedPALSWeights": (probe_fedpals, {"lam": 1.0}, {"lam": 5.0}),
    "AFLMixture": (probe_afl, {"step": 0.1}, {"step": 0.3}),
    "ServerMomentum": (probe_momentum, {"beta": 0.9, "server_lr": 0.6}, {"beta": 0.5, "server_lr": 1.0}),
    "Penalty": (probe_penalty, {"name": "prox", "coef": 0.3}, {"coef": 0.7}),
    "FedCurvPenalty": (probe_fedcurv, {"lam": 0.01, "fisher_batches": None}, {"lam": 0.04, "fisher_batches": 1}),
    "ControlVariates": (None, {}, {}),
    "RestrictedSoftmax": (probe_restricted, {"alpha": 0.5}, {"alpha": 0.1}),
    "PrivateLabels": (None, {}, {}),
    "FrozenParameters": (None, {"names": ["w"]}, {}),
    "SphereFedClassifier": (None, {}, {}),
    "FedNCALoss": (probe_fednca, {"lam_neg": 1.0, "lam_pos": 1.0, "tau": 0.3},
                   {"lam_neg": 0.3, "lam_pos": 2.0, "tau": 0.6}),
    "Mixup": (probe_mixup, {"alpha": 0.75}, {"alpha": 0.2}),
    "PseudoLabels": (probe_pseudo, {"threshold": 0.9, "weight": 1.0}, {"threshold": 0.6, "weight": 0.4}),
    "FixMixClient": (probe_fixmix, {"threshold": 0.95, "lambda1": 1.0, "lambda2": 1 / 16, "mix_alpha": 0.75,
                                    "projected_weight": 1.0, "randaugment": (2, 10)},
                     {"threshold": 0.6, "lambda1": 0.5, "lambda2": 0.25, "mix_alpha": 0.2, "projected_weight": 0.3,
                      "randaugment": (1, 10)}),
    "LearnableCorrespondence": (None, {"average": False}, {}),
    "PersonalHeads": (None, {}, {}),
    "CoarsePretrainThenFinetune": (probe_fedtrans, {"finetune_epochs": 1, "finetune_lr": 0.01, "finetune_batch": 16},
                                   {"finetune_epochs": 2, "finetune_lr": 0.2, "finetune_batch": 5}),
    "ServerTraining": (probe_server_training, {"epochs": 1}, {"epochs": 2}),
    "StaticBatchNorm": (None, {}, {}),
    "CentralTuning": (probe_tuning, {"kind": "mse", "epochs": 2, "optimizer": "sgd", "lr": 0.5},
                      {"epochs": 3, "lr": 0.2}),
}
# the second number of RandAugment (its magnitude) is changed separately below
EXTRA = [("FixMixClient", "randaugment", (2, 3))]


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.number)) and not isinstance(v, bool)


def numeric_arguments(cls) -> set:
    """The constructor arguments that are numbers: by default value (a number or a tuple of
    numbers) or by annotation (int / float)."""
    out = set()
    for name, q in inspect.signature(cls.__init__).parameters.items():
        if name == "self":
            continue
        d, ann = q.default, str(q.annotation)
        if _is_number(d) or (isinstance(d, tuple) and d and all(_is_number(v) for v in d)) \
                or any(t in ann.replace("None", "").split(" | ") for t in ("int", "float")):
            out.add(name)
    return out


def test_the_table_covers_every_part_and_every_numeric_argument():
    assert set(TABLE) == set(PARTS), set(TABLE) ^ set(PARTS)
    for name, cls in PARTS.items():
        probe, base, changes = TABLE[name]
        assert numeric_arguments(cls) <= set(changes), f"{name}: {numeric_arguments(cls) - set(changes)} untested"
        cls(**base)  # the base arguments make the part
        if changes:
            assert probe is not None
    # the detection itself: FixMixClient's numbers, and none of its strings
    assert numeric_arguments(PARTS["FixMixClient"]) == {"threshold", "lambda1", "lambda2", "mix_alpha",
                                                         "projected_weight", "randaugment"}
    assert numeric_arguments(PARTS["CentralTuning"]) == {"epochs"}  # lr (default None) is in the table by hand


CASES = [(name, arg, other) for name, (_, _, ch) in TABLE.items() for arg, other in ch.items()] + EXTRA


@pytest.mark.parametrize("name,arg,other", CASES, ids=[f"{n}.{a}" for n, a, _ in CASES])
def test_changing_a_numeric_argument_changes_what_the_part_gives(name, arg, other):
    probe, base, _ = TABLE[name]
    a, b = _flat(probe(base)), _flat(probe({**base, arg: other}))
    assert np.isfinite(a).all() and np.isfinite(b).all()
    assert a.shape != b.shape or not np.array_equal(a, b), \
        f"{name}({arg}={other}) gives what {name}({arg}={base[arg]}) gives"


# ----------------------------------------------------------------------------- the named weights, by hand
@pytest.mark.parametrize("lam", [1.0, 5.0, 20.0])
def test_fedpals_lambda_is_eq9s_lambda(lam):
    """FedPALS eq. 9 where the minimiser is inside the simplex: the stationarity condition of
    alpha^T (S S^T + lambda diag(1/n)) alpha - 2 alpha^T S T on sum(alpha) = 1, solved by hand."""
    C = np.array([[6, 2, 2], [2, 6, 4], [1, 1, 6]], dtype=float)
    n, T = C.sum(1), np.array([0.5, 0.3, 0.2])
    S = C / n[:, None]
    Q, b, one = S @ S.T + lam * np.diag(1 / n), S @ T, np.ones(3)
    Qi = np.linalg.inv(Q)
    alpha = Qi @ (b + (1 - one @ Qi @ b) / (one @ Qi @ one) * one)
    assert (alpha > 0).all()
    np.testing.assert_allclose(probe_fedpals({"lam": lam}), alpha, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("step", [0.1, 0.3])
def test_afl_step_is_the_mixtures_ascent_step(step):
    """Round 2's weights: lambda = Proj_simplex(1/M + step * losses); inside the simplex the
    projection subtracts the mean excess."""
    v = 1 / 3 + step * AFL_LOSSES.double().numpy()
    np.testing.assert_allclose(probe_afl({"step": step}), v - (v.sum() - 1) / 3, rtol=1e-12)


@pytest.mark.parametrize("beta,server_lr", [(0.9, 0.6), (0.6, 0.9), (0.5, 1.0)])
def test_server_momentum_beta_and_server_lr(beta, server_lr):
    """FedAvgM: v_1 = Delta_1, theta_1 = theta_0 - server_lr v_1; v_2 = beta v_1 + Delta_2."""
    d1 = MOM_PREV - MOM_AVG1
    out1 = MOM_PREV - server_lr * d1
    out2 = out1 - server_lr * (beta * d1 + MOM_STEP2)
    got1, got2 = probe_momentum({"beta": beta, "server_lr": server_lr})
    torch.testing.assert_close(got1, out1)
    torch.testing.assert_close(got2, out2)


def _mean_ce(logits, y):
    return sum(ce(logits[i], int(y[i])) for i in range(len(y))) / len(y)


@pytest.mark.parametrize("mu", [0.0, 0.3, 0.7])
@pytest.mark.parametrize("skip", [False, True])
def test_fedprox_mu_is_the_proximal_weight(mu, skip):
    """FedProx eq. 2: the mean CE plus mu/2 ||w - w_t||^2 (no classifier term with private label sets)."""
    logits, batch, params, anchor = _one_slot()
    keys = [k for k in params if not (skip and k in CLS)]
    want = _mean_ce(logits, batch["y"]) + mu / 2 * sum(((params[k] - anchor[k]) ** 2).sum() for k in keys)
    got = probe_penalty({"name": "prox", "coef": mu, "skip_classifier": skip})
    assert float(got) == pytest.approx(float(want), rel=1e-6)


@pytest.mark.parametrize("wd", [0.0, 5e-4, 0.1])
def test_l2_penalty_weight(wd):
    logits, batch, params, anchor = _one_slot()
    want = _mean_ce(logits, batch["y"]) + wd / 2 * sum((p ** 2).sum() for p in params.values())
    assert float(probe_penalty({"name": "l2", "coef": wd})) == pytest.approx(float(want), rel=1e-6)


@pytest.mark.parametrize("lam", [0.01, 0.04, 1.0])
def test_fedcurv_lam_weighs_the_others_fisher_distance(lam):
    """FedCurv eq. 7 for client 0: lam sum_{j != 0} sum_k F_jk (theta_k - theta_jk)^2 on its mean CE."""
    logits = torch.tensor([[0.3, -0.2, 0.1], [1.0, 0.0, -1.0]])
    want = _mean_ce(logits, [0, 1]) + lam * sum((CURV_F[j] * (CURV_P[0] - CURV_THETA[j]) ** 2).sum() for j in (1, 2))
    loss, _ = probe_fedcurv({"lam": lam, "fisher_batches": None})
    assert float(loss) == pytest.approx(float(want), rel=1e-5)


@pytest.mark.parametrize("fisher_batches", [None, 1, 2])
def test_fedcurv_fisher_batches_is_the_number_of_minibatches(fisher_batches):
    """F_j: the mean over client j's first `fisher_batches` minibatches (batch size 2 of its 4 rows)
    of the squared gradient of the minibatch's mean CE, at the client's new parameters."""
    ctx = _curv_ctx()
    theta = torch.tensor([[0.5, -0.5], [0.1, 0.2], [-0.3, 0.4]])
    _, F = probe_fedcurv({"lam": 0.01, "fisher_batches": fisher_batches})
    for c in range(3):
        rows = ctx.feds[0].client_indices[c]
        starts = [0, 2][:fisher_batches]
        acc = torch.zeros(3, 2)
        for s in starts:
            w = theta.clone().requires_grad_(True)
            x, y = ctx.pools.x_train[rows[s:s + 2]], ctx.pools.y_train[rows[s:s + 2]]
            loss = sum(ce(x[i] @ w.T, int(y[i])) for i in range(2)) / 2
            acc += torch.autograd.grad(loss, w)[0] ** 2
        torch.testing.assert_close(F[0, c], acc / len(starts), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("alpha", [0.5, 0.1, 1.0])
def test_fedrs_alpha_scales_the_missing_classes_logits(alpha):
    logits, batch, _, _ = _one_slot()
    scaled = logits * torch.tensor([1.0, alpha, 1.0])
    assert float(probe_restricted({"alpha": alpha})) == pytest.approx(float(_mean_ce(scaled, batch["y"])), rel=1e-6)


def _nca_hand(lam_neg, lam_pos, tau):
    """Eq. 14 written out: mean-over-classes BCE + lam_neg L_Neg (eq. 12) + lam_pos L_Pos (eq. 13)."""
    outputs, batch = _nca_batch()
    z, pair, y = outputs["logits"].tolist(), outputs["pair_logits"].tolist(), batch["y"].tolist()
    N, C = len(y), len(y[0])
    bce = sum(-(y[i][c] * math.log(sigmoid(z[i][c])) + (1 - y[i][c]) * math.log(1 - sigmoid(z[i][c])))
              for i in range(N) for c in range(C)) / (N * C)
    neg = pos = 0.0
    for i in range(N):
        negs = [c for c in range(C) if y[i][c] == 0]
        poss = [c for c in range(C) if y[i][c] == 1]
        if negs:
            neg += sum(sum(-math.log(1 - sigmoid(pair[i][c][r])) for r in range(C)
                           if r != c and sigmoid(pair[i][c][r]) > tau) / (C - 1) for c in negs) / len(negs)
        if poss:
            pos += sum(-(pair[i][c][c] - math.log(sum(math.exp(v) for v in pair[i][c]))) for c in poss) / len(poss)
    return bce + lam_neg * neg / N + lam_pos * pos / N


@pytest.mark.parametrize("lam_neg,lam_pos,tau", [(1.0, 1.0, 0.3), (0.3, 2.0, 0.3), (2.0, 0.3, 0.6), (0.0, 0.5, 0.3),
                                                 (0.7, 0.0, 0.1)])
def test_fednca_loss_weights_and_tau(lam_neg, lam_pos, tau):
    got = probe_fednca({"lam_neg": lam_neg, "lam_pos": lam_pos, "tau": tau})
    assert float(got) == pytest.approx(_nca_hand(lam_neg, lam_pos, tau), rel=1e-5)


def test_fednca_tau_moves_the_indicator():
    """The example's negative scores straddle tau: 0.3 and 0.6 keep different sets of terms."""
    assert _nca_hand(1.0, 0.0, 0.3) != pytest.approx(_nca_hand(1.0, 0.0, 0.6), rel=1e-3)


@pytest.mark.parametrize("threshold,weight", [(0.9, 1.0), (0.6, 0.4), (0.4, 0.6), (0.96, 0.5)])
def test_pseudo_label_threshold_and_weight(threshold, weight):
    """FixMatch eq. 4 on top of the labelled mean CE: weight * sum of the confident unlabeled rows'
    CE against their pseudo-labels / the real unlabeled rows (3)."""
    x = {0: 0.1, 1: 0.9, 2: 0.3, 3: 0.6, 4: 0.8}
    z = {i: _pseudo_model(torch.tensor([[v]]))[0] for i, v in x.items()}
    want = (ce(z[0], 0) + ce(z[1], 1)) / 2
    want = want + weight * sum(ce(z[i], c) for i, (c, conf) in PL_CONF.items() if conf >= threshold) / 3
    got = probe_pseudo({"threshold": threshold, "weight": weight})
    assert float(got) == pytest.approx(float(want), rel=1e-6)


# FedMT's eq. (5) on one batch of B = 2 rows: logits of the weak, strong and mixed rows
FIX_BATCH_LOGITS = torch.tensor([[0.5, -0.2, 1.0, 0.1], [-0.3, 0.8, 0.0, 0.4],      # weak x_fix
                                 [1.2, 0.1, -0.5, 0.3], [0.0, -1.0, 0.7, 0.2],      # strong A(x_fix)
                                 [0.3, 0.3, -0.2, 0.9], [0.6, -0.4, 0.1, -0.1]])    # x_mix
FIX_BATCH = {"mask": torch.ones(2), "y": torch.tensor([1, 0]), "yfix": torch.tensor([3, 0]),
             "ymix": torch.tensor([1, 2]), "lam": torch.tensor(0.7),
             "Mp": torch.tensor([[0.8, 0.1, 0.6, 0.3], [0.2, 0.9, 0.4, 0.7]])}


@pytest.mark.parametrize("lambda1,lambda2,wp", [(1.0, 1 / 16, 1.0), (0.5, 0.25, 0.3), (0.25, 0.5, 2.0),
                                                (2.0, 1.0, 0.0)])
def test_fedmt_eq5_weights(lambda1, lambda2, wp):
    """R_reg = w_p R_p + lambda2 (L_fix + lambda1 L_mix) per row, averaged: R_p the coarse CE of
    M softmax(f(x_weak)), L_fix the CE of the strong rows on y_fix, L_mix lam CE(y_fix) +
    (1 - lam) CE(y_mix) of the mixed rows."""
    z, b = FIX_BATCH_LOGITS, FIX_BATCH
    lam = float(b["lam"])
    want = 0.0
    for i in range(2):
        rp = -torch.log(b["Mp"][int(b["y"][i])] @ softmax(z[i]))
        lfix = ce(z[2 + i], int(b["yfix"][i]))
        lmix = lam * ce(z[4 + i], int(b["yfix"][i])) + (1 - lam) * ce(z[4 + i], int(b["ymix"][i]))
        want += (wp * rp + lambda2 * (lfix + lambda1 * lmix)) / 2
    part = PARTS["FixMixClient"](lambda1=lambda1, lambda2=lambda2, projected_weight=wp)
    loss, _ = part.client_objective(CLS)(z, b, None, {}, {})
    assert float(loss) == pytest.approx(float(want), rel=1e-6)


@pytest.mark.parametrize("threshold", [0.95, 0.75, 0.6, 0.35])
def test_fedmt_threshold_is_xi_of_s_fix(threshold):
    """S_fix = {i : max_k softmax(f(x_i))_k > xi}, and the client's aggregation weight is zero
    exactly when S_fix is empty (Alg. 1 line 11)."""
    ctx = _fix_ctx()
    part = PARTS["FixMixClient"](threshold=threshold)
    state = {part.key: part.init_state(ctx)}
    slots = np.array([[0, 0]])
    data = part.prepare_round(ctx, state, None, slots, {})
    want = [i for i, c in enumerate(FIX_CONF) if c > threshold]
    assert part.round_rows(ctx, data, slots, None)[0].tolist() == want
    assert len(data["mix"][0]) == len(want)
    assert part.weights(ctx, state, slots, np.array([[0]]), None).tolist() == [1.0]
    empty = PARTS["FixMixClient"](threshold=1.0)
    state = {empty.key: empty.init_state(ctx)}
    empty.prepare_round(ctx, state, None, slots, {})
    ctx2 = make_ctx(np.ones((1, 2, 2)))
    state[empty.key]["n_fix"] = np.array([0, 3])  # two clients of a run: the empty one weighs 0
    assert empty.weights(ctx2, state, np.array([[0, 0], [0, 1]]), np.array([[0, 1]]), None).tolist() == [0.0, 1.0]


def test_fedmt_mix_alpha_and_randaugment_reach_their_draws(monkeypatch):
    """The mixing weight lam ~ Beta(mix_alpha, mix_alpha) and RandAugment(num_ops, magnitude) get
    the part's own numbers (their maths is numpy's and torchvision's)."""
    import torchvision.transforms as TV

    seen = {"alpha": [], "ra": []}
    beta = FM.beta_lambdas

    def spy_beta(rngs, alpha):
        seen["alpha"].append(alpha)
        return beta(rngs, alpha)

    class SpyRA(TV.RandAugment):
        def __init__(self, num_ops=2, magnitude=9, **kw):
            seen["ra"].append((num_ops, magnitude))
            super().__init__(num_ops=num_ops, magnitude=magnitude, **kw)

    monkeypatch.setattr(FM, "beta_lambdas", spy_beta)
    monkeypatch.setattr(TV, "RandAugment", SpyRA)
    probe_fixmix({"threshold": 0.6, "lambda1": 0.5, "lambda2": 0.25, "mix_alpha": 0.3, "projected_weight": 0.7,
                  "randaugment": (3, 7)})
    assert seen["alpha"] == [0.3] and set(seen["ra"]) == {(3, 7)}


@pytest.mark.parametrize("lrs", [(0.5, 0.25), (0.1, 0.4)])
def test_scaffold_step_is_one_over_k_lr(lrs):
    """SCAFFOLD option II over two rounds, each with its Context's lr: c_i+ = c_i - c + (x - y_i) /
    (K_i lr), c += (1/N) sum (c_i+ - c_i); the correction of a step is c - c_i."""
    ctx0 = make_ctx(np.ones((1, 2, 2)), params={"w": torch.zeros(1, 2)})
    part = PARTS["ControlVariates"]()
    state = {part.key: part.init_state(ctx0)}
    slots, part_idx = full_slots(1, 2)
    c, ci = torch.zeros(1, 2), torch.zeros(2, 2)
    moves = [torch.tensor([[-1.0, 0.5], [0.0, -2.0]]), torch.tensor([[0.3, 0.3], [-0.6, 1.0]])]
    steps = [torch.tensor([2.0, 4.0]), torch.tensor([3.0, 1.0])]
    for rnd, (lr, move, k) in enumerate(zip(lrs, moves, steps), start=1):
        ctx = dataclasses.replace(ctx0, round=rnd, lr=lr)
        corr = part.grad_correction(ctx, state, slots)["w"]
        torch.testing.assert_close(corr, c.expand(2, 2) - ci)
        x = torch.tensor([[0.5, -0.5]]).expand(2, 2)
        agg = aggregation({"w": x + move}, slots, part_idx, {"w": torch.zeros(1, 2)}, anchor={"w": x.clone()}, steps=k)
        part.aggregate(ctx, state, agg, {"w": torch.zeros(1, 2)})
        ci_new = ci - c + (-move) / (k.view(-1, 1) * lr)
        c = c + (ci_new - ci).sum(0, keepdim=True) / 2
        ci = ci_new
        torch.testing.assert_close(state[part.key]["c_i"]["w"][0], ci)
        torch.testing.assert_close(state[part.key]["c"]["w"], c)


@pytest.mark.parametrize("epochs,lr", [(2, 0.5), (3, 0.2), (1, 2.0)])
def test_central_tuning_epochs_and_lr(epochs, lr):
    """privlabels eq. 6 ("mse") tuned with SGD: `epochs` steps (the six server rows are one batch)
    of size lr on mean_x sum_k w_k sum_{y in Y_k} (h_k(y|x) - h(y|x))^2, w_k = n_k / sum n."""
    x, glob, new = _tuning_case()
    present = torch.tensor(TUNE_PRESENT, dtype=torch.float64)
    w_k = torch.tensor([4.0, 12.0], dtype=torch.float64) / 16
    x = x.double()
    hk = torch.stack([torch.stack([softmax(x[i] @ new[CLS[0]][k].double().T + new[CLS[1]][k].double())
                                   for i in range(6)]) * present[k] for k in range(2)])
    W, b = glob[CLS[0]][0].double().clone(), glob[CLS[1]][0].double().clone()
    for _ in range(epochs):
        W.requires_grad_(True)
        b.requires_grad_(True)
        h = torch.stack([softmax(x[i] @ W.T + b) for i in range(6)])
        loss = sum(w_k[k] * (((hk[k] - h * present[k]) ** 2) * present[k]).sum(-1) for k in range(2)).mean()
        gW, gb = torch.autograd.grad(loss, (W, b))
        W, b = (W - lr * gW).detach(), (b - lr * gb).detach()
    got = probe_tuning({"kind": "mse", "epochs": epochs, "optimizer": "sgd", "lr": lr})
    torch.testing.assert_close(got[CLS[0]][0].double(), W, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[CLS[1]][0].double(), b, rtol=1e-5, atol=1e-6)


def test_fedtrans_finetuning_gets_the_parts_numbers(monkeypatch):
    """Phase 2's loop (finetune_on_server) receives the part's epochs, lr and batch size, and runs
    after the last round only."""
    seen = []
    real = FT.finetune_on_server

    def spy(*args, **kw):
        bound = inspect.signature(real).bind(*args, **kw)
        seen.append((bound.arguments["epochs"], bound.arguments["lr"], bound.arguments["batch_size"]))
        return real(*args, **kw)

    monkeypatch.setattr(FT, "finetune_on_server", spy)
    probe_fedtrans({"finetune_epochs": 2, "finetune_lr": 0.03, "finetune_batch": 7})
    assert seen == [(2, 0.03, 7)]
    tr = _trainer("two_head")
    part = PARTS["CoarsePretrainThenFinetune"](finetune_epochs=2, finetune_lr=0.03, finetune_batch=7)
    glob = _copy(tr.global_params)
    out, _ = part.server_step(dataclasses.replace(tr.ctx, round=1), {part.key: part.init_state(tr.ctx)}, glob,
                              _copy(tr.global_buffers), None, None)
    assert out is glob and len(seen) == 1  # round 1 of 2: nothing


def test_server_training_epochs_are_passes_over_the_server_rows(monkeypatch):
    """ServerTraining(epochs) trains `epochs` passes: the steps the trainer's train_slots takes."""
    tr = _trainer("small_resnet")
    seen = []
    real = tr.train_slots

    def spy(params, rows, present, rngs, algo, epochs, buffers=None, *a, **kw):
        seen.append((epochs, [len(r) for r in rows]))
        return real(params, rows, present, rngs, algo, epochs, buffers, *a, **kw)

    ctx = dataclasses.replace(tr.ctx, round=1, train_slots=spy)
    PARTS["ServerTraining"](epochs=3).server_step(ctx, {}, _copy(tr.global_params), _copy(tr.global_buffers), None,
                                                  [np.random.default_rng(0)])
    assert seen == [(3, [len(tr.feds[0].server_indices)])]
