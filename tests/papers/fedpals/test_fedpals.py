"""Fast unit tests of the FedPALS paper module (no real data, no long training)."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from fedpaper.algorithms import weights as W
from fedpaper.algorithms.parts import argument
from fedpaper.papers.fedpals import claims as CL
from fedpaper.outputs.registry import get_claim
from fedpaper.papers.fedpals import geometry as G
from fedpaper.papers.fedpals import profiles as P
from fedpaper.papers.fedpals import real as RL
from fedpaper.papers.fedpals import runs as R


def _v(check, tables):
    """A claim check as registered (claim n of the function cn): (True/False/None or the verdict, detail)."""
    v = get_claim(f"fedpals/claim-{check.__name__[1:]}").check(tables)
    return {"pass": True, "fail": False, "not checkable": None}.get(v.verdict, v.verdict), v.detail


@pytest.fixture(scope="module")
def smoke():
    p = P.runs("smoke")
    p.update(P.grid("smoke"))
    return p


def _spec(p, **kw):
    return R.base_spec(p, "cifar10", kw.pop("split", {"scheme": "sparsity", "C": 3}), seed=kw.pop("seed", 0), **kw)


def test_federation_target_is_last_partition(smoke):
    spec = _spec(smoke)
    fed = R.federation(spec)
    y_tr, y_te = R.labels(spec.data)
    part = R.partition(spec.data, spec.partition["split"], 10, spec.partition["data_fraction"], 0)
    assert len(fed.client_indices) == 9
    np.testing.assert_array_equal(fed.val_indices, part.client_indices[9])
    np.testing.assert_allclose(fed.target_marginal, part.marginals[9])
    assert not set(np.concatenate(fed.client_indices)) & set(fed.val_indices)
    test_marg = np.bincount(y_te[fed.test_indices], minlength=10) / len(fed.test_indices)
    np.testing.assert_allclose(test_marg, fed.target_marginal, atol=0.02)
    assert len(fed.test_indices) <= smoke["test_n"]


def test_seeds_redraw_the_partition(smoke):
    a, b = R.federation(_spec(smoke, seed=0)), R.federation(_spec(smoke, seed=1))
    assert not np.array_equal(a.val_indices, b.val_indices)


def test_oracle_clients_follow_target(smoke):
    spec = _spec(smoke, method="Oracle")
    fed = R.federation(spec)
    y_tr, _ = R.labels(spec.data)
    assert [k for k, _ in spec.method["parts"]] == ["FedAvgWeights"] and spec.partition["oracle"] and R.method_label(spec) == "Oracle"
    for c in fed.client_indices:
        m = np.bincount(y_tr[c], minlength=10) / len(c)
        np.testing.assert_allclose(m, fed.target_marginal, atol=0.1)
    assert not set(np.concatenate(fed.client_indices)) & set(fed.val_indices)


def test_dirichlet_federation(smoke):
    fed = R.federation(_spec(smoke, split={"scheme": "dirichlet", "beta": 0.5}))
    assert len(fed.client_indices) == 9 and abs(fed.target_marginal.sum() - 1) < 1e-9


def test_lambda_grid_hits_ess():
    rng = np.random.default_rng(0)
    S = rng.dirichlet(np.full(10, 0.3), size=9)
    n = rng.integers(50, 300, size=9).astype(float)
    T = rng.dirichlet(np.full(10, 0.3))
    grid = R.lambda_grid(S, n, T, [0.25, 0.5, 0.75])
    assert grid[0] == ("lambda=0", 0.0)
    for label, lam in grid[1:]:
        ess = W.effective_sample_size(W.fedpals_weights(S, n, T, lam), n) / n.sum()
        assert abs(ess - int(label.split()[1][:-1]) / 100) < 1e-3
    assert len({lam for _, lam in grid}) == len(grid)


def test_method_specs_expand_fedpals_grid(smoke):
    p = dict(smoke, ess_grid=[0.5])
    specs = R.method_specs(p, "cifar10", {"scheme": "sparsity", "C": 3}, ["FedPALS", "FedAvg"], [0, 1])
    pals = [s for s in specs if s.tags["method"] == "FedPALS"]
    assert {s.tags["lam"] for s in pals} >= {0.0} and len(pals) >= 2
    assert {argument(s.method, "lam") for s in pals} == {s.tags["lam"] for s in pals}
    assert [s.seed for s in specs if s.tags["method"] == "FedAvg"] == [0, 1]


def test_selected_keeps_best_validation_run(monkeypatch):
    specs = [SimpleNamespace(seed=0, m="a", lam=0.0), SimpleNamespace(seed=0, m="a", lam=5.0)]
    res = [{"history": [{"val_acc": 0.2}, {"val_acc": 0.4}]}, {"history": [{"val_acc": 0.6}]}]
    monkeypatch.setattr(R, "setting_key", lambda s: s.m)
    sel = R.selected(specs, res)
    assert sel[("a", 0)][0].lam == 5.0


def test_fig1_geometry():
    b = G.fig1_panel(**G.FIG1_PANELS["B"])
    assert b["inside"] and np.allclose(b["p0"], b["T"], atol=1e-9)
    a = G.fig1_panel(**G.FIG1_PANELS["A"])
    d, proj = W.projection_distance(a["S"], a["T"], return_projection=True)
    assert not a["inside"] and np.allclose(a["p0"], proj, atol=1e-9)
    np.testing.assert_allclose(a["p0"], [0.5, 0.25, 0.25], atol=1e-9)
    assert a["dfa"] > a["d0"] and b["dfa"] > b["d0"]
    xy = G.to_xy(np.eye(3))
    assert np.allclose(np.linalg.norm(xy[0] - xy[1]), np.linalg.norm(xy[1] - xy[2]))


def test_fig1_table_and_claim_32():
    t = G.fig1_table()
    ok, detail = _v(CL.c32, {"fedpals/fig1": t})
    assert ok is True and "FedAvg" in detail


def _t1(fedpals=90.0, oracle=95.0):
    rows = []
    for d, s in CL.T1_ROWS[:5]:
        for m, v in {"FedPALS": fedpals, "FedAvg": 60.0, "FedProx": 61.0, "SCAFFOLD": 59.0, "AFL": 70.0,
                     "FedRS": 65.0, "Oracle": oracle, "FedPALS (lambda=0)": 1.0}.items():
            rows.append({"dataset": d, "label_split": s, "clients": 10, "method": m, "metric": "accuracy_pct",
                         "mean": v, "std": 3.0, "n_seeds": 3})
    return pd.DataFrame(rows)


def test_table1_claims_on_fake_tables():
    good = {"fedpals/table1": _t1()}
    # no PACS row in the fake table: every other row holds, so "partial: 5 of 6 rows", not PASS
    for c in (CL.c1, CL.c2, CL.c3, CL.c4):
        assert _v(c, good)[0] == "partial"
    assert "5 of 6 hold, 1 not checkable" in _v(CL.c1, good)[1]
    bad = {"fedpals/table1": _t1(fedpals=65.0, oracle=85.0)}
    assert _v(CL.c1, bad)[0] is False and _v(CL.c4, bad)[0] is False
    assert _v(CL.c1, {})[0] is None


def test_distance_and_fig9_claims():
    fig2a = pd.DataFrame({"C": [2, 3, 10], "metric": "projection_distance", "mean": [0.2, 0.1, 0.0]})
    assert _v(CL.c7, {"fedpals/fig2a": fig2a})[0] is True
    assert _v(CL.c7, {"fedpals/fig2a": fig2a.assign(mean=[0.1, 0.2, 0.0])})[0] is False
    fig9 = pd.DataFrame({"delta": [0, 0, 1, 1], "projection_distance": [0, 0, .375, .375],
                         "method": ["FedAvg", "FedPALS"] * 2, "mean": [90, 95, 80, 85], "std": 1.0})
    assert _v(CL.c24, {"fedpals/fig9": fig9})[0] is True and _v(CL.c23, {"fedpals/fig9": fig9})[0] is True
    assert _v(CL.c24, {"fedpals/fig9": fig9.assign(mean=[95, 90, 80, 85])})[0] is False


def test_registered_checks_return_verdicts():
    t = {"fedpals/fig2a": pd.DataFrame({"C": [10, 2, 3], "metric": "projection_distance", "mean": [0.0, 0.2, 0.1]})}
    assert get_claim("fedpals/claim-7").check(t).verdict == "pass"  # C order from the C column


def test_numerical_claims():
    assert _v(CL.c30, {})[0] is True
    assert _v(CL.c31, {})[0] is True


def test_pacs_split_on_stand_in():
    rng = np.random.default_rng(0)
    y_tr, y_te = rng.integers(0, 7, 3000), rng.integers(0, 7, 500)
    sp = RL.pacs_split(y_tr, y_te, seed=0)
    for k, c in enumerate(sp["clients"]):
        assert k not in set(y_tr[c])
    assert 2 not in set(y_tr[sp["val"]]) and 2 not in set(y_te[sp["test"]])
    assert sp["T"][2] == 0 and abs(sp["T"].sum() - 1) < 1e-12
    third = (3000 - 300) / 3
    assert abs(len(sp["clients"][2]) - 0.1 * third * 6 / 7) < 15
    allidx = np.concatenate(sp["clients"] + [sp["val"]])
    assert len(np.unique(allidx)) == len(allidx)
    n = np.array([len(c) for c in sp["clients"]], float)
    S = np.stack([RL.marginal(y_tr[c], 7) for c in sp["clients"]])
    a0, afa = W.fedpals_weights(S, n, sp["T"], 0.0), n / n.sum()
    assert afa.argmin() == 2 and a0.argmax() == 2  # claim 10 on the stand-in


def test_perturb_marginal_and_location_clients():
    T = np.array([0.5, 0.5, 0.0])
    assert np.allclose(RL.perturb_marginal(T, 0.0, 0), T)
    tp = RL.perturb_marginal(T, 0.5, 1)
    assert abs(tp.sum() - 1) < 1e-12 and (tp >= 0).all()
    loc = np.repeat(np.arange(30), np.arange(1, 31))
    clients = RL.location_clients(loc, 10, seed=0)
    assert sum(len(c) for c in clients) == len(loc)
    for c in clients:
        for other in clients:
            if other is not c:
                assert not set(loc[c]) & set(loc[other])


def test_fig9_lambda_grid_is_tuned_between_alpha0_and_fedavg():
    from fedpaper.blocks.data.synthetic import N1, N2, S1, S2, target_marginal

    S, n = np.stack([S1, S2]), np.array([N1, N2], float)
    for d in (0.0, 0.5, 1.0):
        T = target_marginal(d)
        assert [lam for lam in {0.0} | {round(W.lambda_for_ess(S, n, T, f), 9) for f in (0.25, 0.5, 0.75)}] == [0.0]
        lams = G.fig9_lambdas(S, n, T, [0.25, 0.5, 0.75])
        assert len(lams) == 4 and lams[0] == 0.0
        w1 = [W.fedpals_weights(S, n, T, lam)[0] for lam in lams]  # client 1's weight, 0.5 -> 40/58
        assert 0.5 - 1e-6 <= w1[0] < w1[1] < w1[2] < w1[3] < N1 / (N1 + N2)


def test_fig9_task_standardised_on_the_clients_training_points():
    from fedpaper.blocks.data import gaussian_task

    t = G.standardise_task(gaussian_task(0.5, seed=1, n_test=100, n_val=50))
    x = np.concatenate([c[0] for c in t.clients])
    np.testing.assert_allclose(x.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(x.std(0), 1, atol=1e-5)
    assert abs(t.x_test.mean()) < 1.5 and t.meta["standardised"]
    raw = gaussian_task(0.5, seed=1, n_test=100, n_val=50)
    assert np.array_equal(raw.y_test, t.y_test) and not np.allclose(raw.x_test, t.x_test)


def test_quick_runs_are_a_subset_of_long_runs():
    q, lg = P.runs("quick"), P.runs("long")
    for k in ("rounds", "data_fraction", "test_n", "lr", "batch_size", "lenet_c2", "num_clients", "seeds"):
        assert q[k] == lg[k], k
    assert set(q["ess_grid"]) <= set(lg["ess_grid"]) and lg["ess_grid"] == P.PAPER_ESS
    gq, gl = P.grid("quick"), P.grid("long")
    for k in ("shift_C", "shift_beta", "fig8b_E", "fig8c_clients", "fig8a_C"):
        assert set(gq[k]) <= set(gl[k]), k
    for k in ("shift_methods", "fig7_methods", "fig8_methods"):
        assert set(gq[k]) <= set(gl[k]), k
    assert "3 seeds (paper 8)" in P.notes("long")[0] and "10% (CIFAR-10)" in " ".join(P.notes("quick"))


def test_shift_figures_mark_chance_at_100_over_C_and_never_draw_std_below_zero():
    import pandas as pd

    from fedpaper.papers.fedpals import train as TR

    tab = pd.DataFrame({"label_split": ["C=2", "C=3", "beta=0.1"], "method": ["FedAvg"] * 3,
                        "mean": [5.0, 98.0, 40.0], "std": [9.0, 4.0, 3.0], "n_seeds": [3, 3, 3]})
    lo, hi = TR.clipped_std(tab)
    assert list(lo) == [5.0, 4.0, 3.0] and list(hi) == [9.0, 2.0, 3.0]
    cap = TR.std_caption(tab)
    assert "100/C %" in cap and "Dirichlet targets: chance not marked" in cap
    assert TR.chance_note(tab.assign(C=[2, 3, 0]).iloc[:1], "C", "C") == "at chance: FedAvg at C=2"


def test_paper_profile_has_the_papers_table1_setting_and_says_its_seeds():
    from fedpaper.outputs.artifacts import resolve_out_dir
    from fedpaper.ground.paths import figures_dir
    from fedpaper.papers.fedpals import train as TR

    p = P.runs("paper")
    p.update(P.grid("paper"))
    assert p["rounds"] == {"fashion-mnist": P.PAPER_ROUNDS, "cifar10": P.PAPER_ROUNDS} == {"fashion-mnist": 150, "cifar10": 150}
    assert not p["data_fraction"] and p["test_n"] is None  # full partitions, the whole resampled test split
    assert p["ess_grid"] == P.PAPER_ESS == [0.25, 0.5, 0.75] and p["eval_every"] == 1  # vague-8, -19
    assert (p["lr"], p["batch_size"], p["num_clients"]) == (0.1, 32, 10)  # vague-5, -1
    assert 3 <= p["seeds"] <= P.PAPER_SEEDS == 8
    seeds_note = [] if p["seeds"] == 8 else [f"paper profile (2-core CPU): {p['seeds']} seeds (paper 8)"]
    assert p["method_lr"] == {"SCAFFOLD": 0.01}  # vague-5's fallback, said in the notes
    assert P.notes("paper") == seeds_note + ["SCAFFOLD local lr 0.01 instead of 0.1 (vague-5: 0.1 does not train "
                                             "it stably at full partitions)"]
    assert TR.table1_settings(p) == TR.TABLE1_SETTINGS and "stand_ins" not in p
    assert resolve_out_dir("paper") == figures_dir() / "paper"


def test_table1_sweep_records_all_its_runs_first_then_stops_at_the_deadline_and_resumes(smoke, tmp_path, monkeypatch):
    """Table 1's runs trained as the pipeline trains them (its job's sweeps, one per setting, in a scope
    that owns them): every run is in the store's index before the first sweep starts."""
    from pipeline_harness import declared_job

    from fedpaper.papers import fedpals
    from fedpaper.runs import store as S
    from fedpaper.runs import sweep as W
    from fedpaper.papers.fedpals import train as TR

    monkeypatch.setenv("FEDPAPER_CACHE", str(tmp_path))
    monkeypatch.setenv("FEDPAPER_PROGRESS", "0")
    job, _ = declared_job(fedpals.table1, "fedpals/table1", profile="smoke")
    p = dict(smoke, seeds=[0, 1], rounds={"fashion-mnist": 1, "cifar10": 1})
    settings = [{"dataset": "fashion-mnist", "split": {"scheme": "sparsity", "C": 3}, "methods": ["FedAvg", "Oracle"]},
                {"dataset": "cifar10", "split": {"scheme": "dirichlet", "beta": 0.1}, "methods": ["FedAvg"]}]
    specs = TR.settings_specs(p, settings)
    scope = W.SweepScope(artifact="fedpals/table1", owner=("fedpals/table1", "smoke"))  # as the pipeline makes it
    monkeypatch.setenv(W.DEADLINE_ENV, "1")  # long past: no run starts
    with pytest.raises(W.SweepStopped, match="0 of 4 runs done"):
        job.run_declared(specs, None, scope)
    store = S.ResultStore()
    assert store.progress("fedpals/table1", "smoke") == (0, 6)  # both settings' runs, before any training
    monkeypatch.delenv(W.DEADLINE_ENV)
    results = job.run_declared(specs, None, scope)
    assert len(specs) == len(results) == 6 and store.progress("fedpals/table1", "smoke") == (6, 6)
