"""The hooks' Context: frozen, made by keyword, one per round carrying that round (1-based) and its
learning rate; the parts that act on the round (FedMT's S_mix draw and last-round metrics,
FedTrans's fine-tuning after the last round) read it from the Context, so they follow the driver."""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from part_harness import make_ctx

from fedpaper.algorithms.base import Algorithm, Context, Part
from fedpaper.algorithms.families import family_algorithm
from fedpaper.algorithms.fedmt import FixMixClient
from fedpaper.driver import train
from fedpaper.engine import TrainConfig

from fedmt_stand_in import STAND_IN, fed as _fed, pools  # noqa: F401 (pools: a fixture)


def _cfg(model="small_resnet", rounds=3, **kw):
    mk = {"num_classes": 8, "widths": (4, 8)}
    if model == "two_head":
        mk.update(coarse_classes=4, backbone="small_resnet")
    return TrainConfig(model=model, model_kwargs=mk, lr=0.03, momentum=0.9, lr_schedule="cosine", batch_size=8,
                       local_epochs=1, rounds=rounds, **kw)


def test_context_is_frozen_and_made_by_keyword():
    ctx = make_ctx(np.ones((1, 2, 3)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.round = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.lr = 0.1
    fields = [getattr(ctx, f.name) for f in dataclasses.fields(Context)]
    with pytest.raises(TypeError):
        Context(*fields)  # positional construction is refused
    later = dataclasses.replace(ctx, round=2, lr=0.5)
    assert (ctx.round, ctx.lr) == (0, None) and (later.round, later.lr) == (2, 0.5)
    assert later.counts is ctx.counts  # the rest is the same objects, not copies


class _Spy(Part):
    """Records the (round, lr) of the Context every hook sees."""

    key = "spy"

    def __init__(self):
        self.seen = []

    def _see(self, hook, ctx):
        self.seen.append((hook, ctx.round, ctx.lr))

    def check(self, ctx):
        self._see("check", ctx)

    def init_state(self, ctx):
        self._see("init_state", ctx)
        return None

    def broadcast(self, ctx, state, params, slots):
        self._see("broadcast", ctx)
        return params

    def prepare_round(self, ctx, state, params, slots, buffers):
        self._see("prepare_round", ctx)
        return None

    def augment(self, ctx, batch, mask_np, aug_rngs, data, epoch, step):
        self._see("augment", ctx)
        return None

    def aggregate(self, ctx, state, agg, glob):
        self._see("aggregate", ctx)
        return glob

    def server_step(self, ctx, state, glob, bufs, agg, rngs):
        self._see("server_step", ctx)
        return glob, bufs

    def round_metrics(self, ctx, state, glob, bufs):
        self._see("round_metrics", ctx)
        return None


def test_every_hook_sees_the_round_the_driver_is_on(pools):
    """Round 0 at setup (check, init_state); in round r (1..rounds) every hook sees r and the lr
    schedule's value at r (cosine: three different values), and a new Context each round."""
    spy = _Spy()
    cfg = _cfg(rounds=3)
    train(Algorithm("spy", (spy,)), cfg, pools, [_fed(pools)], progress=False)
    assert [s[:2] for s in spy.seen[:2]] == [("check", 0), ("init_state", 0)]
    lr = {r: cfg.optim().lr_at(r, 3) for r in (1, 2, 3)}
    assert len(set(lr.values())) == 3
    by_round = {}
    for hook, rnd, rlr in spy.seen[2:]:
        assert rlr == lr[rnd], (hook, rnd)
        by_round.setdefault(rnd, []).append(hook)
    assert sorted(by_round) == [1, 2, 3]
    for rnd, hooks in by_round.items():
        assert hooks[:2] == ["broadcast", "prepare_round"] and hooks[-3:] == ["aggregate", "server_step",
                                                                             "round_metrics"]
        assert "augment" in hooks


def _fixmix_ctx(rnd):
    """One client of 12 rows, all confidently class 0: S_fix = all rows, S_mix = 12 draws."""
    n = 12
    pools = SimpleNamespace(x_train=torch.zeros(n, 1), correspondence=np.array([[1.0, 0.0], [0.0, 1.0]]),
                            labels={"coarse": (torch.zeros(n, dtype=torch.int64), 2)})
    feds = [SimpleNamespace(client_indices=[np.arange(n)], seed=5)]
    predict = lambda params, xp, rows, buffers=None: [torch.tensor([[9.0, 0.0]]).expand(len(r), 2)  # noqa: E731
                                                      for r in rows]
    return make_ctx(np.ones((1, 1, 2)), pools=pools, feds=feds, predict=predict, round=rnd)


def test_fedmt_s_mix_draw_follows_the_contexts_round():
    """S_mix (|S_fix| rows drawn with replacement) is drawn per client AND round: the same round's
    Context gives the same draw whatever was called before, another round another draw."""
    part = FixMixClient(threshold=0.5)
    slots = np.array([[0, 0]])

    def draw(rnd, state=None):
        ctx = _fixmix_ctx(rnd)
        state = state or {part.key: part.init_state(ctx)}
        return part.prepare_round(ctx, state, None, slots, {})["mix"][0].tolist(), state

    one, state = draw(1)
    two, _ = draw(2, state)
    again, _ = draw(1, state)  # the part keeps no round count of its own
    assert len(one) == 12 and one == again and one != two


def test_fedmt_last_round_metrics_follow_the_driver(pools):
    """FedMT (E)'s 20-class accuracies are computed after the last round only: NaN in the history
    of rounds 1, 2 of 3, a number in round 3."""
    algo = family_algorithm("FedMT (E)", "fedmt", {"estimator": "estimate", "threshold": 0.13, "server_epochs": 1})
    h = train(algo, _cfg(rounds=3), pools, [_fed(pools)], progress=False).history
    assert h["round"].tolist() == [1, 2, 3]
    assert h["test_acc_coarse_true"].isna().tolist() == [True, True, False]


def test_fedtrans_finetunes_after_the_driver_s_last_round_only(pools):
    """FedTrans's phase 2 (a new K-class head, fine-tuned on the server) runs once, in the server
    step of the Context whose round is cfg.rounds: the K-class head is frozen on the clients, so it
    stays the initial one through rounds 1, 2 and changes only in round 3."""
    heads = []

    from fedpaper.algorithms.fedtrans import CoarsePretrainThenFinetune

    class Watch(CoarsePretrainThenFinetune):
        def server_step(self, ctx, state, glob, bufs, agg, rngs):
            glob, bufs = super().server_step(ctx, state, glob, bufs, agg, rngs)
            heads.append((ctx.round, glob["classifier.weight"].clone()))
            return glob, bufs

    algo = family_algorithm("FedTrans", "fedtrans", {"finetune_epochs": 1})
    algo = Algorithm("FedTrans", tuple(Watch(1) if isinstance(p, CoarsePretrainThenFinetune) else p
                                       for p in algo.parts))
    h = train(algo, _cfg("two_head", rounds=3), pools, [_fed(pools)], progress=False).history
    assert [r for r, _ in heads] == [1, 2, 3]
    assert torch.equal(heads[0][1], heads[1][1]) and not torch.equal(heads[1][1], heads[2][1])
    assert h["test_acc_coarse"].isna().tolist() == [True, True, False]
