"""FedNCA-ML package: runs shared between tables, best-validation selection, claim checks on
hand-made tables (each able to fail), the method builder and the per-client count figures' data."""
import numpy as np
import pandas as pd
import pytest

from fedpaper.runs.experiment import method_of
from fedpaper import claims as K
from fedpaper.papers.fednca import claims as C
from fedpaper.papers.fednca import methods as M
from fedpaper.papers.fednca import runs
from fedpaper.papers.fednca.profiles import settings


def _p(profile="quick"):
    p = settings(profile)
    p["profile"], p["seeds"] = profile, [0, 1]
    return p


def test_ablation_rows_reuse_the_main_runs_and_centralized_ignores_beta():
    p = _p()
    t2 = dict((tuple(sorted(k.items())), s) for k, s in runs.main_specs(p, "table2", ["FedAvg", M.FEDNCA, M.CENTRAL]))
    main = {(k["method"], k["beta"], s.seed): s for k, s in runs.main_specs(p, "table2", ["FedAvg", M.FEDNCA, M.CENTRAL])}
    comp = {(k["components"], s.seed): s for k, s in runs.component_specs(p, "table5")}
    assert comp[("none", 0)] == main[("FedAvg", 0.1, 0)]
    assert comp[("ETF-Clf+LADM+L_Neg+L_Pos", 1)] == main[(M.FEDNCA, 0.1, 1)]
    assert main[(M.CENTRAL, 0.1, 0)] == main[(M.CENTRAL, 0.5, 0)]
    assert main[("FedAvg", 0.1, 0)] != main[("FedAvg", 0.5, 0)]
    q = {(k["query_type"], k["query_init"], s.seed): s for k, s in runs.query_specs(p, "table6")}
    assert q[("fixed", "ETF", 0)] == comp[("ETF-Clf+LADM", 0)]
    assert q[("learnable", "ETF", 0)].training["model_kwargs"]["queries"] == "learnable"
    assert t2  # built


def test_method_builder_composes_the_parts():
    p = _p()
    spec = runs.run_spec(p, "cifar10", M.FEDNCA, 0.5, 0.5, 0)
    algo = method_of(spec.method).algorithm()
    kinds = [type(x).__name__ for x in algo.parts]
    assert kinds == ["FedAvgWeights", "FrozenParameters", "FedNCALoss"]
    loss = algo.parts[-1]
    assert (loss.lam_neg, loss.lam_pos, loss.tau) == (1.0, 1.0, 0.3)  # lambda1 = 1 on CIFAR-10
    assert algo.optimizer.betas == (0.9, 0.98) and algo.optimizer.schedule == "warmup-linear"
    assert method_of(runs.run_spec(p, "dermamnist", M.FEDNCA, 0.5, 0.71, 0).method).algorithm().parts[-1].lam_neg == 0.01
    names = {n: [type(x).__name__ for x in method_of(runs.run_spec(p, "cifar10", n, 0.5, 0.5, 0).method).algorithm().parts]
             for n in ("FedProx", "SCAFFOLD", "FedCurv", "SphereFed")}
    assert "Penalty" in names["FedProx"] and "ControlVariates" in names["SCAFFOLD"]
    assert "FedCurvPenalty" in names["FedCurv"] and "SphereFedClassifier" in names["SphereFed"]
    assert hash(method_of(spec.method)) == hash(method_of(dict(spec.method)))
    assert method_of(spec.method).spec() == spec.method  # the spec is the cache key and builds the same parts


def test_selection_reads_the_best_validation_round():
    hist = []
    for r, (v, t) in enumerate([(0.6, 0.5), (0.8, 0.7), (0.7, 0.9)], start=1):
        row = {"round": r, "val_auc": v}
        for name in ("auc", "f1", "micro_auc", "micro_f1", "batch_macro_auc", "batch_macro_f1", "batch_micro_auc",
                     "batch_micro_f1"):
            row[f"test_{name}"] = t
        hist.append(row)
    b = runs.best_round_metrics({"history": hist})
    assert b["round"] == 2 and b["macro-AUC"] == (pytest.approx(70.0), pytest.approx(70.0))


def _main_table(nca_auc, central=95.0):
    rows = []
    for beta in (0.5, 0.1):
        for m, v in ((M.CENTRAL, central), ("FedAvg", 80.0), ("SphereFed", 82.0), (M.FEDNCA, nca_auc)):
            for metric in ("macro-AUC", "macro-F1", "micro-AUC", "micro-F1"):
                rows.append({"beta": beta, "method": m, "metric": metric, "mean": v})
    return pd.DataFrame(rows)


