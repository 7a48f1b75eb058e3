"""FedMT claim checks on hand-made tables: each can pass, fail, be within noise, or say why it
cannot decide (models at chance, data absent). The papers' own numbers: tests/claims_reported/."""
import pandas as pd

from fedpaper.outputs.registry import get_claim
from fedpaper.claims import FAIL, NOT_CHECKABLE, NOT_TESTABLE, PARTIAL, PASS, WITHIN_NOISE, check_claims

METHODS = ["Single", "FedTrans", "FedRep", "SemiFL", "FedMT (T)", "FedMT (E)"]
OFFSETS = (-1.0, 0.0, 1.0)


def table2(values: dict, sd=0.1, metric="test_acc_100class", flip=()):
    """values: method -> means over n = 5, 15, 25; three seeds mean + sd * (-1, 0, 1), reversed for
    the methods in `flip` (their seeds then disagree with the others')."""
    def seeds(m, mean):
        return ";".join(f"{mean + sd * o * (-1 if m in flip else 1):.4f}" for o in OFFSETS)
    return pd.DataFrame([{"dataset": "CIFAR-100", "n": n, "method": m, "metric": metric, "mean": v[i], "std": sd,
                          "n_seeds": 3, "per_seed": seeds(m, v[i])}
                         for m, v in values.items() for i, n in enumerate([5, 15, 25])])


def verdict(claim: int, **tables):
    (r,) = check_claims([get_claim(f"fedmt/claim-{claim}")], {f"fedmt/{k}": v for k, v in tables.items()})
    return r["verdict"], r["detail"]


GOOD = {"Single": [10, 12, 14], "FedTrans": [20, 22, 24], "FedRep": [21, 23, 25], "SemiFL": [15, 22, 30],
        "FedMT (T)": [35, 40, 45], "FedMT (E)": [30, 37, 44.5]}


def test_table2_claims_pass_on_the_papers_pattern():
    for c in (1, 2, 3, 4, 5):
        assert verdict(c, table2=table2(GOOD))[0] == PASS, c


def test_table2_claims_fail_when_the_pattern_breaks():
    bad = dict(GOOD, Single=[10, 30, 14], **{"FedMT (E)": [5, 6, 44.9]})
    assert verdict(1, table2=table2(bad))[0] == FAIL  # Single does not increase
    assert verdict(2, table2=table2(bad))[0] == FAIL  # FedTrans below Single at n = 15
    assert verdict(3, table2=table2(bad))[0] == FAIL  # FedMT (E) below the baselines
    assert verdict(5, table2=table2(dict(GOOD, **{"FedMT (E)": [34, 37, 30]})))[0] == FAIL


def test_a_gap_inside_the_seed_spread_is_within_noise_not_a_pass():
    close = dict(GOOD, **{"FedMT (T)": [30.05, 37.05, 44.55]})  # T - E = 0.05 with seed sd 2
    v, detail = verdict(4, table2=table2(close, sd=2.0, flip=["FedMT (T)"]))
    assert v == WITHIN_NOISE and "within noise" in detail
    # the same means with seeds that move together: every seed shows T ahead
    assert verdict(4, table2=table2(close, sd=2.0))[0] == PASS


def test_at_chance_and_missing_tables():
    low = {k: [1.5, 2.0, 2.5] for k in METHODS}
    v, detail = verdict(2, table2=table2(low))
    assert v == NOT_TESTABLE and "one-class score 1.0" in detail
    assert verdict(1)[0] == NOT_CHECKABLE
    assert verdict(15)[0] == NOT_CHECKABLE


def test_settings_at_chance_are_left_out_and_the_verdict_is_partial():
    low_at_5 = {k: [2.0, v[1], v[2]] for k, v in GOOD.items()}  # every method at chance at n = 5
    assert verdict(2, table2=table2(low_at_5))[0] == PARTIAL
    bad = dict(low_at_5, Single=[2.0, 14, 12])  # Single falls between the testable settings
    assert verdict(1, table2=table2(bad))[0] == FAIL


