"""The claim verdicts beyond PASS/FAIL on small hand-made tables: not testable (models at chance),
partial (k of n rows), checked on code, and interval names."""
import pandas as pd

from fedpaper import report as R
from fedpaper.papers import Claim
from fedpaper.papers._common import claims as K
from fedpaper.papers.fedpals import claims as FC
from fedpaper.papers.privlabels import claims as PC


def _curve_rows(split, x, per_method, xcol="C", **cols):
    """fig2c/fig8b-like rows: per_method {method: per-seed list}."""
    rows = []
    for m, seeds in per_method.items():
        mean = sum(seeds) / len(seeds)
        rows.append({"dataset": "CIFAR-10", "label_split": split, xcol: x, "method": m, "metric": "accuracy_pct",
                     "mean": mean, "std": 1.0, "n_seeds": len(seeds), "per_seed": ";".join(f"{v:.2f}" for v in seeds),
                     **cols})
    return rows


# ------------------------------------------------------------------------------- at chance
def test_at_chance_rule():
    assert K.chance_pct("C=2") == 50.0 and K.chance_pct("C=10") == 10.0
    assert K.chance_pct("beta=0.1") is None and K.chance_pct(num_classes=10) == 10.0
    assert K.at_chance(11.0, [10.0, 11.5, 11.5], 10.0)            # within 2 points of 10 %
    assert not K.at_chance(30.0, [28.0, 30.0, 32.0], 10.0)
    assert K.at_chance(0.0, [0.0, 0.0, 0.0], None)                 # 0.00 on every seed, chance unknown
    assert not K.at_chance(40.0, [64.67, 20.0, 35.33], None)       # one one-class-looking seed is not most
    # a value 3 methods share on a seed marks one-class models when chance is unknown
    rows = [("A", 40.0, [64.67, 30.0, 25.0]), ("B", 22.0, [64.67, 0.0, 1.0]), ("C", 21.0, [64.67, 0.0, 0.0])]
    assert K.chance_models(rows, None) == ["B", "C"]


def test_claim5_not_testable_when_all_methods_sit_at_chance():
    at = pd.DataFrame(_curve_rows("C=10", 10.0, {"FedAvg": [11.0, 12.0, 11.8], "FedPALS": [11.0, 12.0, 11.8],
                                                 "Oracle": [10.0, 11.0, 11.7]}))
    ok, detail = FC.c5({"fedpals/fig2c": at})
    assert ok == K.NOT_TESTABLE and "at chance (chance 10.0%)" in detail
    learn = at.assign(mean=[40.0, 40.5, 41.0], per_seed=["40;40;40", "40.5;40.5;40.5", "41;41;41"])
    assert FC.c5({"fedpals/fig2c": learn})[0] is True


def test_claim26_not_testable_against_zero_accuracy_fedavg():
    runs = {"FedPALS": [38.0, 45.0, 40.0], "FedAvg": [0.0, 0.0, 0.0]}
    b = pd.DataFrame(_curve_rows("C=3", 15, runs, xcol="local_epochs"))
    c = pd.DataFrame(_curve_rows("C=3", 10, runs, xcol="training_clients"))
    ok, detail = FC.c26({"fedpals/fig8b": b, "fedpals/fig8c": c})
    assert ok == K.NOT_TESTABLE and "0 of 2 rows hold, 2 not testable" in detail
    learn = {"FedPALS": [48.0, 55.0, 50.0], "FedAvg": [40.0, 41.0, 42.0]}
    b = pd.DataFrame(_curve_rows("C=3", 15, learn, xcol="local_epochs"))
    c = pd.DataFrame(_curve_rows("C=3", 10, learn, xcol="training_clients"))
    assert FC.c26({"fedpals/fig8b": b, "fedpals/fig8c": c})[0] is True
    # one point testable and holding, one not testable -> partial, not PASS
    c0 = pd.DataFrame(_curve_rows("C=3", 10, runs, xcol="training_clients"))
    ok, detail = FC.c26({"fedpals/fig8b": b, "fedpals/fig8c": c0})
    assert ok == K.PARTIAL and "1 of 2 rows hold, 1 not testable" in detail


# ------------------------------------------------------------------------------- partial
def test_combine_rows_verdicts():
    hold, fail = ("r1", True, "ok"), ("r2", False, "no")
    untestable, missing = ("r3", K.NOT_TESTABLE, "at chance"), ("r4", None, "data missing")
    assert K.combine_rows([hold, hold], "x")[0] is True
    assert K.combine_rows([hold, fail, untestable], "x")[0] is False
    v, d = K.combine_rows([hold, untestable, missing], "x")
    assert v == K.PARTIAL and "1 of 3 rows hold, 1 not testable (models at chance), 1 not checkable" in d
    assert K.combine_rows([untestable, missing], "x")[0] == K.NOT_TESTABLE
    assert K.combine_rows([missing], "x")[0] is None


# ------------------------------------------------------------------------------- privlabels
def _pl(means: dict, setting="private"):
    """fig2-like table: means {(method, L): accuracy}; seed intervals mean +- 0.01."""
    return pd.DataFrame([{"dataset": "cifar10", "setting": setting, "labels_per_client": L, "method": m,
                          "metric": "accuracy", "mean": v, "std": 0.01, "ci_low": v - 0.01, "ci_high": v + 0.01,
                          "n_seeds": 3} for (m, L), v in means.items()])