_BY_ID = {c.id: c for c in C.CLAIMS}


def verdict(n: int, tables: dict) -> str:
    """The verdict of fednca/claim-n on tables {short artifact name: DataFrame}."""
    return _BY_ID[f"fednca/claim-{n}"].check({f"fednca/{k}": v for k, v in tables.items()}).verdict


def test_main_table_claims_can_pass_and_fail():
    good, bad = {"table1": _main_table(85.0)}, {"table1": _main_table(81.0)}
    assert verdict(2, good) == K.PASS and verdict(2, bad) == K.FAIL  # margin 3 points: within the stated 3.92 +- 2
    assert verdict(2, {"table1": _main_table(92.0)}) == K.FAIL  # a margin of 10 is not the stated 3.92
    assert verdict(1, good) == K.PASS and verdict(1, bad) == K.FAIL
    assert verdict(10, good) == K.PASS and verdict(10, {"table1": _main_table(96.0)}) == K.FAIL
    chance = _main_table(50.0, central=50.0)
    chance["mean"] = np.where(chance["metric"].str.endswith("AUC"), 50.0, 1.0)  # AUC 50, F1 near 0: no label
    assert verdict(2, {"table1": chance}) == K.NOT_TESTABLE


def _ablation(values):
    """values: {metric: one value per variant of M.COMPONENTS} (a list: the same for every metric)."""
    rows = []
    for metric in ("macro-AUC", "macro-F1", "micro-AUC", "micro-F1"):
        vs = values[metric] if isinstance(values, dict) else values
        for (_, label), v in zip(M.COMPONENTS, vs):
            rows.append({"components": label, "metric": metric, "mean": v})
    return pd.DataFrame(rows)


# the paper's Table 5 (none, ETF-Clf, +LADM, +L_Neg, +L_Pos, full)
T5 = {"macro-AUC": [83.95, 83.61, 84.38, 84.73, 85.20, 87.69], "macro-F1": [40.69, 33.35, 47.95, 45.06, 49.84, 51.38],
      "micro-AUC": [86.68, 87.26, 86.70, 89.71, 89.03, 90.36], "micro-F1": [63.03, 61.48, 60.49, 62.89, 61.06, 63.26]}


def test_ablation_claims_can_pass_and_fail():
    up = {"table5": _ablation(T5), "table7": _ablation(T5)}
    down = {"table5": _ablation([80, 81, 79, 84, 84, 78]), "table7": _ablation([80, 81, 79, 84, 84, 78])}
    for n in (11, 12, 13, 14):
        assert verdict(n, up) == K.PASS, n
        assert verdict(n, down) == K.FAIL, n
    # claim 12 states +7.34 macro-F1: a gain of 1 point is not it
    small = dict(T5, **{"macro-F1": [40.69, 33.35, 41.69, 45.06, 49.84, 51.38]})
    assert verdict(12, {"table5": _ablation(small)}) == K.FAIL


def test_query_claim_can_pass_and_fail():
    def table(fixed):
        return pd.DataFrame([{"query_type": q, "query_init": i, "metric": m, "mean": (fixed if q == "fixed" else 80.0)}
                             for q, i in M.QUERIES for m in ("macro-AUC", "macro-F1")])
    assert verdict(15, {"table6": table(85.0)}) == K.PASS
    assert verdict(15, {"table6": table(75.0)}) == K.FAIL


