"""The 20 claims of targets/privlabels.md section 3, checked on our committed numbers.

Only the claims' logic is here; rows by key, the at-chance rule, the noise rule, missing data and
the causes of a non-pass verdict are the toolkit's (fedpaper/claims). Accuracies are
fractions in the tables, shown and compared in percent (Cell.scaled); chance is 10 % (balanced
10-class test sets). Comparisons "at every L" are made per L below 10 (at L=10 every client holds
every label), an L where a compared model sits at chance being not testable; in a claim that names
a winner only the winners must learn, a loser at chance staying in the comparison (CONTEST_RULE:
`duel`). Tolerances that turn
the paper's words into numbers are stated in each claim's text.
"""
from __future__ import annotations

import numpy as np

from fedpaper.claims import at_chance as models_at_chance
from fedpaper.claims import (
    NOT_TESTABLE,
    Cell,
    ClaimSet,
    Missing,
    Verdict,
    all_of,
    beats,
    best,
    cell_of,
    cells,
    chance_cause,
    chance_level,
    contest,
    exceeds,
    guarded,
    learning,
    near,
    negate,
    not_below,
    select,
    values,
)

CHANCE = chance_level(num_classes=10)
TUNE = ["Tuning-MSE", "Tuning-Pairwise"]
ADAPT = ["FedAvg", "FedProx"]
PUBLIC = ["FedAvg", "FedProx", "FedRS"] + TUNE
CLAIMS = ClaimSet("privlabels")
claim = CLAIMS.claim


def acc(t, **key) -> dict:
    """{method: Cell in percent} of the accuracy rows matching `key`, by method name."""
    r = select(t, metric="accuracy", **key)
    if not len(r):
        raise Missing("no accuracy row " + ", ".join(f"{k}={v}" for k, v in key.items()))
    return {row["method"]: cell_of(row).scaled(100) for _, row in sorted(r.iterrows(), key=lambda p: p[1]["method"])}


def Ls(t) -> list:
    """The labels-per-client values below 10 (where private and public settings differ)."""
    return [L for L in values(select(t, metric="accuracy"), "labels_per_client") if L < 10]


def compare(runs: dict, subjects, others, test, where: str) -> Verdict:
    kept, untestable, note = learning(runs, CHANCE, subjects, others, where)
    return untestable or test(kept).note(note)


def duel(runs: dict, winners, losers, test, where: str) -> Verdict:
    """test(kept cells) for a claim that `winners` beat `losers`: NOT_TESTABLE when a claimed winner
    sits at chance; losers at chance stay in the comparison (CONTEST_RULE)."""
    kept, untestable, note = contest(runs, CHANCE, winners, losers, where)
    return untestable or test(kept).note(note)


def per_L_duel(t, setting, winners, losers, test, what) -> Verdict:
    """duel at every L below 10 of `setting`."""
    return all_of([(f"L={L:g}", duel(acc(t, setting=setting, labels_per_client=L), winners, losers, test,
                                     f"at {setting} L={L:g}")) for L in Ls(t)], what)


def per_L(t, setting, subjects, others, test, what) -> Verdict:
    """test(learning cells) at every L below 10 of `setting`."""
    return all_of([(f"L={L:g}", compare(acc(t, setting=setting, labels_per_client=L), subjects, others, test,
                                        f"at {setting} L={L:g}")) for L in Ls(t)], what)


def above_all(m: dict, winners, losers) -> Verdict:
    return all_of([(f"{w} > {x}", beats(m[w], m[x], (w, x))) for w in winners for x in losers if x in m], "")


def spread(m: dict) -> Verdict:
    """The tuning methods' mean across-seed std exceeds the adapted methods' (the spread itself, no
    noise rule)."""
    tu, ad = np.mean([m[k].std for k in TUNE]), np.mean([m[k].std for k in ADAPT])
    return Verdict.of(tu > ad, f"mean seed std: tuning {tu:.2f}, FedAvg/FedProx {ad:.2f} points")


@claim(1, ["fig2", "fig3"], "On CIFAR-10 and Fashion-MNIST, in both settings and for every method, mean test accuracy falls as "
       "L decreases (here: each method/setting curve is higher at the largest L than at the smallest, by the noise rule).")
