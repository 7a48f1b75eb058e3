"""The 20 claims of targets/privlabels.md section 3, checked on our committed numbers.

Accuracies are fractions on balanced 10-class test sets, so chance is 0.10; a method whose mean
is at most 0.12 is at chance (papers/_common/claims.py CHANCE_RULE, without per-seed values) and a
comparison that needs it is not testable at that L. The committed ci_low/ci_high are the 95%
percentile bootstrap over seeds, which for our 3 seeds is exactly the seeds' min-max range: every
detail names the interval by what it is (interval_name), and "overlap" means these ranges overlap.
"""
from __future__ import annotations

from fedpaper.papers import Claim
from fedpaper.papers.privlabels.diagnoses import WHY_FAILS
from fedpaper.papers._common.claims import (
    CHANCE_MARGIN_PCT,
    NOT_TESTABLE,
    PARTIAL,
    chance_models,
    chance_pct,
    interval_name,
    on_code,
    parse_seeds,
)

_TEXT = [
    ("claim-1", ["fig2", "fig3"], "On CIFAR-10 and Fashion-MNIST, in both settings and for every method, mean test "
     "accuracy falls as L decreases; accuracy at L=2 is outside (below) the seed interval of accuracy at L=10."),
    ("claim-2", ["fig2"], "CIFAR-10, public: FedRS has the highest mean accuracy of the public methods."),
    ("claim-3", ["fig2"], "CIFAR-10, public: Tuning-Pairwise has higher mean accuracy than FedAvg and FedProx."),
    ("claim-4", ["fig2"], "CIFAR-10, public: Tuning-MSE is below Tuning-Pairwise and does not beat FedAvg."),
    ("claim-5", ["fig2"], "CIFAR-10, private: both tuning methods beat adapted FedAvg and FedProx, and Tuning-MSE "
     "has the highest mean accuracy of the private methods."),
    ("claim-6", ["fig2"], "CIFAR-10, private: Tuning-MSE is slightly above Tuning-Pairwise."),
    ("claim-7", ["fig2"], "CIFAR-10, private: the tuning methods' across-seed spread is larger than that of "
     "adapted FedAvg/FedProx."),
    ("claim-8", ["fig1b"], "CIFAR-10, L=5, private: Tuning-MSE and Tuning-Pairwise are the two best methods."),
    ("claim-9", ["fig2", "fig3"], "FedAvg and FedProx: private (adapted) accuracy is close to public accuracy "
     "(seed intervals overlap; the paper: within the 95% CIs) on both data sets at every L."),
    ("claim-10", ["fig3"], "Fashion-MNIST, private: neither tuning method has a higher mean accuracy than adapted "
     "FedAvg/FedProx, and the tuning methods have large across-seed variance."),
    ("claim-11", ["fig4"], "Fashion-MNIST, L=3, private: all four private methods perform similarly (overlapping seed intervals)."),
    ("claim-12", ["fig3"], "Fashion-MNIST: Tuning-Pairwise > Tuning-MSE in the public setting and Tuning-MSE > "
     "Tuning-Pairwise in the private setting."),
    ("claim-13", ["fig3"], "Fashion-MNIST, public: both tuning methods are below FedAvg, FedProx and FedRS, and "
     "these three are about equal (overlapping seed intervals)."),
    ("claim-14", ["fig2", "fig3"], "Central tuning gains over adapted FedAvg in the private setting (best tuning "
     "method above FedAvg at the smallest L), and the gain is larger at small L than at large L."),
    ("claim-15", ["fig5", "fig6", "fig7", "fig8"], "Over rounds, FedAvg and the tuning methods converge at similar "
     "rounds, and the tuning methods' curves have larger across-seed variance."),
    ("claim-16", ["fig11"], "CIFAR-10: changing the local epochs per round (E=1, 3, 5) does not meaningfully change "
     "the test accuracy of FedAvg or the tuning methods."),
    ("claim-17", ["fig12", "fig13"], "With E=3 and E=5 (SGD central tuning), Tuning-MSE beats Tuning-Pairwise in "
     "the private setting."),
    ("claim-18", ["appB"], "With label 9 held by no client, the label-9 terms of the all-pairs pairwise loss equal "
     "sum (h_k(y_j) p_9)^2 and their gradient pushes p_9 to 0; the MSE loss (eq. 6) has no term for label 9."),
    ("claim-19", ["fig2", "fig3"], "A label missing from every client is far more likely with fewer labels per "
     "client (expected missing labels 10 (1 - L/10)^10: 1.07 at L=2, 0.28 at L=3, 0.06 at L=4, 0.01 at L=5)."),
    ("claim-20", ["fig3"], "Adapted FedAvg is a strong baseline: in the private setting its seed interval reaches that of the "
     "best method on Fashion-MNIST at every L."),
]

