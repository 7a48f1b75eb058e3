"""Fast unit tests of the private-label-sets pieces (specs, federations, App B, tables, claims)."""
import numpy as np
import pandas as pd
import pytest

from fedpaper.papers.privlabels import appendix_b as appb
from fedpaper.outputs.registry import get_claim
from fedpaper.claims import CHANCE_RULE, NOT_TESTABLE, at_chance, cell_of
from fedpaper.papers.privlabels import runs as runs
from fedpaper.papers.privlabels import config_tables as tabs
from fedpaper.outputs.parameters import resolve_seeds
from fedpaper.papers.privlabels import _settings
from fedpaper.papers.privlabels.profiles import NOTES, SETTINGS


def _params(profile: str) -> dict:
    """The profile's settings as the pipeline hands them to an artifact (seeds as lists)."""
    return resolve_seeds(_settings(profile))


def _registered(n):
    """The registered check of claim n: tables -> (True/False/None or the verdict, detail)."""
    def check(tables):
        v = get_claim(f"privlabels/claim-{n}").check(tables)
        return {"pass": True, "fail": False, "not checkable": None}.get(v.verdict, v.verdict), v.detail
    return check


class pc:  # noqa: N801  (the claims as check_claim<n>, as the tests below call them)
    NOT_TESTABLE = NOT_TESTABLE


for _n in range(1, 21):
    setattr(pc, f"check_claim{_n}", staticmethod(_registered(_n)))


def test_profiles_paper_setting_and_quick_notes():
    p = SETTINGS["paper"]
    assert (p["num_clients"], p["samples_per_client"], p["rounds"], p["seeds"]) == (10, 2000, 100, 10)
    assert p["server_size"] == {"cifar10": 5000, "fashion-mnist": 6000}
    assert (p["lr"], p["batch_size"], p["mu"], p["fedrs_alpha"], p["tuning_epochs"]) == (1e-3, 64, 0.01, 0.5, 3)
    assert p["labels"] == list(range(2, 11)) and p["widths"] == [32, 32, 64, 64] and p["hidden"] == 512
    assert NOTES["paper"] == [] and len(NOTES["quick"]) >= 5
    assert {2, 3, 5, 10} <= set(SETTINGS["quick"]["labels"])


def test_specs_coincide_across_artifacts_and_seed_innermost():
    p = _params("smoke")
    full = runs.main_specs(p, "cifar10", p["labels"])
    L5 = runs.main_specs(p, "cifar10", [5])
    assert set(L5) <= set(full)  # the bar plots read the same cached runs
    assert [s.seed for s in full[:2]] == p["seeds"]  # seeds innermost: one engine batch per method
    names = {(s.tags["display"], s.tags["setting"]) for s in full}
    assert ("FedRS", "private") not in names and ("FedRS", "public") in names
    assert ("Tuning-MSE", "private") in names


def test_private_method_mapping():
    p = _params("paper")
    m = runs.method_for("FedProx", "private", p)
    assert m.private and m.client == "fedprox" and m.mu == 0.01
    assert runs.method_for("Tuning-Pairwise", "public", p).tuning == "pairwise"
    assert runs.method_for(runs.PAIRWISE_ALL, "private", p).tuning == "pairwise_all"
    assert runs.method_for("Tuning-MSE", "private", p, sgd_tuning=True).tuning_optimizer == "sgd"
    with pytest.raises(ValueError):
        runs.method_for("FedRS", "private", p)


@pytest.mark.parametrize("L", [2, 5])
def test_federation_sizes_label_sets_and_disjointness(L):
    p = _params("smoke")
    p["stand_ins"]["cifar10"] = dict(p["stand_ins"]["cifar10"], n_train=3000)
    p["samples_per_client"] = 100
    spec = runs.run_spec(p, "cifar10", "FedAvg", "private", L, seed=3)
    fed, part = runs.federation(spec)
    y = runs.pools(spec.data).y_train.numpy()
    assert len(fed.client_indices) == 10
    assert all(len(c) == 100 for c in fed.client_indices)
    for c, s in zip(fed.client_indices, fed.label_sets):
        assert len(s) == L and set(np.unique(y[c])) <= set(s)
    allc = np.concatenate(fed.client_indices)
    assert len(np.unique(allc)) == len(allc)
    assert not (set(allc) & set(fed.server_indices)) and not (set(allc) & set(fed.val_indices))
    spec2 = runs.run_spec(p, "cifar10", "Tuning-MSE", "public", L, seed=3)
    fed2, _ = runs.federation(spec2)
    assert all(np.array_equal(a, b) for a, b in zip(fed.client_indices, fed2.client_indices))