def test_privlabels_claim14_needs_a_positive_gain():
    # every tuning gain negative, less negative at small L: the old check passed; the claim does not hold
    neg = _pl({("FedAvg", 2): 0.30, ("Tuning-MSE", 2): 0.29, ("Tuning-Pairwise", 2): 0.28,
               ("FedAvg", 5): 0.50, ("Tuning-MSE", 5): 0.45, ("Tuning-Pairwise", 5): 0.44})
    ok, detail = PC.check_claim14({"privlabels/fig2": neg})
    assert ok is False and "no gain" in detail
    pos = _pl({("FedAvg", 2): 0.30, ("Tuning-MSE", 2): 0.36, ("Tuning-Pairwise", 2): 0.33,
               ("FedAvg", 5): 0.50, ("Tuning-MSE", 5): 0.51, ("Tuning-Pairwise", 5): 0.49})
    assert PC.check_claim14({"privlabels/fig2": pos})[0] is True


def test_privlabels_chance_level_L_left_out_and_not_testable():
    t = _pl({("FedAvg", 2): 0.11, ("FedProx", 2): 0.10, ("Tuning-MSE", 2): 0.30, ("Tuning-Pairwise", 2): 0.28,
             ("FedAvg", 5): 0.40, ("FedProx", 5): 0.41, ("Tuning-MSE", 5): 0.45, ("Tuning-Pairwise", 5): 0.44})
    ok, detail = PC.check_claim5({"privlabels/fig2": t})
    assert ok == K.PARTIAL and "over L in [5]" in detail and "L=2: FedAvg, FedProx at chance" in detail
    low = t[t["labels_per_client"] == 2]
    assert PC.check_claim5({"privlabels/fig2": low})[0] == K.NOT_TESTABLE


def test_interval_names_never_say_ci_for_few_seeds():
    assert K.interval_name(3) == "min-max over n=3 seeds"
    assert K.interval_name(2) == "min-max over n=2 seeds"
    assert K.interval_name(10) == "95% percentile-bootstrap interval, n=10 seeds"
    t = _pl({("FedAvg", 3): 0.5, ("FedProx", 3): 0.5, ("Tuning-MSE", 3): 0.5, ("Tuning-Pairwise", 3): 0.5})
    _, detail = PC.check_claim11({"privlabels/fig4": t})
    assert "min-max over n=3 seeds" in detail and "CI" not in detail


# ------------------------------------------------------------------------------- report
def test_report_counts_code_checks_apart_and_marks_new_verdicts():
    code = K.on_code(lambda t: (True, "formula holds"))
    claims = [Claim("fedpals/claim-30", "numerical", (), code),
              Claim("fedpals/claim-5", "comparable", (), lambda t: (K.NOT_TESTABLE, "all at chance")),
              Claim("fedpals/claim-1", "every row", (), lambda t: (K.PARTIAL, "5 of 6 rows hold")),
              Claim("fedpals/claim-3", "fails", (), lambda t: (False, "no"))]
    res = R.check_claims(claims, {})
    assert [r["verdict"] for r in res] == ["pass", "not testable", "partial", "fail"]
    assert [r["on_code"] for r in res] == [True, False, False, False]
    counts = R.claim_counts(res)
    assert counts.startswith("On results: 0 pass, 1 fail, 1 partial, 1 not testable, 0 not checkable.")
    assert "Checked on code (a formula or a data split, no trained model): 1 pass, 0 fail, 0 not checkable." in counts


def test_claim27_leaves_out_epochs_where_fedpals_sits_at_chance():
    rows = []
    for e, seeds, val in ((1, [45.0, 50.0, 48.0], 50.0), (5, [40.0, 44.0, 42.0], 45.0), (15, [33.33, 33.33, 40.0], 60.0)):
        rows += _curve_rows("C=3", e, {"FedPALS": seeds}, xcol="local_epochs", val_mean=val)
    t = pd.DataFrame(rows)
    ok, detail = FC.c27({"fedpals/fig8b": t})
    assert ok == K.PARTIAL and "left out E in [15]" in detail  # E=15's 60.0 is a one-class model's
    assert FC.c27({"fedpals/fig8b": t[t.local_epochs < 15]})[0] is True


def _fig9(pals, avg, std=0.5):
    ds = [round(0.1 * i, 1) for i in range(len(pals))]
    return pd.DataFrame([{"delta": d, "projection_distance": 0.375 * d * d, "method": m, "mean": v, "std": std}
                         for m, vals in (("FedPALS", pals), ("FedAvg", avg)) for d, v in zip(ds, vals)])


def test_claim23_highest_at_zero_up_to_noise_and_a_real_decline():
    falls = [99.0, 99.1, 98.8, 98.4, 98.0]
    assert FC.c23({"fedpals/fig9": _fig9(falls, falls)})[0] is True       # 0.1 above d=0 is noise
    rises = [97.0, 98.0, 99.0, 98.5, 96.0]
    assert FC.c23({"fedpals/fig9": _fig9(rises, rises)})[0] is False      # the max is 2 points above d=0
    flat = [99.0, 98.9, 99.0, 98.8, 98.7]
    ok, detail = FC.c23({"fedpals/fig9": _fig9(flat, flat)})
    assert ok is False and "fall of more than one std" in detail          # a decline within seed noise


def test_claim24_fails_where_fedavg_is_ahead():
    assert FC.c24({"fedpals/fig9": _fig9([99, 98, 97], [98, 97, 96])})[0]
    ok, detail = FC.c24({"fedpals/fig9": _fig9([99, 98, 97], [98, 98.5, 96])})
    assert not ok and "2 of 3 deltas" in detail