import numpy as np
import pandas as pd

FIG2, FIG3 = "privlabels/fig2", "privlabels/fig3"
STD = ["FedAvg", "FedProx", "FedRS", "Tuning-MSE", "Tuning-Pairwise"]
TUNE = ["Tuning-MSE", "Tuning-Pairwise"]
ADAPT = ["FedAvg", "FedProx"]


def _acc(t):
    return t[t["metric"] == "accuracy"] if "metric" in t else t


def _need(tables, *ids):
    miss = [i for i in ids if tables.get(i) is None]
    return f"no committed table for {', '.join(miss)}" if miss else None


def _below10(t):
    Ls = sorted(int(L) for L in t["labels_per_client"].unique() if L < 10)
    return t[t["labels_per_client"].isin(Ls)], Ls


CHANCE = chance_pct(num_classes=10) / 100
AT_CHANCE = CHANCE + CHANCE_MARGIN_PCT / 100


def _iv(t) -> str:
    """' (intervals: min-max over n=3 seeds)': what the ci_low/ci_high columns of `t` are."""
    return f" (intervals: {interval_name(t['n_seeds'].min())})" if "n_seeds" in t and len(t) else ""


def at_chance(rows) -> list[str]:
    """Methods among `rows` (one row per method, same data/setting/L or E) that sit at chance by the
    shared rule (papers._common.claims.CHANCE_RULE): most seeds at most chance + 2 points, or a seed
    value that 3 or more methods share exactly (one-class models); without a per_seed column, the
    mean at most chance + 2 points."""
    def seeds(r):
        return [100 * v for v in parse_seeds(getattr(r, "per_seed", None))]
    return sorted(chance_models([(r.method, 100 * r.mean, seeds(r)) for r in rows.itertuples()], 100 * CHANCE))


def _chance_text1(names, where="") -> str:
    return (f"{', '.join(names)} at chance{' ' + where if where else ''} (most seeds <= {AT_CHANCE:.2f}, chance "
            f"{CHANCE:.2f}, or a one-class value shared by 3+ methods on a seed)")


def _chance_Ls(t, setting, methods) -> dict:
    """{L: [methods at chance]} over the L values below 10 (at_chance on each L's rows)."""
    a, _ = _below10(_acc(t))
    a = a[(a["setting"] == setting) & a["method"].isin(methods)]
    out = {}
    for L, g in a.groupby("labels_per_client"):
        low = at_chance(g)
        if low:
            out[int(L)] = low
    return out


def _chance_text(low: dict) -> str:
    return "; ".join(f"L={L}: {', '.join(ms)} at chance" for L, ms in low.items()) + (
        f" (most seeds <= {AT_CHANCE:.2f}, chance {CHANCE:.2f}, or a one-class value shared by 3+ methods on a seed)"
        if low else "")


def _avg(t, setting, methods, col="mean"):
    """Per method: `col` averaged over the L values below 10 (where the methods differ), leaving
    out the L values where one of `methods` sits at chance (see _testable)."""
    a, _ = _below10(_acc(t))
    low = _chance_Ls(t, setting, methods)
    a = a[(a["setting"] == setting) & a["method"].isin(methods) & ~a["labels_per_client"].isin(list(low))]
    return a.groupby("method")[col].mean().reindex(methods)


def _partial(ok: bool, note: str):
    """A verdict on the L values where the models learn: PARTIAL when it holds there but some L
    values were left out at chance (`note` non-empty), else the plain bool."""
    return PARTIAL if ok and note else bool(ok)