def test_share_l10_maps_private_and_fedrs_to_public_runs():
    p = _params("smoke")
    p["share_L10"] = True
    s_priv = runs.run_spec(p, "cifar10", "FedAvg", "private", 10, 0)
    s_rs = runs.run_spec(p, "cifar10", "FedRS", "public", 10, 0)
    s_pub = runs.run_spec(p, "cifar10", "FedAvg", "public", 10, 0)
    s_prox = runs.run_spec(p, "cifar10", "FedProx", "private", 10, 0)
    assert runs.canonical(s_priv, p) == runs.canonical(s_rs, p) == s_pub
    # at L = 10 the private setting trains the public method (runs.method_setting): the same run
    assert runs.canonical(s_prox, p) == runs.run_spec(p, "cifar10", "FedProx", "public", 10, 0)
    assert runs.canonical(runs.run_spec(p, "cifar10", "FedAvg", "private", 5, 0), p).tags["setting"] == "private"


def test_appb_gradient_signs_and_identity():
    t = appb.compute(p9_grid=[0.0, 0.2, 0.5, 0.8])
    g = t[(t["metric"] == "dloss_dp9_others_fixed")]
    pa = g[g["loss"] == "pairwise_all"].set_index("p9")["value"]
    assert (pa.loc[[0.2, 0.5, 0.8]] > 0).all() and abs(pa.loc[0.0]) < 1e-12  # pushes p9 towards 0
    for kind in ("mse", "pairwise"):  # eq. 5 and eq. 6 have no term with label 9
        assert np.allclose(g[g["loss"] == kind]["value"], 0.0)
    terms = t[t["metric"] == "label9_terms"]["value"].to_numpy()
    formula = t[t["metric"] == "label9_terms_appB_formula"]["value"].to_numpy()
    assert np.allclose(terms, formula, atol=1e-10)
    ok, _ = pc.check_claim18({"privlabels/appB": t})
    assert ok is True


def test_table1_matches_the_paper_layer_list():
    p = _params("paper")
    t = tabs.table1(p)
    cifar = t[t["dataset"] == "cifar10"]
    assert list(cifar["ours"].str.split().str[0]) == ["Conv", "Conv", "Max-pool", "Conv", "Conv", "Max-pool",
                                                       "Flatten", "Linear", "Dropout", "Linear"]
    assert cifar["output_shape"].iloc[-1] == "10" and "32 ch" in cifar["ours"].iloc[0]
    t2 = tabs.table2(p)
    assert set(t2["hyperparameter"]) >= {"learning rate", "batch size", "FedProx mu", "FedRS alpha"}


def _fake(rows):
    return pd.DataFrame([{"dataset": d, "setting": s, "labels_per_client": L, "method": m, "metric": "accuracy",
                          "mean": mu, "std": 0.01, "ci_low": mu - w, "ci_high": mu + w, "n_seeds": 3}
                         for d, s, L, m, mu, w in rows])


def test_claim_checks_on_fake_tables():
    rows = []
    for s, ms in (("private", runs.PRIVATE), ("public", runs.PUBLIC)):
        for i, m in enumerate(ms):
            rows += [("cifar10", s, 2, m, 0.3 + 0.01 * i, 0.01), ("cifar10", s, 10, m, 0.6 + 0.01 * i, 0.01)]
    t = _fake(rows)
    ok, detail = pc.check_claim1({"privlabels/fig2": t, "privlabels/fig3": t})
    assert ok is True, detail
    assert pc.check_claim1({"privlabels/fig2": t})[0] == "partial"  # fig3 not committed
    t2 = t.copy()
    t2.loc[(t2["labels_per_client"] == 2) & (t2["method"] == "FedAvg"), ["mean", "ci_low", "ci_high"]] = [0.7, 0.69, 0.71]
    assert pc.check_claim1({"privlabels/fig2": t2, "privlabels/fig3": t})[0] is False
    # a method run at one L only (quick: the all-pairs variant at L=2) is skipped, and said so
    t3 = pd.concat([t, _fake([("cifar10", "private", 2, runs.PAIRWISE_ALL, 0.5, 0.01)])], ignore_index=True)
    ok, detail = pc.check_claim1({"privlabels/fig2": t3, "privlabels/fig3": t})
    assert ok is True and "one L only" in detail and runs.PAIRWISE_ALL in detail
    # claim-2: FedRS is index 2 of PUBLIC (0.32 at L=2) but Tuning-Pairwise (0.34) is higher -> fail
    assert pc.check_claim2({"privlabels/fig2": t})[0] is False
    # claim-9: private and public FedAvg are both 0.30 / 0.60 -> within 3 points
    assert pc.check_claim9({"privlabels/fig2": t, "privlabels/fig3": t})[0] is True
    assert pc.check_claim1({})[0] is None


