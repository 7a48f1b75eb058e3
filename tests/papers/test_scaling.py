"""The compute ladder's trend rule (claims/scaling.py) and the causes that read a ladder csv."""
import math

import pandas as pd
import pytest

from fedpaper.outputs.registry import Claim
from fedpaper import claims as K
from fedpaper.claims import causes as KC
from fedpaper.claims import noise as KN
from fedpaper.claims import scaling as S

COMPUTE = [1.0, 4.0, 16.0, 64.0]


def _ladder(per_decade, noise=(0.0, 0.3, -0.3), start=10.0):
    """Per rung, three seeds: start + per_decade * log10(c) + a per-seed offset that changes by rung."""
    out = []
    for i, c in enumerate(COMPUTE):
        base = start + per_decade * math.log10(c)
        out.append([base + n * (1 if (i + j) % 2 else -1) for j, n in enumerate(noise)])
    return out


def test_a_rising_margin_narrows_and_is_projected():
    f = S.fit(COMPUTE, _ladder(5.0))
    assert f.method == "paired by seed" and f.df == 2 and f.slope == pytest.approx(5.0, abs=0.5)
    assert S.classify(f, +1) == S.NARROWING
    proj = S.projection(f, S.NARROWING, 1000.0)
    assert proj == pytest.approx(f.intercept + 3 * f.slope)


def test_a_falling_margin_widens_and_a_falling_gap_narrows():
    f = S.fit(COMPUTE, _ladder(-5.0))
    assert S.classify(f, +1) == S.WIDENING
    assert S.classify(f, -1) == S.NARROWING


def test_noise_without_a_slope_is_flat_and_not_projected():
    f = S.fit(COMPUTE, _ladder(0.2, noise=(0.0, 3.0, -3.0)))
    assert S.classify(f, +1) == S.FLAT
    assert S.projection(f, S.FLAT, 1000.0) is None


def test_two_rungs_are_too_few_to_classify_or_project():
    f = S.fit(COMPUTE[:2], _ladder(5.0)[:2])
    assert S.classify(f, +1) == S.TOO_FEW and S.projection(f, S.TOO_FEW, 1000.0) is None


def test_a_fit_without_a_noise_estimate_says_so_instead_of_nan():
    """Two of three rungs with a value: OLS on two seed means has no SE; no label may read "nan"."""
    rungs = [{"name": f"r{i}", "compute": c} for i, c in enumerate(COMPUTE[:3])]
    vals = {"r1": {0: -6.2, 1: -6.6, 2: -5.0}, "r2": {0: -10.1, 1: -7.0, 2: -2.2}}
    (fit,) = [r for r in S.ladder_rows([{"quantity": "q", "claim": "", "direction": 1, "values": vals}], rungs, None)
              if r["row"] == "fit"]
    assert fit["trend"] == S.TOO_FEW and math.isnan(fit["slope_se"])
    assert "nan" not in fit["label"] and "no noise estimate" in fit["label"]
    assert S.slope_text(1.234, 0.56) == "+1.23 +- 0.56"
    assert S.slope_text(-0.83, float("nan"), unit="/decade", decimals=2, pm="±") == "-0.83/decade (no noise estimate)"


def test_one_seed_falls_back_to_ols_on_the_means():
    f = S.fit(COMPUTE, [[10.0], [13.1], [15.9], [19.0]])
    assert f.method == "OLS on seed means" and f.df == 2 and f.rungs == 4
    assert S.classify(f, +1) == S.NARROWING


def test_the_rule_uses_the_noise_modules_t_quantile(monkeypatch):
    """One t quantile: with noise.t_quantile made huge, no trend is clear any more."""
    f = S.fit(COMPUTE, _ladder(5.0))
    assert S.classify(f, +1) == S.NARROWING
    assert f.k == pytest.approx(KN.t_quantile(2))
    monkeypatch.setattr(S, "t_quantile", lambda df: 1e6)
    assert S.classify(f, +1) == S.FLAT
    assert not hasattr(S, "t") and "ppf" not in open(S.__file__).read()