def _testable(t, setting, methods) -> tuple:
    """(L values below 10 where no method in `methods` is at chance, note on the others)."""
    _, Ls = _below10(_acc(t))
    low = _chance_Ls(t, setting, methods)
    kept = [L for L in Ls if L not in low]
    return kept, (f"; left out {_chance_text(low)}" if low else "")


def _fmt(s):
    return ", ".join(f"{k} {v:.3f}" for k, v in s.items())


def _overlap(rows) -> bool:
    return float(rows["ci_low"].max()) <= float(rows["ci_high"].min())


def check_claim1(tables):
    avail = [i for i in (FIG2, FIG3) if tables.get(i) is not None]
    if not avail:
        return None, "no committed table for privlabels/fig2, privlabels/fig3"
    bad, n, single, flat = [], 0, set(), []
    for aid in avail:
        a = _acc(tables[aid])
        for (setting, m), g in a.groupby(["setting", "method"]):
            g = g.sort_values("labels_per_client")
            if len(g) < 2:  # a method run at one L only (e.g. the all-pairs variant in quick) has no trend
                single.add(m)
                continue
            lo, hi = g.iloc[0], g.iloc[-1]
            top = a[(a["setting"] == setting) & (a["labels_per_client"] == hi["labels_per_client"])]
            if m in at_chance(top):  # at chance even at the largest L: no fall with L to see
                flat.append(f"{aid.split('/')[1]} {setting} {m}")
                continue
            rho = np.corrcoef(g["labels_per_client"], g["mean"])[0, 1] if len(g) > 2 else 1.0
            n += 1
            if not (lo["ci_high"] < hi["ci_low"] and rho > 0):
                bad.append(f"{aid.split('/')[1]} {setting} {m}: L={lo['labels_per_client']} {lo['mean']:.3f} "
                           f"[{lo['ci_low']:.3f}, {lo['ci_high']:.3f}] vs L={hi['labels_per_client']} {hi['mean']:.3f} "
                           f"[{hi['ci_low']:.3f}, {hi['ci_high']:.3f}], corr(L, mean) {rho:.2f}")
    skipped = f" (not checked, run at one L only: {', '.join(sorted(single))})" if single else ""
    if flat:
        skipped += f"; not testable: {_chance_text1(flat, 'at the largest L')}"
    if n == 0 and flat:
        return NOT_TESTABLE, f"no curve where the method learns at the largest L{skipped}"
    if bad:
        return False, f"{len(bad)} of {n} method/setting curves fail: " + "; ".join(bad) + skipped + _iv(_acc(tables[avail[0]]))
    return (PARTIAL if flat else True), (f"all {n} testable curves: smallest-L interval below the largest-L interval "
                                         f"and accuracy increasing with L (corr > 0){skipped}" + _iv(_acc(tables[avail[0]])))


def _order(tables, aid, setting, test, methods=STD):
    miss = _need(tables, aid)
    if miss:
        return None, miss
    methods = [m for m in methods if m in set(_acc(tables[aid])["method"])]
    Ls, note = _testable(tables[aid], setting, methods)
    if not Ls:
        return NOT_TESTABLE, f"{setting}: no L below 10 where every compared method learns{note}"
    avg = _avg(tables[aid], setting, methods)
    return _partial(test(avg), note), f"{setting}, mean accuracy over L in {Ls}: {_fmt(avg)}{note}"


def check_claim2(tables):
    return _order(tables, FIG2, "public", lambda a: a.idxmax() == "FedRS")


def check_claim3(tables):
    return _order(tables, FIG2, "public", lambda a: a["Tuning-Pairwise"] > max(a["FedAvg"], a["FedProx"]))


def check_claim4(tables):
    return _order(tables, FIG2, "public",
                  lambda a: a["Tuning-MSE"] < a["Tuning-Pairwise"] and a["Tuning-MSE"] <= a["FedAvg"])


def check_claim5(tables):
    return _order(tables, FIG2, "private", lambda a: min(a[TUNE]) > max(a[ADAPT]) and a.idxmax() == "Tuning-MSE",
                  methods=ADAPT + TUNE)