def test_claim19_counts_missing_labels():
    t = pd.DataFrame([{"dataset": "cifar10", "setting": "both", "labels_per_client": L, "method": "(partition)",
                       "metric": "labels_held_by_no_client", "mean": v, "std": 0, "ci_low": 0, "ci_high": 1,
                       "n_seeds": 3} for L, v in ((2, 1.0), (3, 0.33), (5, 0.0), (10, 0.0))])
    assert pc.check_claim19({"privlabels/fig2": t})[0] is True
    t.loc[0, "mean"] = 0.0
    assert pc.check_claim19({"privlabels/fig2": t})[0] is False


def test_paper_scale_federation_has_2000_per_client():
    """The paper profile's layout on a 60k-image stand-in: 10 clients x 2000 images, L labels each,
    server set and validation split disjoint from the clients (vague-3, -4, -6)."""
    p = _params("paper")
    p["profile"] = "smoke"  # use a synthetic stand-in of the real size
    p["stand_ins"] = {"cifar10": {"num_classes": 10, "n_train": 50000, "n_test": 100, "shape": [1, 4, 4], "seed": 0}}
    spec = runs.run_spec(p, "cifar10", "FedAvg", "private", 5, seed=0)
    fed, part = runs.federation(spec)
    assert [len(c) for c in fed.client_indices] == [2000] * 10
    assert all(len(s) == 5 for s in fed.label_sets)
    assert len(fed.server_indices) == 5000 and len(fed.val_indices) == 10000