def c1(t):
    def curves(tab, name):
        parts, single = [], set()
        for setting in ("private", "public"):
            for m in values(select(tab, setting=setting, metric="accuracy"), "method"):
                c = {L: v.scaled(100) for L, v in cells(tab, "labels_per_client", method=m, setting=setting,
                                                        metric="accuracy").items()}
                if len(c) < 2:  # a variant run at one L only has no curve
                    single.add(m)
                    continue
                lo, hi = min(c), max(c)
                top = acc(tab, setting=setting, labels_per_client=hi)
                parts.append((f"{setting} {m}", compare(top, [m], [], lambda _: beats(
                    c[hi], c[lo], (f"L={hi:g}", f"L={lo:g}")), f"at {setting} L={hi:g}")))
        once = f" (not a curve, run at one L only: {', '.join(sorted(single))})" if single else ""
        return all_of(parts, name).note(once)
    return t.each(["fig2", "fig3"], curves, "curves")


@claim(2, ["fig2"], "CIFAR-10, public: FedRS has the highest mean accuracy of the public methods (here: at every L below 10).")
def c2(t):
    return per_L_duel(t["fig2"], "public", ["FedRS"], [m for m in PUBLIC if m != "FedRS"], lambda m: best(m, "FedRS"),
                      "public")


@claim(3, ["fig2"], "CIFAR-10, public: Tuning-Pairwise has higher mean accuracy than FedAvg and FedProx (here: at every L below 10).")
def c3(t):
    return per_L_duel(t["fig2"], "public", ["Tuning-Pairwise"], ADAPT,
                      lambda m: above_all(m, ["Tuning-Pairwise"], ADAPT), "public")


@claim(4, ["fig2"], "CIFAR-10, public: Tuning-MSE is below Tuning-Pairwise and does not beat FedAvg (here: at every L below 10).")
def c4(t):
    return per_L_duel(t["fig2"], "public", ["Tuning-Pairwise", "FedAvg"], ["Tuning-MSE"], lambda m: all_of([
        ("below Tuning-Pairwise", beats(m["Tuning-Pairwise"], m["Tuning-MSE"], ("Tuning-Pairwise", "Tuning-MSE"))),
        ("not above FedAvg", negate(beats(m["Tuning-MSE"], m["FedAvg"], ("Tuning-MSE", "FedAvg"))))], ""), "public")


@claim(5, ["fig2"], "CIFAR-10, private: both tuning methods beat adapted FedAvg and FedProx, and Tuning-MSE has the highest "
       "mean accuracy of the private methods (here: at every L below 10).")
def c5(t):
    return per_L_duel(t["fig2"], "private", TUNE, ADAPT, lambda m: all_of([
        ("tuning > adapted", above_all(m, TUNE, ADAPT)), ("Tuning-MSE best", best(m, "Tuning-MSE"))], ""), "private")


@claim(6, ["fig2"], "CIFAR-10, private: Tuning-MSE is slightly above Tuning-Pairwise (here: beats it at every L below 10).")
def c6(t):
    return per_L_duel(t["fig2"], "private", ["Tuning-MSE"], ["Tuning-Pairwise"],
                      lambda m: beats(m["Tuning-MSE"], m["Tuning-Pairwise"], TUNE), "private")


@claim(7, ["fig2"], "CIFAR-10, private: the tuning methods' across-seed spread is larger than that of adapted FedAvg/FedProx "
       "(here: mean seed std, at every L below 10).")
def c7(t):
    return per_L(t["fig2"], "private", TUNE + ADAPT, [], spread, "private")


@claim(8, ["fig1b"], "CIFAR-10, L=5, private: Tuning-MSE and Tuning-Pairwise are the two best methods (here: each beats "
       "adapted FedAvg and FedProx).")
def c8(t):
    return duel(acc(t["fig1b"], setting="private"), TUNE, ADAPT, lambda m: above_all(m, TUNE, ADAPT), "at private L=5")


@claim(9, ["fig2", "fig3"], "FedAvg and FedProx: private (adapted) accuracy is close to public accuracy on both data sets at "
       "every L (here: within 3 points by the noise rule; the paper: within the 95% CIs).")