def test_feature_claims_can_pass_and_fail():
    rng = np.random.default_rng(0)
    n = 60
    cls = np.repeat(["a", "b", "c"], 20)
    cnt = np.tile([1, 2], 30)
    by_class = pd.DataFrame({"x": np.repeat([0.0, 10.0, 20.0], 20) + rng.normal(0, 0.5, n), "y": rng.normal(0, 0.5, n),
                             "class": cls, "label_count": cnt})
    by_count = by_class.assign(x=np.where(cnt == 1, 0.0, 10.0) + rng.normal(0, 0.5, n))
    assert verdict(19, {"fig3a": by_count, "fig6a": by_count}) == K.PASS
    assert verdict(19, {"fig3a": by_class, "fig6a": by_count}) == K.FAIL
    assert verdict(19, {"fig3a": by_count}) == K.PARTIAL  # fig6a absent
    assert verdict(20, {"fig3b": by_class, "fig6b": by_class}) == K.PASS
    assert verdict(20, {"fig3b": by_count, "fig6b": by_class}) == K.FAIL
    assert verdict(21, {"fig3b": by_count, "fig3c": by_class, "fig6b": by_count, "fig6c": by_class}) == K.PASS
    assert verdict(21, {"fig3b": by_class, "fig3c": by_count}) == K.FAIL

    def cos(v):
        return pd.DataFrame({"mean_off_diagonal": [v]})
    # purity corrected for chance: 1 for pure groups, about 0 for random neighbours, whereas raw
    # purity of the 2-valued label count is about 0.5 even at random
    assert C.purity_lift(by_class, "class") > 0.9 and abs(C.purity_lift(by_count, "class")) < 0.2
    shuffled = by_class.assign(x=rng.normal(0, 1, n), y=rng.normal(0, 1, n))
    assert abs(C.purity_lift(shuffled, "label_count")) < 0.2 and C.knn_purity(shuffled, "label_count") > 0.3

    dec = {f"fig{f}{s}": cos(v) for f in (4, 7) for s, v in zip("abc", (0.5, 0.2, -0.1))}
    inc = dict(dec, **{f"fig7{s}": cos(v) for s, v in zip("abc", (0.1, 0.2, 0.3))})
    assert verdict(22, dec) == K.PASS and verdict(22, inc) == K.FAIL


def test_cosine_and_prototype_helpers():
    from fedpaper.papers.fednca.features import cosine_matrix, mean_off_diagonal
    from fedpaper.blocks.nets.etf import simplex_etf

    S = cosine_matrix(simplex_etf(8, 4).T.numpy())
    assert mean_off_diagonal(S) == pytest.approx(-1 / 3, abs=1e-6)  # the ETF's -1/(C-1)


def test_attention_claim_and_quadrant_mass():
    from fedpaper.papers.fednca.features import quadrant_mass

    amap = np.zeros((4, 4))
    amap[:2, :2] = 0.2
    amap[2:, 2:] = 0.05
    assert quadrant_mass(amap, "tl") == pytest.approx(0.8) and quadrant_mass(amap, "br") == pytest.approx(0.2)
    t = pd.DataFrame({"mass_own": [0.6, 0.5, 0.2], "mass_other": [0.2, 0.3, 0.4]})
    assert verdict(23, {"fig5": t}) == K.PASS
    assert verdict(23, {"fig5": t.rename(columns={"mass_own": "mass_other", "mass_other": "mass_own"})}) == K.FAIL
    flat = pd.DataFrame({"mass_own": [0.27, 0.249], "mass_other": [0.249, 0.251]})  # the long maps: gaps <= 0.03
    assert verdict(23, {"fig5": flat}) == K.NOT_TESTABLE


def test_feature_model_is_the_best_validation_model_with_its_batchnorm_statistics(cache_tmp):
    """features.model loads the stored snapshot of a feature run (parameters and BatchNorm
    statistics) of the round the tables select: its test macro-AUC is the table's number for that
    run, and the run is the table's run with the snapshot option only."""
    import torch
    from sklearn.metrics import roc_auc_score

    from fedpaper.papers.fednca import features as F

    p = settings("smoke")
    p["profile"], p["seeds"], p["rounds"] = "smoke", [0], 3
    p["model"] = {**p["model"], "norm": "batch"}
    spec = F.variant_spec(p, "table5", F.ROWS["c"][0])
    assert spec.training["keep_best"] == runs.SELECT_BY
    assert spec.with_(replace_training={k: v for k, v in spec.training.items() if k != "keep_best"}) in \
        [s for k, s in runs.component_specs(p, "table5") if k["components"] == F.ROWS["c"][0]]
    (res,) = runs.sweep([spec], p)
    pl = runs.pools(p, "dermamnist")
    net = F.model(spec, res, pl)
    best = runs.best_round_metrics(res)
    assert net.best_round == best["round"] and not net.training
    with torch.no_grad():
        scores = net(pl.x_test[:])["logits"].sigmoid().numpy()
    assert 100 * roc_auc_score(pl.y_test.numpy(), scores, average="macro") == pytest.approx(best["macro-AUC"][0],
                                                                                         abs=1e-6)
    assert not torch.equal(net.backbone.body[1].running_mean, torch.zeros_like(net.backbone.body[1].running_mean))