@pytest.mark.parametrize("profile", ["quick", "long"])
def test_cpu_profiles_server_ratio_seeds_and_precision_in_key(profile):
    """quick / long: the server set in the paper's ratio to the client data (5,000 / 20,000 CIFAR-10,
    6,000 / 20,000 Fashion-MNIST), >= 3 seeds everywhere, and the precision in the run key and notes."""
    from fedpaper.outputs.parameters import PROFILES

    assert set(PROFILES) <= set(SETTINGS)  # every profile of the output contract is defined here
    p = _params(profile)
    n = p["num_clients"] * p["samples_per_client"]
    assert p["server_size"] == {"cifar10": n // 4, "fashion-mnist": n * 3 // 10}
    assert len(p["seeds"]) >= 3 and len(p["epochs"]["seeds"]) >= 3
    spec = runs.run_spec(p, "cifar10", "Tuning-MSE", "private", 5, seed=0)
    assert spec.training.get("precision", "fp32") == p["precision"]
    if p["precision"] != "fp32":
        assert any(p["precision"] in note for note in NOTES[profile])
    fp32 = runs.run_spec(dict(p, precision="fp32"), "cifar10", "Tuning-MSE", "private", 5, seed=0)
    assert (fp32 != spec) == (p["precision"] != "fp32")  # the precision changes the run key
    # the epoch ablation's E = 1 FedAvg runs are the main sweep's (same rounds): read from the cache
    e1 = runs.epoch_specs(p, "cifar10", [(1, 5)], p["epochs"]["seeds"])
    main = set(runs.main_specs(p, "cifar10", [5]))
    assert {s for s in e1 if s.tags["display"] == "FedAvg"} <= main


def _rows(setting, L, accs, **extra):
    """One summary row per method from per-seed accuracies {method: [seed values]}."""
    out = []
    for m, v in accs.items():
        v = np.asarray(v, float)
        out.append({"dataset": "cifar10", "setting": setting, "labels_per_client": L, "method": m,
                    "metric": "accuracy", "mean": v.mean(), "std": v.std(ddof=1), "ci_low": v.min(),
                    "ci_high": v.max(), "n_seeds": len(v), "per_seed": ";".join(f"{x:.4f}" for x in v), **extra})
    return out


def test_at_chance_sees_one_class_models_by_their_shared_seed_values():
    """Three methods with the same value on each seed are one-class models even at 30% (a majority share)."""
    t = pd.DataFrame(_rows("private", 3, {"FedAvg": [0.3, 0.31, 0.3], "FedProx": [0.3, 0.31, 0.3],
                                          "Tuning-MSE": [0.3, 0.31, 0.3], "Tuning-Pairwise": [0.45, 0.5, 0.4]}))
    def low(t):
        return at_chance({r["method"]: cell_of(r).scaled(100) for _, r in t.iterrows()}, 10.0)
    assert low(t) == ["FedAvg", "FedProx", "Tuning-MSE"]
    t = pd.DataFrame(_rows("private", 3, {"FedAvg": [0.11, 0.1, 0.5], "FedProx": [0.4, 0.5, 0.45]}))
    assert low(t) == ["FedAvg"]  # most seeds at chance + 2 points
    assert "below the best score of that seed" in CHANCE_RULE


def test_claim11_similar_at_chance_is_not_testable_and_disjoint_fails():
    sim = {"FedAvg": [0.5, 0.55, 0.52], "FedProx": [0.51, 0.54, 0.5], "Tuning-MSE": [0.48, 0.53, 0.5],
           "Tuning-Pairwise": [0.49, 0.56, 0.5]}
    assert pc.check_claim11({"privlabels/fig4": pd.DataFrame(_rows("private", 3, sim))})[0] is True
    chance = {m: [0.1, 0.11, 0.1 + 0.001 * i] for i, m in enumerate(sim)}  # all overlap, but at chance
    v, d = pc.check_claim11({"privlabels/fig4": pd.DataFrame(_rows("private", 3, chance))})
    assert v == pc.NOT_TESTABLE and "one-class score 10.0" in d
    apart = dict(sim, **{"Tuning-MSE": [0.3, 0.32, 0.31]})
    assert pc.check_claim11({"privlabels/fig4": pd.DataFrame(_rows("private", 3, apart))})[0] is False


def test_claim14_fails_when_every_tuning_gain_is_negative():
    rows = []
    for L, fa in ((2, 0.4), (5, 0.5)):
        rows += _rows("private", L, {"FedAvg": [fa] * 3, "FedProx": [fa] * 3,
                                     "Tuning-MSE": [fa - 0.05, fa - 0.04, fa - 0.06],
                                     "Tuning-Pairwise": [fa - 0.02, fa - 0.03, fa - 0.01]})
    v, d = pc.check_claim14({"privlabels/fig2": pd.DataFrame(rows), "privlabels/fig3": pd.DataFrame(rows)})
    assert v is False and "Tuning-Pairwise > FedAvg at L=2 (FAIL)" in d
    rows = []
    for L, gain in ((2, 0.08), (5, 0.02)):
        rows += _rows("private", L, {"FedAvg": [0.4, 0.41, 0.39], "Tuning-MSE": [0.4 + gain] * 3,
                                     "Tuning-Pairwise": [0.4 + gain / 2, 0.41, 0.42]})
    assert pc.check_claim14({"privlabels/fig2": pd.DataFrame(rows), "privlabels/fig3": pd.DataFrame(rows)})[0] is True


def _fig11(acc_of_E):
    rows = []
    for E, accs in acc_of_E.items():
        for s in ("private", "public"):
            rows += _rows(s, 5, accs, local_epochs=E)
    return pd.DataFrame(rows)


def test_claim16_chance_level_models_over_E_are_not_testable():
    learn = {E: {"FedAvg": [0.4, 0.42, 0.41], "Tuning-MSE": [0.38, 0.43, 0.4], "Tuning-Pairwise": [0.39, 0.41, 0.42]}
             for E in (1, 3, 5)}
    assert pc.check_claim16({"privlabels/fig11": _fig11(learn)})[0] is True
    flat = {E: {m: [0.1, 0.105, 0.11] for m in ("FedAvg", "Tuning-MSE", "Tuning-Pairwise")} for E in (1, 3, 5)}
    assert pc.check_claim16({"privlabels/fig11": _fig11(flat)})[0] == pc.NOT_TESTABLE
    moved = {**learn, 5: {"FedAvg": [0.6, 0.62, 0.61], "Tuning-MSE": [0.38, 0.43, 0.4],
                          "Tuning-Pairwise": [0.39, 0.41, 0.42]}}
    assert pc.check_claim16({"privlabels/fig11": _fig11(moved)})[0] is False


def test_claim17_needs_learning_tuning_models():
    def fig(mse, pw):
        t = pd.DataFrame(_rows("private", 5, {"Tuning-MSE": mse, "Tuning-Pairwise": pw}, local_epochs=5))
        return {"privlabels/fig12": t, "privlabels/fig13": t}
    assert pc.check_claim17(fig([0.4, 0.41, 0.42], [0.3, 0.31, 0.32]))[0] is True
    assert pc.check_claim17(fig([0.3, 0.31, 0.32], [0.4, 0.41, 0.42]))[0] is False
    assert pc.check_claim17(fig([0.1, 0.11, 0.1], [0.1, 0.1, 0.09]))[0] == pc.NOT_TESTABLE


def test_claim20_chance_level_fedavg_is_not_a_strong_baseline_test():
    def fig(fa, best):
        return pd.DataFrame(_rows("private", 3, {"FedAvg": fa, "Tuning-MSE": best}))
    assert pc.check_claim20({"privlabels/fig3": fig([0.5, 0.52, 0.51], [0.51, 0.53, 0.5])})[0] is True
    assert pc.check_claim20({"privlabels/fig3": fig([0.3, 0.31, 0.32], [0.5, 0.52, 0.51])})[0] is False
    assert pc.check_claim20({"privlabels/fig3": fig([0.1, 0.1, 0.11], [0.1, 0.11, 0.1])})[0] == pc.NOT_TESTABLE


def test_claim1_chance_at_every_L_is_not_testable():
    flat = []
    for L in (2, 10):
        flat += _rows("private", L, {"FedAvg": [0.1, 0.105, 0.11], "FedProx": [0.1, 0.1, 0.11]})
    assert pc.check_claim1({"privlabels/fig2": pd.DataFrame(flat)})[0] == pc.NOT_TESTABLE


def test_claim15_flat_chance_curves_are_not_testable():
    rows = []
    for r in (1, 2, 3):
        for row in _rows("private", 5, {"FedAvg": [0.1, 0.1, 0.11], "Tuning-MSE": [0.1, 0.11, 0.1],
                                        "Tuning-Pairwise": [0.1, 0.1, 0.1]}):
            rows.append(dict(row, round=r))
    assert pc.check_claim15({"privlabels/fig5": pd.DataFrame(rows)})[0] == pc.NOT_TESTABLE


def test_captions_name_the_interval_as_the_csv_and_report_do():
    from fedpaper.claims.summaries import interval_name
    from fedpaper.papers.privlabels import draw

    t = pd.DataFrame(_rows("private", 3, {"FedAvg": [0.5, 0.55, 0.52]}))
    assert draw.interval_text(t) == interval_name(3) == "min-max over n=3 seeds"
    assert "95%" not in draw._ci_caption(t, "Bar: mean; error bar")
    s = runs.summarise(pd.DataFrame({"method": ["a"] * 3, "seed": [0, 1, 2], "accuracy": [0.1, 0.3, 0.2]}), ["method"])
    assert s["interval"].iloc[0] == interval_name(3) and s["per_seed"].iloc[0] == "0.1000;0.3000;0.2000"


def test_figure_title_says_which_methods_sit_at_chance():
    from fedpaper.papers.privlabels import draw

    rows = []
    for L in (2, 10):
        for setting in ("private", "public"):
            rows += _rows(setting, L, {"FedAvg": [0.1, 0.11, 0.1], "Tuning-MSE": [0.3, 0.35, 0.32] if L == 10 else
                                       [0.1, 0.1, 0.1]})
    t = pd.DataFrame(rows)
    assert draw._at_chance(t) == ["FedAvg"]  # Tuning-MSE learns at L=10
    fig = draw.lines(t, "labels_per_client", "x", "quick profile: ...", "labels per client L")
    assert "FedAvg at chance everywhere" in fig._suptitle.get_text()


def test_probe_counts_the_runs_the_quick_sweep_trains():
    """The timing probe's run counts: per data set 51 plain + 48 tuning runs after the L = 10 sharing (private FedProx too)
    (+ 6 all-pairs at L = 2); the CIFAR-10 epoch ablation without the main sweep's E = 1 FedAvg runs."""
    from fedpaper.papers.privlabels import probe

    p = _params("quick")
    main, ep_E, ep_n = probe.sweep_counts(p, "cifar10")
    assert dict(main) == {"plain": 51, "mse": 21, "pairwise": 27}
    assert dict(ep_n) == {"plain": 12, "mse": 18, "pairwise": 18}  # 18 FedAvg minus the 6 shared E = 1 runs
    assert ep_E["plain"] == 6 * (3 + 5) and ep_E["mse"] == 6 * (1 + 3 + 5)
    assert probe.sweep_counts(p, "fashion-mnist")[1] == {}