def c9(t):
    def close(tab, name):
        parts = []
        for m in ADAPT:
            for L in Ls(tab):
                pr, pu = acc(tab, setting="private", labels_per_client=L), acc(tab, setting="public", labels_per_client=L)
                low = [s for s, r in (("private", pr), ("public", pu)) if m in models_at_chance(r, CHANCE)]
                if len(low) == 2:  # two chance-level models are trivially close
                    cause = chance_cause([m], pr, CHANCE, f"private and public at L={L:g}")
                    parts.append((f"{m} L={L:g}", Verdict(NOT_TESTABLE, cause.evidence, (cause,))))
                    continue
                parts.append((f"{m} L={L:g}", near(pr[m], pu[m], 3.0, f"{m} private - public")))
        return all_of(parts, name)
    return t.each(["fig2", "fig3"], close, "private ~ public")


@claim(10, ["fig3"], "Fashion-MNIST, private: neither tuning method has a higher mean accuracy than adapted FedAvg/FedProx, "
       "and the tuning methods have large across-seed variance (here: no tuning method beats either, and the tuning "
       "methods' mean seed std is larger, at every L below 10).")
def c10(t):
    return per_L(t["fig3"], "private", TUNE + ADAPT, [], lambda m: all_of(
        [(f"{a} not below {k}", not_below(m[a], m[k], (a, k))) for k in TUNE for a in ADAPT]
        + [("spread", spread(m))], ""), "private")


@claim(11, ["fig4"], "Fashion-MNIST, L=3, private: all four private methods perform similarly (here: each within 3 points of "
       "FedAvg by the noise rule).")
def c11(t):
    return compare(acc(t["fig4"], setting="private"), TUNE + ADAPT, [], lambda m: all_of(
        [(k, near(m[k], m["FedAvg"], 3.0, f"{k} - FedAvg")) for k in ["FedProx"] + TUNE], ""), "at private L=3")


@claim(12, ["fig3"], "Fashion-MNIST: Tuning-Pairwise > Tuning-MSE in the public setting and Tuning-MSE > Tuning-Pairwise in "
       "the private setting (here: at every L below 10).")
def c12(t):
    return all_of([
        ("public", per_L_duel(t["fig3"], "public", ["Tuning-Pairwise"], ["Tuning-MSE"],
                              lambda m: beats(m["Tuning-Pairwise"], m["Tuning-MSE"], TUNE[::-1]), "")),
        ("private", per_L_duel(t["fig3"], "private", ["Tuning-MSE"], ["Tuning-Pairwise"],
                               lambda m: beats(m["Tuning-MSE"], m["Tuning-Pairwise"], TUNE), ""))],
        "Fashion-MNIST")


@claim(13, ["fig3"], "Fashion-MNIST, public: both tuning methods are below FedAvg, FedProx and FedRS, and these three are "
       "about equal (here: at every L below 10; about equal: FedProx and FedRS within 3 points of FedAvg).")
def c13(t):
    base = ["FedAvg", "FedProx", "FedRS"]
    return per_L_duel(t["fig3"], "public", base, TUNE, lambda m: all_of(
        [("below", above_all(m, base, TUNE))]
        + [(f"{b} ~ FedAvg", near(m[b], m["FedAvg"], 3.0, f"{b} - FedAvg")) for b in ("FedProx", "FedRS")], ""), "public")


def gain(m: dict, tuning: str) -> Cell:
    """Per seed: the tuning method's accuracy minus adapted FedAvg's (a Cell of differences)."""
    a, b = m[tuning], m["FedAvg"]
    d = tuple(x - y for x, y in zip(a.seeds, b.seeds)) if len(a.seeds) == len(b.seeds) else ()
    return Cell(a.mean - b.mean, float(np.std(d, ddof=1)) if len(d) > 1 else float("nan"), len(d), d)


@claim(14, ["fig2", "fig3"], "Central tuning gains over adapted FedAvg in the private setting, and the gain is larger at small L "
       "than at large L (here: the better tuning method beats FedAvg at the smallest L below 10 where the models learn, "
       "and its gain there beats its gain at the largest such L).")
