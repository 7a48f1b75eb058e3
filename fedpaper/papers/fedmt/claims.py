"""The 33 claims of targets/fedmt.md section 3, checked on our committed numbers.

Accuracies are percent on balanced test sets: chance is 100/K (1% for the 100 fine classes, 5% for
the 20 superclasses; the smoke stand-in has 20 fine / 5 coarse classes). A comparison that involves
a method whose mean is at most chance + 2 points is "not testable" (papers/_common/claims.py
NOT_TESTABLE): neither verdict would say anything about the claim. Claims over a range of settings
(n, gamma, C, threshold) are tested on the settings where every compared method is above that level;
when some settings are left out and the claim holds on the rest, the verdict is PARTIAL.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fedpaper.papers import Claim
from fedpaper.papers._common.claims import CHANCE_MARGIN_PCT, NOT_TESTABLE, PARTIAL

T2, F2A, F2B, F2C, F2D, F3, T3, T6, T7, T8, T9 = (f"fedmt/{a}" for a in (
    "table2", "fig2a", "fig2b", "fig2c", "fig2d", "fig3", "table3", "table6", "table7", "table8", "table9"))
FL = ["FedTrans", "FedRep", "SemiFL", "FedMT (T)", "FedMT (E)"]
BASE = ["Single", "FedTrans", "FedRep", "SemiFL"]

# (claim id, artifacts it is checked on, statement; the location in the paper in parentheses)
_CLAIMS = [
    ('fedmt/claim-1', ['fedmt/table2'],
     '(Table 2) the accuracy of every method increases with n.'),
    ('fedmt/claim-2', ['fedmt/table2'],
     '(Table 2) every FL method (FedTrans, FedRep, SemiFL, FedMT) beats Single at every n.'),
    ('fedmt/claim-3', ['fedmt/table2'],
     '(Table 2) both FedMT (T) and FedMT (E) beat every baseline at every n.'),
    ('fedmt/claim-4', ['fedmt/table2'],
     '(Table 2) FedMT (T) has the highest mean accuracy at every n.'),
    ('fedmt/claim-5', ['fedmt/table2'],
     '(Table 2) FedMT (E) stays close to FedMT (T), and the gap shrinks as n grows (10.71 points at n = 5, 0.69 at n = 25).'),
    ('fedmt/claim-6', ['fedmt/table2'],
     '(Table 2) SemiFL is only competitive at large n: it is below the better of FedRep and FedTrans for n <= 15 and above both for n >= 20.'),
    ('fedmt/claim-7', ['fedmt/fig2a'],
     '(Fig. 2a) super-class accuracy of FedRep and FedMT increases with n.'),
    ('fedmt/claim-8', ['fedmt/fig2a'],
     '(Fig. 2a) FedTrans super-class accuracy does not depend on n.'),
    ('fedmt/claim-9', ['fedmt/fig2a'],
     '(Fig. 2a) FedMT has the best super-class accuracy.'),
    ('fedmt/claim-10', ['fedmt/fig2b'],
     '(Fig. 2b) accuracy of both SemiFL and FedMT falls as gamma increases.'),
    ('fedmt/claim-11', ['fedmt/fig2b'],
     '(Fig. 2b) FedMT beats SemiFL at every gamma, including 0.99.'),
    ('fedmt/claim-12', ['fedmt/fig2c'],
     '(Fig. 2c) accuracy of both methods falls as C grows with N_c x C fixed at 40,000.'),
    ('fedmt/claim-13', ['fedmt/fig2c'],
     '(Fig. 2c) SemiFL drops from 55.98 (C = 10) to 26.10 (C = 80), a 53.38% relative drop, while FedMT (E) drops by only 35.59%.'),
    ('fedmt/claim-14', ['fedmt/fig2c'],
     '(Fig. 2c) FedMT beats SemiFL at every C.'),
    ('fedmt/claim-15', ['fedmt/fig2d'],
     '(Fig. 2d) FedMT is best for MobileNet-V2, ResNet-18 and ResNet-50.'),
    ('fedmt/claim-16', ['fedmt/fig3'],
     '(Fig. 3) the estimation error of M falls as N_c grows.'),
    ('fedmt/claim-17', ['fedmt/fig3'],
     '(Fig. 3, Sec. 5) for N_c = 4,000 the error approaches zero as rounds increase (the estimate converges).'),
    ('fedmt/claim-18', ['fedmt/fig3'],
     '(Fig. 3) the learnable M has a larger error than the eq. (4) estimate.'),
    ('fedmt/claim-19', ['fedmt/table3'],
     '(Table 3) FedMT (E) has the highest 9-class accuracy at every r.'),
    ('fedmt/claim-20', ['fedmt/table3'],
     '(Table 3) at r = 5% the best competitor reaches 46.00 (FedRep) and FedMT (E) 52.00.'),
    ('fedmt/claim-21', ['fedmt/table3'],
     '(Table 3) 9-class accuracy of every method increases with r.'),
    ('fedmt/claim-22', ['fedmt/table3'],
     '(Table 3) FedTrans 3-class accuracy decreases as r increases (70.22, 69.33, 68.22).'),
    ('fedmt/claim-23', ['fedmt/table3'],
     '(Table 3) the 9-class margin of FedMT (E) over the best competitor is largest at the smallest r (6.00, 3.78, 1.11 points).'),
    ('fedmt/claim-24', ['fedmt/table3'],
     '(Table 3) at r = 20% FedMT (E) has the best 3-class accuracy, 73.06 vs FedRep 72.29.'),
    ('fedmt/claim-25', ['fedmt/table3'],
     '(Table 3) at r = 20% FedMT (E) leads the 9-class task with 58.22 vs 57.11 for its closest competitor.'),
    ('fedmt/claim-26', ['fedmt/table6'],
     '(Table 6) ImageNet initialisation beats random initialisation for Single, FedRep and FedTrans at every n.'),
    ('fedmt/claim-27', ['fedmt/table2'],
     '(Sec. 4.2, no reported numbers) SemiFL and FedMT do better from random weights than from ImageNet weights on CIFAR-100.'),
    ('fedmt/claim-28', ['fedmt/table7'],
     '(Table 7) with a fixed number of rounds, a lower threshold gives higher accuracy.'),
    ('fedmt/claim-29', ['fedmt/table7'],
     '(Table 7) FedMT (E) beats SemiFL at every threshold.'),
    ('fedmt/claim-30', ['fedmt/table8'],
     '(Table 8) accuracy of FedMT (T) and FedMT (E) rises as lambda2 decreases from 1 to 1/16 and falls below 1/16; 1/16 is best for both.'),
    ('fedmt/claim-31', ['fedmt/table9'],
     '(Table 9) client-specific FedMT (E) is the best estimator in the IID setting and at every non-IID gamma.'),
    ('fedmt/claim-32', ['fedmt/table9'],
     '(Table 9) averaging the estimates across clients lowers accuracy.'),
    ('fedmt/claim-33', ['fedmt/table9', 'fedmt/fig2b'],
     '(Table 9, Fig. 2b) for every estimator accuracy falls monotonically from IID to gamma = 0.99.'),
]



def chance(t: pd.DataFrame, metric: str) -> float:
    stand_in = "dataset" in t and (t["dataset"] == "stand-in").any()
    if metric == "test_acc_20class":
        return 100 / (5 if stand_in else 20)
    return 100 / (20 if stand_in else 100)


def means(t: pd.DataFrame, x: str, metric: str = "test_acc_100class") -> pd.DataFrame:
    """mean accuracy, index = values of column x (sorted), columns = methods."""
    t = t[t["metric"] == metric]
    return t.pivot_table(index=x, columns="method", values="mean", aggfunc="first", dropna=False).sort_index()


def spreads(t: pd.DataFrame, x: str, metric: str = "test_acc_100class") -> pd.DataFrame:
    """seed sd of each mean, laid out as `means`."""
    t = t[t["metric"] == metric]
    if "std" not in t:
        return pd.DataFrame()
    return t.pivot_table(index=x, columns="method", values="std", aggfunc="first", dropna=False).sort_index()


def _noise(t, x, metric, methods, gaps) -> str:
    """'; within seed noise: ...' when the smallest |gap| a verdict rests on is below the largest seed
    sd of the methods compared (3 seeds: the verdict could flip with another seed), else ''."""
    sd = spreads(t, x, metric)
    cols = [k for k in methods if k in sd]
    vals = sd[cols].to_numpy(dtype=float) if cols else np.array([np.nan])
    if not cols or not len(gaps) or np.isnan(vals).all():
        return ""
    top, low = float(np.nanmax(vals)), float(np.nanmin(np.abs(np.asarray(gaps, dtype=float))))
    if not np.isfinite(top) or low >= top:
        return ""
    return f"; within seed noise: the smallest difference the verdict rests on ({low:.2f} points) is below the largest seed sd ({top:.2f})"


def _need(tables, *ids):
    missing = [a for a in ids if tables.get(a) is None]
    return (None, f"no committed csv for {', '.join(missing)}") if missing else None


def _at_chance(m: pd.DataFrame, methods, level) -> list:
    return [k for k in methods if k in m and (m[k] <= level + CHANCE_MARGIN_PCT).any()]


def _fmt(m: pd.DataFrame, methods) -> str:
    return "; ".join(f"{k}: " + ", ".join(f"{i}={v:.2f}" for i, v in m[k].items()) for k in methods if k in m)


def _guard(m, methods, level):
    missing = [k for k in methods if k not in m]
    if missing:
        return None, f"methods missing from our table: {missing}"
    low = _at_chance(m, methods, level)
    if low:
        return NOT_TESTABLE, f"at chance ({level:g}% + {CHANCE_MARGIN_PCT:g}): {low}; {_fmt(m, methods)}"
    return None


def _testable_rows(m, methods, level, need: int):
    """(m restricted to the rows where every compared method is above chance, a note on the rows
    left out, or a (verdict, detail) when fewer than `need` rows remain or a method is missing)."""
    missing = [k for k in methods if k not in m]
    if missing:
        return None, None, (None, f"methods missing from our table: {missing}")
    low = m[methods].le(level + CHANCE_MARGIN_PCT).any(axis=1)
    if int((~low).sum()) < need:
        return None, None, (NOT_TESTABLE, f"at chance ({level:g}% + {CHANCE_MARGIN_PCT:g}): "
                                          f"{_at_chance(m, methods, level)}; {_fmt(m, methods)}")
    note = ""
    if low.any():
        at = {i: [k for k in methods if m.at[i, k] <= level + CHANCE_MARGIN_PCT] for i in m.index[low]}
        note = (f" (tested on {[float(i) if isinstance(i, float) else i for i in m.index[~low]]}; not testable at "
                + "; ".join(f"{i}: {ks} at chance" for i, ks in at.items()) + ")")
    return m[~low], note, None


def _partial(ok: bool, note: str):
    """A verdict on the testable rows only: PARTIAL when it holds there and rows were left out."""
    return PARTIAL if ok and note else ok


def _increasing(t, x, metric, methods, strict=True):
    m_all = means(t, x, metric)
    m, note, g = _testable_rows(m_all, methods, chance(t, metric), 2)
    if g:
        return g
    ok = {k: bool((np.diff(m[k].to_numpy()) > 0).all() if strict else (np.diff(m[k].to_numpy()) >= 0).all())
          for k in methods}
    gaps = np.concatenate([np.diff(m[k].to_numpy()) for k in methods])
    return _partial(all(ok.values()), note), _fmt(m_all, methods) + note + _noise(t, x, metric, methods, gaps)


def _decreasing(t, x, metric, methods, order=None):
    m_all = means(t, x, metric)
    if order is not None:
        m_all = m_all.reindex(order)
    m, note, g = _testable_rows(m_all, methods, chance(t, metric), 2)
    if g:
        return g
    gaps = np.concatenate([np.diff(m[k].to_numpy()) for k in methods])
    ok = all(bool((np.diff(m[k].to_numpy()) < 0).all()) for k in methods)
    return _partial(ok, note), _fmt(m_all, methods) + note + _noise(t, x, metric, methods, gaps)


def _beats(t, x, metric, winners, losers):
    m_all = means(t, x, metric)
    m, note, g = _testable_rows(m_all, winners + losers, chance(t, metric), 1)
    if g:
        return g
    ok = all((m[w] > m[l]).all() for w in winners for l in losers)
    gaps = np.concatenate([(m[w] - m[l]).to_numpy() for w in winners for l in losers])
    return _partial(ok, note), _fmt(m_all, winners + losers) + note + _noise(t, x, metric, winners + losers, gaps)


# ------------------------------------------------------------------ Table 2 / Fig 2a
def c1(tb):
    return _need(tb, T2) or _increasing(tb[T2], "n", "test_acc_100class", BASE + ["FedMT (T)", "FedMT (E)"])


def c2(tb):
    return _need(tb, T2) or _beats(tb[T2], "n", "test_acc_100class", FL, ["Single"])


def c3(tb):
    return _need(tb, T2) or _beats(tb[T2], "n", "test_acc_100class", ["FedMT (T)", "FedMT (E)"], BASE)


def c4(tb):
    return _need(tb, T2) or _beats(tb[T2], "n", "test_acc_100class", ["FedMT (T)"], BASE + ["FedMT (E)"])


def c5(tb):
    if _need(tb, T2):
        return _need(tb, T2)
    m = means(tb[T2], "n")
    g = _guard(m, ["FedMT (T)", "FedMT (E)"], chance(tb[T2], "test_acc_100class"))
    if g:
        return g
    gap = m["FedMT (T)"] - m["FedMT (E)"]
    return bool(abs(gap.iloc[-1]) < abs(gap.iloc[0])), "T - E gap per n: " + ", ".join(f"{i}={v:.2f}" for i, v in gap.items())


def c6(tb):
    if _need(tb, T2):
        return _need(tb, T2)
    m = means(tb[T2], "n")
    g = _guard(m, ["SemiFL", "FedRep", "FedTrans"], chance(tb[T2], "test_acc_100class"))
    if g:
        return g
    best = m[["FedRep", "FedTrans"]]
    small = m.index <= 15
    ok = bool((m["SemiFL"][small] < best.max(axis=1)[small]).all() and (m["SemiFL"][~small] > best.max(axis=1)[~small]).all())
    return ok, _fmt(m, ["SemiFL", "FedRep", "FedTrans"]) + ("" if (~small).any() else " (no n >= 20 in this profile)")


def c7(tb):
    return _need(tb, F2A) or _increasing(tb[F2A], "n", "test_acc_20class", ["FedRep", "FedMT (T)", "FedMT (E)"])


def c8(tb):
    if _need(tb, F2A):
        return _need(tb, F2A)
    m = means(tb[F2A], "n", "test_acc_20class")
    g = _guard(m, ["FedTrans"], chance(tb[F2A], "test_acc_20class"))
    if g:
        return g
    spread = float(m["FedTrans"].max() - m["FedTrans"].min())
    return spread <= 2.0, f"FedTrans 20-class accuracy spread over n = {spread:.2f} points (constant: <= 2); " + _fmt(m, ["FedTrans"])


def c9(tb):
    return _need(tb, F2A) or _beats(tb[F2A], "n", "test_acc_20class", ["FedMT (T)", "FedMT (E)"], ["FedTrans", "FedRep"])


# ------------------------------------------------------------------ Fig 2b, 2c
def _gamma_table(t):
    t = t.copy()
    t["skew"] = t["gamma"].fillna(0.0)
    return t


def c10(tb):
    return _need(tb, F2B) or _decreasing(_gamma_table(tb[F2B]), "skew", "test_acc_100class", ["SemiFL", "FedMT (E)"])


def c11(tb):
    return _need(tb, F2B) or _beats(_gamma_table(tb[F2B]), "skew", "test_acc_100class", ["FedMT (E)"], ["SemiFL"])


def c12(tb):
    return _need(tb, F2C) or _decreasing(tb[F2C], "C", "test_acc_100class", ["SemiFL", "FedMT (E)"])


def c13(tb):
    if _need(tb, F2C):
        return _need(tb, F2C)
    m = means(tb[F2C], "C")
    g = _guard(m, ["SemiFL", "FedMT (E)"], chance(tb[F2C], "test_acc_100class"))
    if g:
        return g
    drop = {k: 100 * (m[k].iloc[0] - m[k].iloc[-1]) / m[k].iloc[0] for k in ("SemiFL", "FedMT (E)")}
    return bool(drop["FedMT (E)"] < drop["SemiFL"]), (
        f"relative drop C={m.index[0]} -> C={m.index[-1]}: SemiFL {drop['SemiFL']:.2f}%, FedMT (E) "
        f"{drop['FedMT (E)']:.2f}% (paper, C=10 -> 80: 53.38% vs 35.59%)")


def c14(tb):
    return _need(tb, F2C) or _beats(tb[F2C], "C", "test_acc_100class", ["FedMT (E)"], ["SemiFL"])


def not_regenerated(reason):
    def check(tb):
        return None, reason
    return check


# ------------------------------------------------------------------ Fig 3
def _final_err(t):
    last = t[t["round"] == t.groupby(["method", "N_c"])["round"].transform("max")]
    return last[last["method"] == "FedMT (E)"].groupby("N_c")["err_mean"].mean().sort_index()


def c16(tb):
    if _need(tb, F3):
        return _need(tb, F3)
    e = _final_err(tb[F3])
    return bool((np.diff(e.to_numpy()) < 0).all()), "final-round mean error per N_c: " + \
        ", ".join(f"{i}={v:.3f}" for i, v in e.items())


def c17(tb):
    if _need(tb, F3):
        return _need(tb, F3)
    t = tb[F3]
    t = t[(t["method"] == "FedMT (E)") & (t["N_c"] == t["N_c"].max())].groupby("round")["err_mean"].mean().sort_index()
    first, last = float(t.iloc[0]), float(t.iloc[-1])
    return bool(last < first and last <= 0.25 * first), (
        f"N_c={tb[F3]['N_c'].max()}: mean error {first:.3f} (round {t.index[0]}) -> {last:.3f} (round {t.index[-1]}); "
        "'approaches zero' read as: falls to at most a quarter of its first value")


def c18(tb):
    if _need(tb, F3):
        return _need(tb, F3)
    t = tb[F3]
    t = t[t["N_c"] == t["N_c"].max()]
    last = t[t["round"] == t["round"].max()].groupby("method")["err_mean"].mean()
    if not {"Learnable", "FedMT (E)"} <= set(last.index):
        return None, f"fig3 lacks a method: {sorted(last.index)}"
    return bool(last["Learnable"] > last["FedMT (E)"]), (
        f"final-round mean error at N_c={t['N_c'].max()}: Learnable {last['Learnable']:.3f}, "
        f"FedMT (E) {last['FedMT (E)']:.3f}")


# ------------------------------------------------------------------ Tables 7-9
def c28(tb):
    return _need(tb, T7) or _decreasing(tb[T7], "threshold", "test_acc_100class", ["SemiFL", "FedMT (E)"])


def c29(tb):
    return _need(tb, T7) or _beats(tb[T7], "threshold", "test_acc_100class", ["FedMT (E)"], ["SemiFL"])


def c30(tb):
    if _need(tb, T8):
        return _need(tb, T8)
    m = means(tb[T8], "lambda2")
    g = _guard(m, ["FedMT (T)", "FedMT (E)"], chance(tb[T8], "test_acc_100class"))
    if g:
        return g
    best = {k: float(m[k].idxmax()) for k in ("FedMT (T)", "FedMT (E)")}
    gaps = [m[k].max() - m[k].drop(m[k].idxmax()).max() for k in best if len(m[k]) > 1]  # best vs runner-up
    return all(abs(v - 1 / 16) < 1e-9 for v in best.values()), \
        "best lambda2: " + ", ".join(f"{k} {v:g}" for k, v in best.items()) + "; " + \
        _fmt(m, ["FedMT (T)", "FedMT (E)"]) + _noise(tb[T8], "lambda2", "test_acc_100class", list(best), gaps)


def _table9(tb):
    t = _gamma_table(tb[T9])
    return means(t, "skew")


def c31(tb):
    if _need(tb, T9):
        return _need(tb, T9)
    m = _table9(tb)
    others = [k for k in m.columns if k != "FedMT (E)"]
    g = _guard(m, ["FedMT (E)"] + others, chance(tb[T9], "test_acc_100class"))
    if g:
        return g
    ok = all((m["FedMT (E)"] > m[k]).all() for k in others)
    gaps = np.concatenate([(m["FedMT (E)"] - m[k]).to_numpy() for k in others])
    return ok, _fmt(m, list(m.columns)) + _noise(_gamma_table(tb[T9]), "skew", "test_acc_100class", list(m.columns), gaps)


def c32(tb):
    if _need(tb, T9):
        return _need(tb, T9)
    m = _table9(tb)
    pairs = [(a, b) for a, b in (("FedMT (E)", "FedMT (E) + Average"), ("Learnable", "Learnable + Average"))
             if a in m and b in m]
    g = _guard(m, [x for pr in pairs for x in pr] or ["FedMT (E)", "FedMT (E) + Average"],
               chance(tb[T9], "test_acc_100class"))
    if g:
        return g
    holds = {b: bool((m[b] < m[a]).all()) for a, b in pairs}
    gaps = np.concatenate([(m[a] - m[b]).to_numpy() for a, b in pairs])
    return all(holds.values()), "averaging lowers accuracy in every column: " + \
        ", ".join(f"{b}: {v}" for b, v in holds.items()) + "; " + _fmt(m, list(m.columns)) + \
        _noise(_gamma_table(tb[T9]), "skew", "test_acc_100class", list(m.columns), gaps)


def c33(tb):
    if _need(tb, T9):
        return _need(tb, T9)
    return _decreasing(_gamma_table(tb[T9]), "skew", "test_acc_100class",
                       [k for k in ("FedMT (E)", "FedMT (E) + Average", "Learnable", "Learnable + Average")
                        if k in set(tb[T9]["method"])])


CHECKS = {1: c1, 2: c2, 3: c3, 4: c4, 5: c5, 6: c6, 7: c7, 8: c8, 9: c9, 10: c10, 11: c11, 12: c12, 13: c13,
          14: c14, 16: c16, 17: c17, 28: c28, 29: c29, 30: c30, 31: c31, 32: c32, 33: c33}
FIG2D_REASON = ("ImageNet-initialised MobileNet-V2/ResNet-18/ResNet-50 need torchvision's pretrained weights, absent "
                "offline, and far more CPU than this machine has (fetch the weights with internet and run on a GPU)")
TABLE3_REASON = ("Fitzpatrick 17k is not available here (get fitzpatrick17k.csv from github.com/mattgroh/fitzpatrick17k "
                 "and download the images it lists into <data root>/fitzpatrick17k/); its loader and the App. C.2 split "
                 "are in fedpaper.data.fitzpatrick (tested on a generated stand-in), the training run is not wired yet")
FIG2D = f"not checkable: fedmt/fig2d is not regenerated: {FIG2D_REASON}"
TABLE3 = f"not checkable: fedmt/table3 is not regenerated: {TABLE3_REASON}"
for _i in (19, 20, 21, 22, 23, 24, 25):
    CHECKS[_i] = not_regenerated(TABLE3)
CHECKS[15] = not_regenerated(FIG2D)
CHECKS[18] = c18
CHECKS[26] = not_regenerated("not checkable: ImageNet weights are absent offline, so only the random-init column "
                             "of Table 6 is run")
CHECKS[27] = not_regenerated("not checkable: comparing random with ImageNet initialisation needs ImageNet weights, "
                             "absent offline")

#: Why a claim FAILS on our numbers, one line each (s5-common-runs.md item 5): "scale: ..." (what the
#: profile shrinks), "data copy: ..." or "real disagreement: ...". Written from the committed long-profile
#: results (figures/long/fedmt/); Claim.why_fails, printed by the report after a FAIL verdict only, so a
#: claim that passes, or is not testable, on another profile's numbers is not mislabelled.
_FEW_ROWS = ("the clients' confident rows S_fix average 5-24 of 400 per client in the last round (table2 "
             "sfix_rows_mean per method and n) after 6 of the paper's 200 rounds with a LeNet from random init")
FAIL_REASONS: dict[int, str] = {
    1: "scale: every method rises from n = 5 to n = 25; Single (15 -> 20) and SemiFL (20 -> 25) dip by less than "
       "their seed sd (1.4, 2.1 points)",
    2: "scale: FedTrans stays below Single for n >= 10 (6 rounds of coarse pre-training from random init; the "
       "paper's starts from ImageNet weights); the other gaps are within the seed sd",
    3: f"scale: {_FEW_ROWS}, so FedMT is within the seed sd of Single, SemiFL and FedRep (FedRep leads at n = 25)",
    4: f"scale: {_FEW_ROWS}; FedMT (T) and (E) differ only in the M of R_p on those rows, and (T) is never the "
       "highest mean (all within the seed sd)",
    5: f"scale: {_FEW_ROWS}; the T - E gap is under 1 point and within the seed sd at every n (paper: 10.71 "
       "points at n = 5)",
    6: "scale: SemiFL, FedRep and FedTrans are within about 3 points of one another at every n (seed sd up to "
       "2.3), so the order the claim needs is not resolved",
    9: "scale: FedMT (T) has the best 20-class accuracy for n >= 10, but FedMT (E) projects with the mean of the "
       "clients' eq. (4) estimates, whose columns stay near uniform with so few confident rows (fig3: error "
       "9.72 against 9.75 at the uniform start), so it lags FedRep",
    10: f"scale: {_FEW_ROWS}, so the clients' label skew barely reaches the model: both methods move by less "
        "than 1.6 points over gamma (seed sd up to 2.1)",
    11: "scale: FedMT (E) and SemiFL are within 1.5 points at every gamma (seed sd up to 2.1); SemiFL is ahead "
        "by 0.33 at gamma = 0.99",
    12: f"scale: C 10 -> 40 only (paper 10 -> 80), N_c x C = 4,000 (paper 40,000), and {_FEW_ROWS}; the "
        "changes are within the seed sd",
    13: "scale: the relative drops are ratios of differences within the seed sd (C 10 -> 40 only, N_c x C = "
        "4,000 of 40,000)",
    16: f"scale: {_FEW_ROWS}; most columns of each eq. (4) estimate keep their uniform start, so the error "
        "stays at 9.72-9.76 (uniform: 9.75) for every N_c",
    17: f"scale: {_FEW_ROWS}; N_c is 400 (paper 4,000) and the error moves from 9.747 to 9.723 only",
    28: "scale: at xi = 0.95 the clients have about 2 confident rows each (near server-only training); at xi = "
        "0.7, lambda2 = 1 FedMT (E) collapsed on seed 0 (0.70 %: after round 3, when 3 of 10 clients had one "
        "confident row each, the average of their models replaced the global model)",
    29: "scale: FedMT (E) trails at xi = 0.7 through its seed-0 collapse (per seed 0.70, 5.40, 11.70 against "
        "SemiFL 8.80, 7.10, 11.30); at xi = 0.95 it leads by 0.73, within the seed sd",
    30: f"scale: lambda2 weighs the fix/mix loss on the few confident rows ({_FEW_ROWS}); FedMT (T) differs by "
        "under 1.3 points over lambda2 (seed sd up to 2.2) and FedMT (E) at lambda2 = 1 carries its seed-0 collapse",
    31: f"scale: the four estimators are within 1.9 points at every gamma (seed sd up to 2.2) since {_FEW_ROWS}; "
        "the learnable M never leaves its start either (fig3)",
    32: f"scale: averaging changes the M of R_p only on the few confident rows ({_FEW_ROWS}); every difference is "
        "within the seed sd",
    33: f"scale: as claim 10, {_FEW_ROWS}, so the clients' label skew barely reaches the model",
}


def _claim(cid: str, arts, text: str) -> Claim:
    num = int(cid.rsplit("-", 1)[1])
    return Claim(cid, text, artifacts=tuple(arts), check=CHECKS.get(num), why_fails=FAIL_REASONS.get(num, ""))


CLAIMS = [_claim(cid, arts, text) for cid, arts, text in _CLAIMS]