def check_claim6(tables):
    ok, d = _order(tables, FIG2, "private", lambda a: a["Tuning-MSE"] > a["Tuning-Pairwise"],
                   methods=TUNE + ["Tuning-Pairwise (all pairs)"])
    return ok, d


def _spread(tables, aid, setting):
    s = _avg(tables[aid], setting, ADAPT + TUNE, col="std")
    return s, s[TUNE].mean() > s[ADAPT].mean()


def check_claim7(tables):
    miss = _need(tables, FIG2)
    if miss:
        return None, miss
    Ls, note = _testable(tables[FIG2], "private", ADAPT + TUNE)
    if not Ls:
        return NOT_TESTABLE, f"private: no L below 10 where every compared method learns{note}"
    s, ok = _spread(tables, FIG2, "private")
    return _partial(ok, note), f"private, across-seed std averaged over L in {Ls}: {_fmt(s)}{note}"


def check_claim8(tables):
    miss = _need(tables, "privlabels/fig1b")
    if miss:
        return None, miss
    rows = _acc(tables["privlabels/fig1b"])
    rows = rows[(rows["setting"] == "private") & rows["method"].isin(ADAPT + TUNE)]
    a = rows.set_index("method")["mean"]
    low = at_chance(rows)
    if low:
        return NOT_TESTABLE, f"private, L=5: {_chance_text1(low)}: {_fmt(a)}"
    top2 = set(a.sort_values(ascending=False).index[:2])
    return top2 == set(TUNE), f"private, L=5: {_fmt(a)}"


def check_claim9(tables):
    avail = [i for i in (FIG2, FIG3) if tables.get(i) is not None]
    if not avail:
        return None, "no committed table for privlabels/fig2, privlabels/fig3"
    bad, n, gaps, untestable = [], 0, [], []
    for aid in avail:
        a = _acc(tables[aid])
        for m in ADAPT:
            for L, g in a[a["method"] == m].groupby("labels_per_client"):
                if set(g["setting"]) != {"private", "public"}:
                    continue
                pr, pu = g[g["setting"] == "private"].iloc[0], g[g["setting"] == "public"].iloc[0]
                at_L = a[a["labels_per_client"] == L]
                both = [m in at_chance(at_L[at_L["setting"] == st]) for st in ("private", "public")]
                if all(both):  # two chance-level models are trivially close
                    untestable.append(f"{aid.split('/')[1]} {m} L={L}")
                    continue
                n += 1
                gaps.append(pr["mean"] - pu["mean"])
                if not _overlap(g):
                    bad.append(f"{aid.split('/')[1]} {m} L={L}: private {pr['mean']:.3f} [{pr['ci_low']:.3f}, "
                               f"{pr['ci_high']:.3f}] vs public {pu['mean']:.3f} [{pu['ci_low']:.3f}, {pu['ci_high']:.3f}]")
    d = f"private - public mean gap from {min(gaps):+.3f} to {max(gaps):+.3f} over {n} pairs" if gaps else "no pairs"
    d += ("; seed intervals disjoint: " + "; ".join(bad) if bad else "; all seed intervals overlap")
    d += (f"; not testable: {_chance_text1(untestable, '(private and public)')}" if untestable else "")
    d += _iv(_acc(tables[avail[0]]))
    verdict = False if bad else (NOT_TESTABLE if n == 0 and untestable else (PARTIAL if untestable else n > 0))
    return verdict, d


def check_claim10(tables):
    miss = _need(tables, FIG3)
    if miss:
        return None, miss
    Ls, note = _testable(tables[FIG3], "private", ADAPT + TUNE)
    if not Ls:
        return NOT_TESTABLE, f"private: no L below 10 where every compared method learns{note}"
    a = _avg(tables[FIG3], "private", ADAPT + TUNE)
    s, spread = _spread(tables, FIG3, "private")
    ok = max(a[TUNE]) <= max(a[ADAPT]) and spread
    return _partial(ok, note), f"private, mean over L in {Ls}: {_fmt(a)}; std: {_fmt(s)}{note}"