def c14(t):
    def gains(tab, name):
        runs = {L: acc(tab, setting="private", labels_per_client=L) for L in Ls(tab)}
        ok = [L for L, r in runs.items() if learning(r, CHANCE, ["FedAvg"], TUNE)[1] is None]
        if len(ok) < 2:
            bad = [L for L in runs if L not in ok]
            return Verdict(NOT_TESTABLE, f"{name}: fewer than two L where FedAvg and a tuning method learn",
                           [learning(runs[L], CHANCE, ["FedAvg"], TUNE)[1].causes[0] for L in bad])
        lo, hi = ok[0], ok[-1]
        learn = [k for k in TUNE if k not in models_at_chance(runs[lo], CHANCE)]
        k = max(learn, key=lambda x: runs[lo][x].mean)
        return all_of([(f"{k} > FedAvg at L={lo:g}", beats(runs[lo][k], runs[lo]["FedAvg"], (k, "FedAvg"))),
                       (f"gain L={lo:g} > L={hi:g}", beats(gain(runs[lo], k), gain(runs[hi], k),
                                                            (f"gain@L={lo:g}", f"gain@L={hi:g}")))], "")
    return t.each(["fig2", "fig3"], gains, "private")


def converge_round(c: dict, frac: float = 0.95) -> float:
    """The first round (in round order) whose mean reaches frac of the curve's gain over round one."""
    rounds = list(c)
    lo, hi = c[rounds[0]].mean, max(v.mean for v in c.values())
    return next(r for r in rounds if c[r].mean >= lo + frac * (hi - lo))


@claim(15, ["fig5", "fig6", "fig7", "fig8"], "Over rounds, FedAvg and the tuning methods converge at similar rounds (here: "
       "rounds to 95% of the gain within max(2, 20% of the rounds) of FedAvg's), and the tuning methods' curves have larger "
       "across-seed variance (mean seed std over rounds).")
def c15(t):
    def curves(tab, name):
        methods = values(select(tab, metric="accuracy"), "method")
        R = max(values(tab, "round"))
        last = acc(tab, **{"round": R})
        low = models_at_chance(last, CHANCE)
        if low:  # a flat chance-level curve "converges" at round one: no test of the claim
            cause = chance_cause(low, last, CHANCE, f"at the last round {R:g}")
            return Verdict(NOT_TESTABLE, cause.evidence, (cause,))
        curve = {m: {r: c.scaled(100) for r, c in cells(tab, "round", method=m, metric="accuracy").items()}
                 for m in methods}
        conv = {m: converge_round(c) for m, c in curve.items()}
        sd = {m: float(np.mean([c.std for c in curve[m].values()])) for m in methods}
        tol = max(2.0, 0.2 * R)
        text = ("rounds to 95% of the gain " + ", ".join(f"{m} {conv[m]:g}" for m in methods) + "; mean seed std "
                + ", ".join(f"{m} {sd[m]:.2f}" for m in methods))
        ok = all(abs(conv[k] - conv["FedAvg"]) <= tol and sd[k] > sd["FedAvg"] for k in TUNE if k in conv)
        return Verdict.of(ok, text)
    return t.each(["fig5", "fig6", "fig7", "fig8"], curves, "curves")


@claim(16, ["fig11"], "CIFAR-10: changing the local epochs per round (E=1, 3, 5) does not meaningfully change the test accuracy "
       "of FedAvg or the tuning methods (here: each E within 3 points of E=1, by the noise rule).")
def c16(t):
    tab = t["fig11"]
    parts = []
    for s in ("private", "public"):
        Es = values(select(tab, setting=s), "local_epochs")
        runs = {E: acc(tab, setting=s, local_epochs=E) for E in Es}
        for m in values(select(tab, setting=s, metric="accuracy"), "method"):
            for E in Es[1:]:
                low = [e for e in (Es[0], E) if m in models_at_chance(runs[e], CHANCE)]
                if low:  # chance-level models do not change with E either: no evidence
                    cause = chance_cause([m], runs[low[0]], CHANCE, f"at {s} E={low[0]:g}")
                    parts.append((f"{s} {m} E={E:g}", Verdict(NOT_TESTABLE, cause.evidence, (cause,))))
                    continue
                parts.append((f"{s} {m} E={E:g}", near(runs[E][m], runs[Es[0]][m], 3.0, f"E={E:g} - E={Es[0]:g}")))
    return all_of(parts, "E does not matter")