def _csv(per_decade, claim="fedpals/claim-4"):
    rungs = [{"name": f"r{i}", "compute": c} for i, c in enumerate(COMPUTE)]
    vals = {f"r{i}": dict(enumerate(v)) for i, v in enumerate(_ladder(per_decade, start=-8.0))}
    rows = S.ladder_rows([{"quantity": "claim 4: FedPALS - FedAvg - 10", "claim": claim, "direction": 1,
                           "values": vals}], rungs, paper_compute=75.0)
    return pd.DataFrame(rows, columns=S.COLUMNS)


def test_ladder_rows_write_one_row_per_rung_and_seed_then_the_fit():
    t = _csv(5.0)
    assert (t["row"] == "seed").sum() == len(COMPUTE) * 3 and (t["row"] == "fit").sum() == 1
    fit = t[t["row"] == "fit"].iloc[0]
    assert fit["trend"] == S.NARROWING and "projection" in fit["label"]
    (tr,) = S.read_trends(t)
    assert tr.rungs == len(COMPUTE) and tr.slope == pytest.approx(fit["slope"])


def _claim():
    return Claim("fedpals/claim-4", "FedPALS beats FedAvg by 10 points", artifacts=("fedpals/table1",))


def test_a_failing_claim_with_a_narrowing_ladder_is_compute_limited():
    t = _csv(5.0)
    ladder = KC.ladder_trends([t])
    rec = {"fedpals/table1": {"profile": "long", "notes": []}}
    causes = KC.diagnose(_claim(), K.Verdict(K.FAIL, "no"), rec, {}, {}, ladder)
    assert [c.kind for c in causes] == [K.COMPUTE_LIMITED]
    fit = t[t["row"] == "fit"].iloc[0]
    assert f"{fit['slope']:+.3g}" in causes[0].evidence and f"{fit['slope_se']:.2g}" in causes[0].evidence
    assert f"{fit['projection']:.3g}" in causes[0].evidence
    # without the ladder the same claim is "untested at this scale"
    (c,) = KC.diagnose(_claim(), K.Verdict(K.FAIL, "no"), rec, {}, {})
    assert c.kind == K.UNTESTED_AT_SCALE


def test_a_flat_or_widening_ladder_is_not_compute_limited():
    for per_decade in (-5.0,):
        ladder = KC.ladder_trends([_csv(per_decade)])
        causes = KC.diagnose(_claim(), K.Verdict(K.WITHIN_NOISE, "no"), {"fedpals/table1": {"profile": "long"}},
                             {}, {}, ladder)
        assert [c.kind for c in causes] == [K.NOT_COMPUTE_LIMITED] and S.WIDENING in causes[0].evidence


def test_a_ladder_of_another_claim_changes_nothing():
    ladder = KC.ladder_trends([_csv(5.0, claim="fedpals/claim-1")])
    (c,) = KC.diagnose(_claim(), K.Verdict(K.FAIL, "no"), {"fedpals/table1": {"profile": "long", "notes": []}},
                       {}, {}, ladder)
    assert c.kind == K.UNTESTED_AT_SCALE


def test_the_report_reads_a_committed_ladder(figures_tmp):
    from fedpaper import report as R

    assert R.ladder_section() == [] and R.committed_ladder() == {}
    d = figures_tmp / "long" / "fedpals"
    d.mkdir(parents=True)
    t = _csv(5.0)
    t.to_csv(d / "scaling.csv", index=False)
    (d / "scaling.json").write_text('{"profile": "long", "notes": ["rungs on the long profile"]}')
    (tr,) = R.committed_ladder()["fedpals/claim-4"]
    assert tr.trend == S.NARROWING
    text = "\n".join(R.ladder_section())
    assert "Compute ladder `fedpals/scaling` (long profile)" in text and "(projection)" in text
    fit = t[t["row"] == "fit"].iloc[0]
    assert f"{fit['slope']:+.2f} ± {fit['slope_se']:.2f}" in text
    # an exploration is never read
    (d / "scaling.json").write_text('{"profile": "long", "exploration": {"changes": {"rounds": 1}}}')
    assert R.ladder_section() == [] and R.committed_ladder() == {}