def check_claim11(tables):
    miss = _need(tables, "privlabels/fig4")
    if miss:
        return None, miss
    a = _acc(tables["privlabels/fig4"])
    a = a[(a["setting"] == "private") & a["method"].isin(ADAPT + TUNE)]
    d = "; ".join(f"{r.method} {r.mean:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]" for r in a.itertuples())
    low = at_chance(a)
    if low:  # models at chance all "perform similarly": that says nothing about the claim
        return NOT_TESTABLE, f"private, L=3: {_chance_text1(low)}: {d}" + _iv(a)
    return _overlap(a), f"private, L=3: {d}" + _iv(a)


def check_claim12(tables):
    miss = _need(tables, FIG3)
    if miss:
        return None, miss
    (Lu, nu), (Lr, nr) = _testable(tables[FIG3], "public", TUNE), _testable(tables[FIG3], "private", TUNE)
    if not Lu or not Lr:
        return NOT_TESTABLE, f"no L below 10 where both tuning methods learn: public{nu or ' ok'}; private{nr or ' ok'}"
    pu, pr = _avg(tables[FIG3], "public", TUNE), _avg(tables[FIG3], "private", TUNE)
    ok = pu["Tuning-Pairwise"] > pu["Tuning-MSE"] and pr["Tuning-MSE"] > pr["Tuning-Pairwise"]
    return _partial(ok, nu + nr), f"public, mean over L in {Lu}: {_fmt(pu)}{nu}; private, mean over L in {Lr}: {_fmt(pr)}{nr}"


def check_claim13(tables):
    miss = _need(tables, FIG3)
    if miss:
        return None, miss
    base = ["FedAvg", "FedProx", "FedRS"]
    kept, note = _testable(tables[FIG3], "public", STD)
    if not kept:
        return NOT_TESTABLE, f"public: no L below 10 where every compared method learns{note}"
    a = _avg(tables[FIG3], "public", STD)
    acc, Ls = _below10(_acc(tables[FIG3]))
    acc = acc[(acc["setting"] == "public") & acc["method"].isin(base)]
    overl = [int(L) for L, g in acc.groupby("labels_per_client") if _overlap(g)]
    ok = max(a[TUNE]) < min(a[base]) and len(overl) == len(Ls)
    return _partial(ok, note), (f"public, mean over L in {kept}: {_fmt(a)}{note}; FedAvg/FedProx/FedRS seed intervals "
                      f"overlap at L in {overl} of {Ls}" + _iv(acc))


def check_claim14(tables):
    """Claim 14 says tuning GAINS over adapted FedAvg, more at small L: the best tuning method must be
    above FedAvg at the smallest L below 10 and its gain there larger than at the largest L below 10."""
    avail = [i for i in (FIG2, FIG3) if tables.get(i) is not None]
    if not avail:
        return None, "no committed table for privlabels/fig2, privlabels/fig3"
    res, parts = [], []
    for aid in avail:
        chance = _chance_Ls(tables[aid], "private", ["FedAvg"] + TUNE)
        low = {L: ms for L, ms in chance.items() if "FedAvg" in ms or set(TUNE) <= set(ms)}
        Ls = [L for L in _below10(_acc(tables[aid]))[1] if L not in low]
        note = f"; left out {_chance_text(low)}" if low else ""
        name = aid.split("/")[1]
        if len(Ls) < 2:
            res.append(NOT_TESTABLE)
            parts.append(f"{name}: fewer than 2 L values where FedAvg and the tuning methods learn{note}")
            continue
        a, _ = _below10(_acc(tables[aid]))
        a = a[a["setting"] == "private"].pivot_table(index="labels_per_client", columns="method", values="mean")
        learn = pd.DataFrame({m: [m not in chance.get(int(L), []) for L in a.index] for m in TUNE}, index=a.index)
        gain = a[TUNE].where(learn).max(axis=1) - a["FedAvg"]  # the best tuning method that learns
        lo, hi = gain.loc[Ls[0]], gain.loc[Ls[-1]]
        res.append(bool(lo > 0 and lo > hi))
        parts.append(f"{name}: best tuning - FedAvg = {lo:+.3f} at L={Ls[0]}, {hi:+.3f} at L={Ls[-1]}"
                     + ("" if lo > 0 else " (no gain: tuning is below FedAvg at the smallest L)") + note)
    verdict = False if False in res else (NOT_TESTABLE if all(r == NOT_TESTABLE for r in res)
                                          else (PARTIAL if NOT_TESTABLE in res else True))
    return verdict, "; ".join(parts)


