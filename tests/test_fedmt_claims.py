"""FedMT claim checks on hand-made tables: each can pass, fail, or say why it cannot decide."""
import pandas as pd

from fedpaper.papers._common.claims import NOT_TESTABLE
from fedpaper.papers.fedmt import claims as C

METHODS = ["Single", "FedTrans", "FedRep", "SemiFL", "FedMT (T)", "FedMT (E)"]


def table2(values: dict, metric="test_acc_100class", dataset="CIFAR-100"):
    """values: method -> list of means over n = 5, 15, 25."""
    rows = [{"dataset": dataset, "n": n, "method": m, "metric": metric, "mean": v[i], "std": 0.1}
            for m, v in values.items() for i, n in enumerate([5, 15, 25])]
    return pd.DataFrame(rows)


GOOD = {"Single": [10, 12, 14], "FedTrans": [20, 22, 24], "FedRep": [21, 23, 25], "SemiFL": [15, 22, 30],
        "FedMT (T)": [35, 40, 45], "FedMT (E)": [30, 37, 44.5]}


def test_table2_claims_pass_on_the_papers_pattern():
    tb = {C.T2: table2(GOOD)}
    for check in (C.c1, C.c2, C.c3, C.c4, C.c5, C.c6):
        verdict, detail = check(tb)
        assert verdict is True, (check.__name__, detail)


def test_table2_claims_fail_when_the_pattern_breaks():
    bad = dict(GOOD, Single=[10, 30, 14], **{"FedMT (E)": [5, 6, 44.9]})
    tb = {C.T2: table2(bad)}
    assert C.c1(tb)[0] is False  # Single does not increase
    assert C.c2(tb)[0] is False  # FedTrans below Single at n = 15
    assert C.c3(tb)[0] is False  # FedMT (E) below the baselines
    assert C.c5({C.T2: table2(dict(GOOD, **{"FedMT (E)": [34, 37, 30]}))})[0] is False


def test_at_chance_and_missing_tables():
    low = {k: [1.5, 2.0, 2.5] for k in METHODS}
    verdict, detail = C.c1({C.T2: table2(low)})
    assert verdict == NOT_TESTABLE and "chance" in detail
    assert C.c1({})[0] is None
    assert C.CHECKS[15]({})[0] is None and "ImageNet" in C.CHECKS[15]({})[1]


def test_fig3_and_ablation_checks():
    rows = [{"method": "FedMT (E)", "N_c": nc, "round": r, "err_mean": e, "err_sd": 0.1, "seed": 0}
            for nc, errs in ((50, [4.0, 3.0, 2.5]), (150, [4.0, 1.0, 0.5])) for r, e in enumerate(errs, 1)]
    tb = {C.F3: pd.DataFrame(rows)}
    assert C.c16(tb)[0] is True and C.c17(tb)[0] is True
    rows[-1]["err_mean"] = 3.9
    tb = {C.F3: pd.DataFrame(rows)}
    assert C.c16(tb)[0] is False and C.c17(tb)[0] is False
    t8 = pd.DataFrame([{"dataset": "CIFAR-100", "lambda2": lam, "method": m, "metric": "test_acc_100class",
                        "mean": 50 - abs(lam - 1 / 16) * 10 - (m == "FedMT (E)")} for lam in (1, 1 / 4, 1 / 16, 1 / 64)
                       for m in ("FedMT (T)", "FedMT (E)")])
    assert C.c30({C.T8: t8})[0] is True
    t8.loc[t8["lambda2"] == 1, "mean"] = 60
    assert C.c30({C.T8: t8})[0] is False


def test_every_fedmt_diagnosis_names_its_cause_and_reaches_its_claim():
    """FAIL_REASONS feed Claim.why_fails (the report prints it after a FAIL verdict only)."""
    by_num = {int(c.id.rsplit("-", 1)[1]): c for c in C.CLAIMS}
    assert C.FAIL_REASONS and all(by_num[n].why_fails == r for n, r in C.FAIL_REASONS.items())
    assert all(r.split(":")[0] in ("scale", "data copy", "real disagreement") for r in C.FAIL_REASONS.values())


def test_a_verdict_resting_on_a_gap_below_the_seed_sd_says_so():
    close = dict(GOOD, **{"FedMT (E)": [35.05, 40.05, 45.05]})  # E - T = 0.05 < sd 0.1
    t = table2(close)
    verdict, detail = C._beats(t, "n", "test_acc_100class", ["FedMT (E)"], ["FedMT (T)"])
    assert verdict is True and "within seed noise" in detail
    verdict, detail = C._beats(t, "n", "test_acc_100class", ["FedMT (T)"], ["Single"])
    assert verdict is True and "within seed noise" not in detail


def test_settings_at_chance_are_left_out_and_the_verdict_is_partial():
    low_at_5 = {k: [2.0, v[1], v[2]] for k, v in GOOD.items()}  # every method at chance at n = 5
    verdict, detail = C.c1({C.T2: table2(low_at_5)})
    assert verdict == C.PARTIAL and "not testable at 5" in detail
    bad = dict(low_at_5, Single=[2.0, 14, 12])  # Single falls between the testable rows
    assert C.c1({C.T2: table2(bad)})[0] is False