@claim(17, ["fig12", "fig13"], "With E=3 and E=5 (SGD central tuning), Tuning-MSE beats Tuning-Pairwise in the private setting "
       "(here: at every L run).")
def c17(t):
    def at(tab, name):
        return all_of([(f"L={L:g}", duel(acc(tab, setting="private", labels_per_client=L), ["Tuning-MSE"], ["Tuning-Pairwise"],
                                         lambda m: beats(m["Tuning-MSE"], m["Tuning-Pairwise"], TUNE), f"at L={L:g}"))
                       for L in values(select(tab, setting="private", metric="accuracy"), "labels_per_client")], "")
    return t.each(["fig12", "fig13"], at, "private")


@claim(18, ["appB"], "With label 9 held by no client, the label-9 terms of the all-pairs pairwise loss equal sum (h_k(y_j) p_9)^2 "
       "and their gradient pushes p_9 to 0; the MSE loss (eq. 6) has no term for label 9.", on_code=True)
def c18(t):
    tab = t["appB"]

    def v(loss, metric):
        return select(tab, loss=loss, metric=metric).set_index("p9")["value"].sort_index()
    ident = float((v("pairwise_all", "label9_terms") - v("pairwise_all", "label9_terms_appB_formula")).abs().max())
    g = v("pairwise_all", "dloss_dp9_others_fixed")
    pos = bool((g[g.index > 0] > 0).all())
    mse0 = float(v("mse", "dloss_dp9_others_fixed").abs().max())
    z = v("pairwise", "dloss_dz9_softmax")
    return Verdict.of(ident < 1e-9 and pos and mse0 < 1e-12,
                      f"all-pairs label-9 terms vs (h_k(y_j) p9)^2: max |diff| {ident:.1e}; all-pairs dL/dp9 > 0 for every "
                      f"p9 > 0: {pos}; MSE max |dL/dp9| (others fixed) {mse0:.1e}; through the softmax eq. (5) dL/dz9 "
                      f"ranges {z.min():+.1e}..{z.max():+.1e}")


@claim(19, ["fig2", "fig3"], "A label missing from every client is far more likely with fewer labels per client (expected missing "
       "labels 10 (1 - L/10)^10: 1.07 at L=2, 0.28 at L=3, 0.06 at L=4, 0.01 at L=5).", on_code=True)
def c19(t):
    tab = t["fig2"] if "fig2" in t else t["fig3"]
    m = {L: c.mean for L, c in cells(tab, "labels_per_client", metric="labels_held_by_no_client").items()}
    vals = list(m.values())
    ok = vals[0] > vals[-1] and all(a >= b - 1e-12 for a, b in zip(vals, vals[1:])) and vals[0] > 0
    return Verdict.of(ok, "mean labels held by no client over seeds (expected 10(1-L/10)^10): "
                      + ", ".join(f"L={L:g}: {v:.2f} ({10 * (1 - L / 10) ** 10:.2f})" for L, v in m.items()))


@claim(20, ["fig3"], "Adapted FedAvg is a strong baseline: in the private setting it reaches the best method on Fashion-MNIST "
       "at every L (here: no method is above it by more than 3 points, by the noise rule).")
def c20(t):
    def test(m):
        top = max((k for k in m if k != "FedAvg"), key=lambda k: m[k].mean)
        return negate(exceeds(m[top], m["FedAvg"], 3.0, f"{top} - FedAvg"))
    tab = t["fig3"]
    parts = []
    for L in values(select(tab, setting="private", metric="accuracy"), "labels_per_client"):
        runs = acc(tab, setting="private", labels_per_client=L)
        parts.append((f"L={L:g}", duel(runs, ["FedAvg"], [k for k in runs if k != "FedAvg"], test, f"at private L={L:g}")))
    return all_of(parts, "private")