def _converge_round(g, frac=0.95):
    g = g.sort_values("round")
    lo, hi = g["mean"].iloc[0], g["mean"].max()
    return int(g[g["mean"] >= lo + frac * (hi - lo)]["round"].iloc[0])


def check_claim15(tables):
    ids = [f"privlabels/fig{i}" for i in (5, 6, 7, 8)]
    avail = [i for i in ids if tables.get(i) is not None]
    if not avail:
        return None, "no committed table for " + ", ".join(ids)
    ok, parts, untestable = True, [], []
    for aid in avail:
        t = _acc(tables[aid])
        R = int(t["round"].max())
        low = at_chance(t[t["round"] == R])
        if low:  # a flat chance-level curve "converges" at round 1: no test of the claim
            untestable.append(aid)
            parts.append(f"{aid.split('/')[1]}: not testable, {_chance_text1(low, f'at the last round {R}')}")
            continue
        conv = {m: _converge_round(g) for m, g in t.groupby("method")}
        width = (t["ci_high"] - t["ci_low"]).groupby(t["method"]).mean()
        similar = all(abs(conv[m] - conv["FedAvg"]) <= max(2, 0.2 * R) for m in TUNE if m in conv)
        wider = all(width[m] > width["FedAvg"] for m in TUNE if m in width)
        ok &= similar and wider
        parts.append(f"{aid.split('/')[1]}: rounds to 95% of gain {conv}, mean seed-interval width "
                     + ", ".join(f"{m} {v:.3f}" for m, v in width.items()))
    detail = "; ".join(parts) + " (similar = within max(2, 20% of rounds))" + _iv(_acc(tables[avail[0]]))
    if len(untestable) == len(avail):
        return NOT_TESTABLE, detail
    return (PARTIAL if ok and untestable else bool(ok)), detail


def check_claim16(tables):
    miss = _need(tables, "privlabels/fig11")
    if miss:
        return None, miss
    a = _acc(tables["privlabels/fig11"])
    bad, parts, low = [], [], []
    for (s, E), g in a.groupby(["setting", "local_epochs"]):
        low += [f"{s} {m} E={E}" for m in at_chance(g)]
    for (s, m), g in a.groupby(["setting", "method"]):
        rng = g["mean"].max() - g["mean"].min()
        parts.append(f"{s} {m} range {rng:.3f}")
        if not _overlap(g):
            bad.append(f"{s} {m}")
    detail = ("seed intervals over E overlap for every method" if not bad else "seed intervals over E disjoint for "
              + ", ".join(bad)) + "; " + "; ".join(parts) + _iv(a)
    if low:  # chance-level models do not change with E either: "no change" is then no evidence
        return (False if bad else NOT_TESTABLE), f"{_chance_text1(low)}; {detail}"
    return not bad, detail


def check_claim17(tables):
    ids = ["privlabels/fig12", "privlabels/fig13"]
    avail = [i for i in ids if tables.get(i) is not None]
    if not avail:
        return None, "no committed table for " + ", ".join(ids)
    ok, parts, untestable = True, [], 0
    for aid in avail:
        a = _acc(tables[aid])
        a = a[(a["setting"] == "private") & a["method"].isin(TUNE)]
        low = sorted({f"{m} L={L}" for L, g in a.groupby("labels_per_client") for m in at_chance(g)})
        m = a.groupby("method")["mean"].mean()
        text = f"{aid.split('/')[1]} private mean over L: MSE {m['Tuning-MSE']:.3f}, Pairwise {m['Tuning-Pairwise']:.3f}"
        if low:
            untestable += 1
            parts.append(f"{text} (not testable: {_chance_text1(low)})")
            continue
        ok &= m["Tuning-MSE"] > m["Tuning-Pairwise"]
        parts.append(text)
    if untestable == len(avail):
        return NOT_TESTABLE, "; ".join(parts)
    return (PARTIAL if ok and untestable else bool(ok)), "; ".join(parts)


