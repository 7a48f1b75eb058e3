"""Round-level behaviour with values: best-validation snapshot selection, the evaluated metrics,
and partial participation (only participants averaged, non-participants' state untouched)."""
import itertools

import numpy as np
import pytest
import torch
from reference_harness import (assert_params_close, config, final_params, initial_params, make_problem, max_diff,
                      result_from_history, run)
from reference_math import cross_entropy, forward, sgd, weighted

from fedpaper.algorithms.methods import Method

CLIENTS4 = [(5, [0, 1]), (8, [1, 2, 3]), (3, [0, 3]), (6, [2, 4])]


def _hist(run, seed, vals, tests):
    return [{"run": run, "seed": seed, "round": r + 1, "val_acc": v, "test_acc": t}
            for r, (v, t) in enumerate(zip(vals, tests))]


def test_best_reports_the_test_metric_where_validation_peaks_earliest_on_ties():
    rows = _hist(0, 10, [0.2, 0.6, 0.5, 0.6], [0.11, 0.22, 0.33, 0.44])  # tie at rounds 2 and 4: round 2
    rows += _hist(1, 11, [0.1, 0.2, 0.3, 0.9], [0.9, 0.8, 0.7, 0.15])    # peak at the last round
    best = result_from_history(rows[::-1]).best()  # row order must not matter
    got = {int(r.run): (int(r.seed), int(r.best_round), float(r.test_acc)) for r in best.itertuples()}
    assert got == {0: (10, 2, 0.22), 1: (11, 4, 0.15)}


def test_best_without_validation_is_the_last_round():
    rows = [{"run": 0, "seed": 0, "round": r, "test_acc": a} for r, a in ((1, 0.5), (3, 0.2), (2, 0.9))]
    best = result_from_history(rows).best()
    assert best[["best_round", "test_acc"]].values.tolist() == [[3, 0.2]]


def _accuracy_and_macro_f1(logits, y, K):
    pred = logits.argmax(1)
    acc = float((pred == y).double().mean())
    f1s = []
    for c in range(K):
        tp = int(((pred == c) & (y == c)).sum())
        fp, fn = int(((pred == c) & (y != c)).sum()), int(((pred != c) & (y == c)).sum())
        if tp + fp + fn:
            f1s.append(2 * tp / (2 * tp + fp + fn))
    return acc, float(np.mean(f1s))


def test_history_metrics_are_those_of_the_global_model_on_each_split():
    """The last round's test/val accuracy and macro-F1 are the final global model's, on the test rows
    (test pool) and the validation rows (training pool)."""
    p = make_problem(CLIENTS4, K=5, d=3, extra_rows=30, val_rows=np.arange(22, 40), test_rows=np.arange(0, 30))
    cfg = config(model="ref_mlp", rounds=3, lr=0.8)
    res = run(Method("FedAvg"), [p], cfg)
    last = res.history.sort_values("round").iloc[-1]
    params = {k: v[0] for k, v in res.final_params.items()}
    for split, rows in (("test", p.fed.test_indices), ("val", p.fed.val_indices)):
        r = torch.as_tensor(rows)
        acc, f1 = _accuracy_and_macro_f1(forward(params, p.x[r]), p.y[r], p.K)
        assert last[f"{split}_acc"] == pytest.approx(acc, abs=1e-6)  # computed in float32
        assert last[f"{split}_f1"] == pytest.approx(f1, abs=1e-6)
    assert sorted(res.history["round"]) == [1, 2, 3]


def _one_round(p, theta, lr, clients, c=None, c_i=None):
    """FedAvg/SCAFFOLD round over `clients` (full batch, one step): new global (and control variates)."""
    ys, n = {}, p.sizes
    for i in clients:
        x, y = p.client_xy(i)
        corr = None if c is None else {k: c[k] - c_i[i][k] for k in c}
        ys[i] = sgd(theta, lambda q, x=x, y=y: cross_entropy(forward(q, x), y), lr, 1, corr)
    glob = weighted([ys[i] for i in clients], n[list(clients)] / n[list(clients)].sum())
    if c is None:
        return glob, None, None
    c_i = list(c_i)
    delta = {k: 0.0 for k in c}
    for i in clients:
        new = {k: c_i[i][k] - c[k] + (theta[k] - ys[i][k]) / lr for k in c}
        delta = {k: delta[k] + new[k] - c_i[i][k] for k in c}
        c_i[i] = new
    return glob, {k: c[k] + delta[k] / len(c_i) for k in c}, c_i


def _matches(got, want):
    return max_diff(got, want) < 1e-6 * max(1.0, max(float(v.abs().max()) for v in want.values()))


def test_partial_participation_averages_only_the_participants():
    """participation 0.5 of 4 clients: the global model is the n_i-weighted mean over the 2
    participants (weights renormalised over them), for exactly one of the 6 possible pairs."""
    p, cfg = make_problem(CLIENTS4, K=5, d=3), config(model="ref_mlp", participation=0.5)
    theta = initial_params(cfg, 0)
    got = final_params(Method("FedAvg"), p, cfg)
    hits = [s for s in itertools.combinations(range(4), 2) if _matches(got, _one_round(p, theta, cfg.lr, s)[0])]
    assert len(hits) == 1
    s = hits[0]
    full = weighted([_one_round(p, theta, cfg.lr, (i,))[0] for i in s], p.sizes[list(s)] / p.sizes.sum())
    assert max_diff(got, full) > 1e-3  # not normalising over the participants would be visible


def test_partial_participation_leaves_non_participants_control_variates_untouched():
    """SCAFFOLD, 2 rounds of 2 of 4 clients: only participants' c_i change; c moves by (1/M) sum of
    their changes. Exactly one pair of participant sets reproduces the engine, and in it a client
    that sat out round 1 trains in round 2 with its untouched c_i = 0."""
    p, cfg = make_problem(CLIENTS4, K=5, d=3, seed=2), config(model="ref_mlp", participation=0.5, rounds=2)
    theta0 = initial_params(cfg, 2)
    got = final_params(Method("SCAFFOLD", client="scaffold"), p, cfg)
    zero = {k: torch.zeros_like(v) for k, v in theta0.items()}
    hits = []
    for s1, s2 in itertools.product(itertools.combinations(range(4), 2), repeat=2):
        theta1, c1, ci1 = _one_round(p, theta0, cfg.lr, s1, zero, [zero] * 4)
        theta2, _, _ = _one_round(p, theta1, cfg.lr, s2, c1, ci1)
        if _matches(got, theta2):
            hits.append((s1, s2))
    assert len(hits) == 1
    s1, s2 = hits[0]
    assert set(s2) - set(s1) and set(s2) & set(s1), "seed 2: one client trains twice, one sat out round 1"


def test_partial_participation_afl_renormalises_the_mixture_over_participants():
    """AFL, 2 of 4 clients: the (uniform) mixture restricted to the participants and renormalised,
    i.e. weights 1/2 each, for exactly one pair."""
    p, cfg = make_problem(CLIENTS4, K=5, d=3), config(model="ref_mlp", participation=0.5)
    theta = initial_params(cfg, 0)
    got = final_params(Method("AFL", server="afl", afl_step=0.5), p, cfg)
    hits = []
    for s in itertools.combinations(range(4), 2):
        states = [_one_round(p, theta, cfg.lr, (i,))[0] for i in s]
        if _matches(got, weighted(states, [0.5, 0.5])):
            hits.append(s)
    assert len(hits) == 1