def test_a_projection_stops_at_the_end_of_the_quantitys_range():
    """A mean |ours - paper| falling 14.6 points per decade (the FedPALS quick ladder's Table 1 gap)
    cannot be projected below 0 at 10x (one decade above the top rung; the ladder spans 1.2): the
    projection is 0 and the label says where the line gets there."""
    compute = [0.0625, 0.25, 1.0]
    per_seed = [[36.5, 34.9, 23.2], [19.9, 21.2, 19.2], [14.8, 13.0, 14.1]]
    f = S.fit(compute, per_seed)
    assert S.classify(f, -1) == S.NARROWING and f.at(10.0) < 0
    assert S.projection(f, S.NARROWING, 10.0, (0.0, math.inf)) == 0.0
    assert S.projection(f, S.NARROWING, 10.0) == pytest.approx(f.at(10.0))  # unbounded: the line itself
    c = S.crossing(f, (0.0, math.inf))
    assert 1.0 < c < 10.0 and f.at(c) == pytest.approx(0.0, abs=1e-9)
    q = {"quantity": "gap", "claim": "", "direction": -1, "bounds": (0.0, math.inf),
         "values": {r: dict(enumerate(v)) for r, v in zip(["r1", "r2", "r3"], per_seed)}}
    fit_row = S.ladder_rows([q], [{"name": r, "compute": c_} for r, c_ in zip(["r1", "r2", "r3"], compute)], 10.0)[-1]
    assert fit_row["projection"] == 0.0 and "end of its range" in fit_row["label"], fit_row["label"]
    # a Kendall tau rising past 1 stops at 1
    g = S.fit(compute, [[0.1, 0.2, 0.1], [0.5, 0.6, 0.5], [0.9, 1.0, 0.9]])
    assert S.projection(g, S.classify(g, +1), 10.0, (-1.0, 1.0)) == 1.0


def test_no_projection_further_above_the_ladder_than_it_spans():
    """The FedPALS quick ladder spans 1.2 decades (0.0625x-1x) and the paper's compute is 75x, 1.9
    decades above its top rung: a clear trend is classified but not projected, the label and the
    trend read back from the csv say why, and a csv written before the rule is read by it."""
    import pandas as pd

    compute = [0.0625, 0.25, 1.0]
    per_seed = [[36.5, 34.9, 23.2], [19.9, 21.2, 19.2], [14.8, 13.0, 14.1]]
    f = S.fit(compute, per_seed)
    assert (f.lo, f.hi) == pytest.approx((0.0625, 1.0))
    assert S.within_reach(0.0625, 1.0, 16.0)[0] and not S.within_reach(0.0625, 1.0, 16.1)[0]  # span 1.204 decades
    ok, why = S.within_reach(0.0625, 1.0, 75.0)
    assert not ok and why == "the paper's compute is 1.9 decades above the top rung, beyond the ladder's own span of 1.2"
    assert S.projection(f, S.NARROWING, 75.0, (0.0, math.inf)) is None
    q = {"quantity": "gap", "claim": "1", "direction": -1, "bounds": (0.0, math.inf),
         "values": {r: dict(enumerate(v)) for r, v in zip(["r1", "r2", "r3"], per_seed)}}
    rows = S.ladder_rows([q], [{"name": r, "compute": c_} for r, c_ in zip(["r1", "r2", "r3"], compute)], 75.0)
    assert rows[-1]["projection"] is None and rows[-1]["label"].endswith("no projection: " + why)
    [t] = S.read_trends(pd.DataFrame(rows))
    assert t.trend == S.NARROWING and t.projection is None and t.not_projected == why
    assert t.text().endswith("; no projection: " + why)
    old = pd.DataFrame(rows)
    old.loc[old["row"] == "fit", "projection"] = 0.0  # as a csv made before the rule holds it
    assert S.read_trends(old)[0].projection is None
    assert S.shown_projection(old[old["row"] == "fit"].iloc[0], old[old["row"] == "seed"]) is None