def _fig3(errs_by_nc, learnable=None):
    rows = [{"method": "FedMT (E)", "N_c": nc, "round": r, "seed": s, "err_mean": e + 0.01 * s, "err_sd": 0.1}
            for nc, errs in errs_by_nc.items() for r, e in enumerate(errs, 1) for s in range(3)]
    if learnable is not None:
        nc = max(errs_by_nc)
        rows += [{"method": "Learnable", "N_c": nc, "round": 3, "seed": s, "err_mean": learnable + 0.01 * s,
                  "err_sd": 0.1} for s in range(3)]
    return pd.DataFrame(rows)


def test_fig3_checks():
    f = _fig3({50: [4.0, 3.0, 2.5], 150: [4.0, 1.0, 0.5]}, learnable=2.0)
    assert verdict(16, fig3=f)[0] == PASS and verdict(17, fig3=f)[0] == PASS and verdict(18, fig3=f)[0] == PASS
    f = _fig3({50: [4.0, 3.0, 2.5], 150: [4.0, 3.5, 3.9]}, learnable=0.1)
    assert verdict(16, fig3=f)[0] == FAIL and verdict(17, fig3=f)[0] == FAIL and verdict(18, fig3=f)[0] == FAIL


def _t8(fn):
    return pd.DataFrame([{"dataset": "CIFAR-100", "lambda2": lam, "method": m, "metric": "test_acc_100class",
                          "mean": fn(lam, m), "std": 0.1, "n_seeds": 3}
                         for lam in (1, 1 / 4, 1 / 16, 1 / 64) for m in ("FedMT (T)", "FedMT (E)")])


def test_claim30_best_lambda2_and_the_rise_to_it():
    assert verdict(30, table8=_t8(lambda lam, m: 50 - abs(lam - 1 / 16) * 10 - (m == "FedMT (E)")))[0] == PASS
    assert verdict(30, table8=_t8(lambda lam, m: 60 if lam == 1 else 50))[0] == FAIL


def _t3(acc9: dict, acc3: dict):
    rows = [{"dataset": "Fitzpatrick17k", "r_percent": r, "method": m, "metric": metric, "mean": v[i]}
            for metric, d in (("test_acc_9class", acc9), ("test_acc_3class", acc3))
            for m, v in d.items() for i, r in enumerate((5, 10, 20))]
    return pd.DataFrame(rows)


T3_9 = {"Single": [38.0, 50.44, 53.11], "FedTrans": [39.11, 44.66, 54.0], "FedRep": [46.0, 49.11, 54.89],
        "SemiFL": [44.44, 52.22, 57.11], "FedMT (E)": [52.0, 56.0, 58.22]}
T3_3 = {"FedTrans": [70.22, 69.33, 68.22], "FedRep": [71.67, 72.1, 72.29], "FedMT (E)": [70.18, 71.91, 73.06]}


def test_table3_claims_test_their_statements():
    t = _t3(T3_9, T3_3)
    assert all(verdict(c, table3=t)[0] == PASS for c in range(19, 26))
    # claim 20 states the margin (52.00 vs 46.00): a winner by 1 point is not the claimed 6
    v, detail = verdict(20, table3=_t3(dict(T3_9, **{"FedMT (E)": [47.0, 56.0, 58.22]}), T3_3))
    assert v == FAIL and "stated 6" in detail
    assert verdict(22, table3=_t3(T3_9, dict(T3_3, FedTrans=[70.22, 69.33, 71.0])))[0] == FAIL


def test_table6_needs_both_initialisations():
    rows = [{"n": n, "init": init, "method": m, "metric": "test_acc_100class", "mean": base + (10 if init == "imagenet" else 0)}
            for n in (5, 10) for m, base in (("Single", 8.0), ("FedRep", 16.0), ("FedTrans", 20.0))
            for init in ("random", "imagenet")]
    t6 = pd.DataFrame(rows)
    assert verdict(26, table6=t6)[0] == PASS
    v, detail = verdict(26, table6=t6[t6["init"] == "random"])  # our runs: no ImageNet weights offline
    assert v == NOT_CHECKABLE and "imagenet" in detail
