"""The engine's best-round snapshot (TrainConfig.keep_best, driver.trainer._BestTracker) against an
oracle: a plain loop over the evaluated rounds of the same training that copies every run's global
parameters and buffers at each round and keeps, per run, those of the first round where the
validation macro-AUC peaks. Two FedNCA-ML smoke runs with BatchNorm, trained in one engine call,
peak at different rounds (one before the last), so a snapshot of the wrong run, the wrong round or
without its buffers fails; the stored result (runs.experiment.train_group) carries the same."""
import dataclasses
import math

import numpy as np
import pytest
import torch

from fedpaper.driver import FederatedTrainer, train
from fedpaper.driver.trainer import _BestTracker
from fedpaper.runs.experiment import get_pools, train_group

from fedpaper.papers.fednca import features as F
from fedpaper.papers.fednca import runs
from fedpaper.papers.fednca.profiles import settings

METRIC = "val_auc"  # the validation macro-AUC (runs.SELECT_BY)


@pytest.fixture(scope="module")
def setups():
    p = settings("smoke")
    p["profile"], p["seeds"], p["rounds"] = "smoke", [0, 1], 6
    p["model"] = {**p["model"], "norm": "batch"}
    specs = [s for k, s in runs.component_specs(p, "table5") if k["components"] == F.ROWS["c"][0]]
    return [s.build() for s in specs]


class _EveryRound(FederatedTrainer):
    """The plain trainer, copying every run's global parameters and buffers at each evaluated round."""

    def _evaluate(self, rnd, loss, slots):
        rows = super()._evaluate(rnd, loss, slots)
        for r, row in enumerate(rows):
            state = {k: v[r].detach().cpu().clone() for d in (self.global_params, self.global_buffers)
                     for k, v in d.items()}
            self.seen.append((r, rnd, row[METRIC], state))
        return rows


def _oracle(setups) -> list:
    s0 = setups[0]
    tr = _EveryRound(s0.method, s0.config, get_pools(s0.pools_key), [s.federation for s in setups], progress=False)
    tr.seen = []
    tr.run()
    best = {}
    for r, rnd, score, state in tr.seen:
        assert not math.isnan(score)
        if r not in best or score > best[r][1]:
            best[r] = (rnd, score, state)
    last = {r: (rnd, state) for r, rnd, _, state in tr.seen}
    return [(best[r][0], best[r][2], last[r]) for r in range(len(setups))]


def _same_state(snapshot: dict, state: dict) -> bool:
    got = {**snapshot["params"], **snapshot["buffers"]}
    return got.keys() == state.keys() and all(torch.equal(got[k], state[k]) for k in state)


def test_the_snapshot_is_the_first_peak_rounds_parameters_and_buffers(setups):
    oracle = _oracle(setups)
    s0 = setups[0]
    cfg = dataclasses.replace(s0.config, keep_best=METRIC)
    res = train(s0.method, cfg, get_pools(s0.pools_key), [s.federation for s in setups], progress=False)
    assert [snap["round"] for snap in res.snapshots] == [rnd for rnd, _, _ in oracle]
    for snap, (rnd, state, (last_round, last_state)) in zip(res.snapshots, oracle):
        assert _same_state(snap, state)
        assert any("running_mean" in k for k in snap["buffers"])
    # the test can fail: the runs peak at different rounds, one before the last, where the model differs
    rounds = [rnd for rnd, _, _ in oracle]
    assert len(set(rounds)) == 2 and min(rounds) < cfg.rounds
    r = rounds.index(min(rounds))
    assert not _same_state(res.snapshots[r], oracle[r][2][1])
    assert not all(torch.equal(res.snapshots[r]["buffers"][k], oracle[r][2][1][k]) for k in res.snapshots[r]["buffers"])
    # the result the store keeps for each run carries its snapshot
    stored = train_group([dataclasses.replace(s, config=cfg) for s in setups], False)
    for result, (rnd, state, _) in zip(stored, oracle):
        assert result["snapshot"]["round"] == rnd and _same_state(result["snapshot"], state)
    assert "snapshot" not in train_group(setups[:1], False)[0]  # off by default


def _tracked(values, skip=None, metric="m"):
    """The rounds _BestTracker keeps for runs whose per-round values of `metric` are `values`
    ([rounds][runs], None: no value), with each round's model tagged by its round."""
    R = len(values[0])
    t = _BestTracker(metric, R)
    params = {}
    for rnd, row in enumerate(values, start=1):
        params = {"w": torch.full((R, 2), float(rnd))}
        rows = [{} if v is None else {metric: v} for v in row]
        t.update(rnd, rows, params, {}, skip=None if skip is None else np.asarray(skip[rnd - 1]))
    snaps = t.snapshots(params, {})
    assert all(s["round"] is None or torch.equal(s["params"]["w"], torch.full((2,), float(s["round"]))) for s in snaps)
    return [s["round"] for s in snaps]


def test_the_tracker_selects_as_the_history_does():
    nan = float("nan")
    # first peak; rounds without a value passed over once a value was seen; none at all: the last round
    assert _tracked([[0.5, nan, None], [0.7, 0.2, None], [0.7, nan, None], [0.6, nan, None]]) == [2, 2, 4]
    # a diverged run keeps what it kept before (here: nothing before round 1 -> its last finite model)
    assert _tracked([[0.5, 0.5], [0.9, 0.9]], skip=[[False, True], [True, True]]) == [1, None]