def test_a_rung_whose_compared_models_sit_at_chance_gives_no_value():
    import numpy as np

    """FedMT's quick ladder had FedMT (E) and SemiFL both at 1% (CIFAR-100's one-class score) at its
    first rung, a margin of 0.0 that entered the fit; `learned` leaves such a rung out (Missing)."""
    from fedpaper.claims.rows import Cell, Missing
    from fedpaper.outputs.ladder import learned

    def cell(*v):
        return Cell(float(np.mean(v)), float(np.std(v, ddof=1)), len(v), tuple(v))

    ok = {"FedMT (E)": cell(20.0, 22.0, 21.0), "SemiFL": cell(18.0, 19.0, 20.0), "FedAvg": cell(1.0, 1.2, 0.9)}
    assert learned(ok, ("FedMT (E)", "SemiFL"), 1.0) == ok
    # one learning other suffices; the others at chance are left out, as the claim checks do
    assert learned(ok, ("FedMT (E)",), 1.0, others=("SemiFL", "FedAvg")) == {k: ok[k] for k in ("FedMT (E)", "SemiFL")}
    flat = {"FedMT (E)": cell(1.0, 1.0, 1.0), "SemiFL": cell(1.0, 1.0, 1.0)}
    with pytest.raises(Missing, match=r"at chance: FedMT \(E\) 1.0/1.0/1.0, SemiFL 1.0/1.0/1.0 "
                                      r"at gamma=0.99 \(one-class score 1.0, margin 2\)"):
        learned(flat, ("FedMT (E)", "SemiFL"), 1.0, "at gamma=0.99")
    with pytest.raises(Missing, match="FedAvg"):
        learned(ok, ("FedMT (E)",), 1.0, others=("FedAvg",))  # every other model at chance


def test_fedmt_ladder_leaves_an_at_chance_rung_out():
    import numpy as np

    import pandas as pd

    from fedpaper.claims.rows import Missing
    from fedpaper.papers.fedmt import ladder as L

    def rows(e, s):
        return [{"metric": L.ACC, "gamma": 0.5, "method": m, "mean": float(np.mean(v)), "std": 0.1, "n_seeds": 3,
                 "per_seed": ";".join(f"{x:.2f}" for x in v)} for m, v in ((L.E, e), ("SemiFL", s))]

    good = pd.DataFrame(rows((20.0, 21.0, 22.0), (18.0, 19.0, 23.0)))
    assert L.c11({"fig2b": good}).seeds == pytest.approx((2.0, 2.0, -1.0))
    with pytest.raises(Missing, match="at chance"):
        L.c11({"fig2b": pd.DataFrame(rows((1.0, 1.0, 1.0), (1.0, 1.0, 1.0)))})


def test_a_rung_where_the_compared_methods_coincide_gives_no_value():
    """FedMT's 1-round rungs (quick r1, r2; long r1 until 2026-11-27) gave FedMT (E) and SemiFL the
    same score on every seed (8.6/7.5/9.8 at long r1): a margin of exactly 0.0 by construction,
    which entered the fits (claim 11 "flat", then "widening"). `differ` leaves such a rung out."""
    import numpy as np

    from fedpaper.claims.rows import Missing
    from fedpaper.papers.fedmt import ladder as L

    def rows(e, s):
        return [{"metric": L.ACC, "gamma": 0.5, "method": m, "mean": float(np.mean(v)), "std": 0.1, "n_seeds": 3,
                 "per_seed": ";".join(f"{x:.2f}" for x in v)} for m, v in ((L.E, e), ("SemiFL", s))]

    with pytest.raises(Missing, match=r"FedMT \(E\) and SemiFL the same on every seed at gamma=0.5 "
                                      r"\(8.6/7.5/9.8\)"):
        L.c11({"fig2b": pd.DataFrame(rows((8.6, 7.5, 9.8), (8.6, 7.5, 9.8)))})
    # equal on some seeds only: a real (small) margin
    assert L.c11({"fig2b": pd.DataFrame(rows((8.6, 7.5, 9.9), (8.6, 7.5, 9.8)))}).seeds == \
        pytest.approx((0.0, 0.0, 0.1))