@on_code
def check_claim18(tables):
    miss = _need(tables, "privlabels/appB")
    if miss:
        return None, miss
    t = tables["privlabels/appB"]
    v = lambda loss, metric: t[(t["loss"] == loss) & (t["metric"] == metric)].set_index("p9")["value"]  # noqa: E731
    ident = float((v("pairwise_all", "label9_terms") - v("pairwise_all", "label9_terms_appB_formula")).abs().max())
    gpa = v("pairwise_all", "dloss_dp9_others_fixed")
    pos = bool((gpa[gpa.index > 0] > 0).all())
    mse0 = float(v("mse", "dloss_dp9_others_fixed").abs().max())
    ok = ident < 1e-9 and pos and mse0 < 1e-12
    return ok, (f"all-pairs label-9 terms vs (h_k(y_j) p9)^2: max |diff| {ident:.1e}; all-pairs dL/dp9 > 0 for "
                f"every p9 > 0: {pos}; MSE max |dL/dp9| (others fixed) {mse0:.1e}; through the softmax "
                f"eq. (5) dL/dz9 ranges {v('pairwise', 'dloss_dz9_softmax').min():+.1e}.."
                f"{v('pairwise', 'dloss_dz9_softmax').max():+.1e}")


@on_code
def check_claim19(tables):
    aid = FIG2 if tables.get(FIG2) is not None else FIG3
    if tables.get(aid) is None:
        return None, "no committed table for privlabels/fig2, privlabels/fig3"
    t = tables[aid]
    t = t[t["metric"] == "labels_held_by_no_client"].sort_values("labels_per_client")
    if t.empty:
        return None, "no missing-label counts in the table"
    exp = {int(L): 10 * (1 - L / 10) ** 10 for L in t["labels_per_client"]}
    m = t.set_index("labels_per_client")["mean"]
    ok = m.iloc[0] > m.iloc[-1] and bool((np.diff(m.to_numpy()) <= 1e-12).all()) and m.iloc[0] > 0
    return bool(ok), ("mean labels held by no client over seeds (expected 10(1-L/10)^10): "
                      + ", ".join(f"L={L}: {v:.2f} ({exp[int(L)]:.2f})" for L, v in m.items())
                      + f"; n_seeds {int(t['n_seeds'].iloc[0])}; same label sets in fig2 and fig3 (same seeds)")


def check_claim20(tables):
    miss = _need(tables, FIG3)
    if miss:
        return None, miss
    a = _acc(tables[FIG3])
    a = a[a["setting"] == "private"]
    bad, n, low = [], 0, []
    for L, g in a.groupby("labels_per_client"):
        best = g.loc[g["mean"].idxmax()]
        fa = g[g["method"] == "FedAvg"].iloc[0]
        if "FedAvg" in at_chance(g):  # a chance-level FedAvg is no "strong baseline" test
            low.append(int(L))
            continue
        n += 1
        if fa["ci_high"] < best["ci_low"]:
            bad.append(f"L={L}: FedAvg {fa['mean']:.3f} [{fa['ci_low']:.3f}, {fa['ci_high']:.3f}] vs best "
                       f"{best['method']} {best['mean']:.3f} [{best['ci_low']:.3f}, {best['ci_high']:.3f}]")
    note = f"; not testable at L in {low}: {_chance_text1(['FedAvg'])}" if low else ""
    detail = (f"FedAvg's seed interval reaches the best method's at {n} of {n + len(low)} L" if not bad
              else "; ".join(bad)) + note + _iv(a)
    if bad:
        return False, detail
    return (NOT_TESTABLE if n == 0 else (PARTIAL if low else True)), detail


CHECKS = {f"claim-{i}": globals()[f"check_claim{i}"] for i in range(1, 21)}

CLAIMS = [Claim(f"privlabels/{cid}", text, artifacts=[f"privlabels/{a}" for a in arts], check=CHECKS.get(cid),
                why_fails=WHY_FAILS.get(int(cid.split("-")[1]), "")) for cid, arts, text in _TEXT]