def test_a_worst_row_quantity_compares_the_same_rows_at_every_rung():
    """A row at chance at one rung (that has a value) is left out at every rung: otherwise the worst
    of more rows at a larger rung would look like a widening gap."""
    import numpy as np

    from fedpaper.outputs import ladder as LD
    from fedpaper.claims.rows import Missing

    def bad():
        raise Missing("at chance: X 1.0/1.0/1.0")

    rung = LD.RungTables({})
    assert LD.testable(rung, [("a", lambda: 1.0), ("b", bad), ("c", lambda: 2.0)]) == [1.0, 2.0]
    assert rung.left_out == [("b", "at chance: X 1.0/1.0/1.0")]
    assert LD.testable(LD.RungTables({}, exclude={"b"}), [("a", lambda: 1.0), ("b", bad)]) == [1.0]
    with pytest.raises(Missing, match="at chance: X"):
        LD.testable({}, [("b", bad)])

    # rung r1: row "low" at chance; rung r2: both learn, "low" much worse than "high"
    tables = {"r1": {"low": None, "high": 5.0}, "r2": {"low": -9.0, "high": 6.0}}

    def value(t):
        def row(k):
            def f():
                if t[k] is None:
                    raise Missing(f"at chance: {k}")
                return np.array([t[k], t[k]])
            return f
        return LD.worst(LD.testable(t, [(k, row(k)) for k in ("low", "high")]))

    q = LD.Quantity("q", (1,), 1, value)
    vals, notes = LD._values_on_common_rows(q, [{"name": "r1"}, {"name": "r2"}], tables, [0, 1])
    assert vals == {"r1": {0: 5.0, 1: 5.0}, "r2": {0: 6.0, 1: 6.0}}  # "low" out at both rungs
    assert notes == ["q: rows left out at every rung, so that each rung compares the same rows: low (rung r1: at "
                     "chance: low)"]


def test_a_quantity_without_a_fit_reads_back_without_a_slope():
    import pandas as pd

    rows = S.ladder_rows([{"quantity": "q", "claim": "5", "direction": 1, "values": {}},
                          {"quantity": "r", "claim": "", "direction": 1,
                           "values": {"a": {0: 1.0, 1: 2.0}, "b": {0: 2.0, 1: 2.5}}}],
                         [{"name": "a", "compute": 0.1}, {"name": "b", "compute": 1.0}], 1e4)
    q, r = S.read_trends(pd.DataFrame(rows, columns=S.COLUMNS))
    assert (q.trend, q.slope, q.se, q.rungs) == (S.TOO_FEW, None, None, 0)
    assert q.text() == "q: too few rungs (0 rung(s) with a value)"
    assert r.trend == S.TOO_FEW and r.rungs == 2 and r.slope is not None


def test_a_rungs_sweeps_are_labelled_by_the_rung_and_counted_into_the_ladder(cache_tmp, figures_tmp, monkeypatch):
    """A ladder reruns artifacts at every rung: each rung's bars end with the rung's name, after the
    rerun artifact's own id, and the rung's runs count into the ladder's tally."""
    import matplotlib.pyplot as plt

    from fedpaper.outputs import pipeline
    from fedpaper.outputs import ladder as LD
    from fedpaper.runs import sweep as W

    labels = []
    real = W._progress

    def recording(total, initial, label, enabled, unit="runs"):
        labels.append(label)
        return real(total, initial, label, False, unit)

    monkeypatch.setattr(W, "_progress", recording)

    def compute(p):
        W.run_sweep([{"i": 1}, {"i": 2}], lambda s: s, desc="fedmt table2 C=10")
        return pd.DataFrame({"x": [1]}), {}

    def table2(*, profile, data_root, out_dir, seeds, overrides):
        job = pipeline.ArtifactJob("fedmt/table2", {}, compute, lambda t, p: plt.figure(), ("none",))
        return pipeline.run_job(job, profile=profile, data_root=data_root, out_dir=out_dir, seeds=seeds)

    ladder = LD.Ladder(paper="fedmt", functions=(table2,), rungs={"smoke": ("smoke", (LD.Rung("r1"),))},
                       quantities=(), settings=lambda profile: {}, work=lambda p: 1.0, work_unit="runs",
                       datasets=())
    tally = W.RunTally()
    with W.in_scope(W.SweepScope(artifact="fedmt/scaling", owner=("fedmt/scaling", "smoke"), tally=tally)):
        tables = LD._rung_tables(ladder, "smoke", LD.Rung("r1"), [0], None)
    assert list(tables) == ["table2"]
    assert labels == ["fedmt/table2 C=10 (rung r1)"]
    assert tally.record() == {"runs": 2, "from_cache": 0, "computed": 2}
    assert W.current_scope() == W.SweepScope()
