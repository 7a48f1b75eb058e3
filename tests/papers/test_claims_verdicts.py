"""FedPALS and privlabels claim verdicts on small hand-made tables: not testable (models at chance),
partial, within noise, rows found by key (shuffling rows changes no verdict), the report's counts."""
import pandas as pd
import pytest

from fedpaper import report as R
from fedpaper.outputs.registry import Claim, get_claim
from fedpaper import claims as K
from fedpaper.ground.paths import REPO_ROOT


def check(cid, **tables):
    return get_claim(cid).check({f"{cid.split('/')[0]}/{k}": v for k, v in tables.items()})


def _rows(split, x, per_method, xcol="C", **cols):
    """fig2c/fig8b/table1-like rows: per_method {method: per-seed list}."""
    out = []
    for m, seeds in per_method.items():
        s = pd.Series(seeds, dtype=float)
        out.append({"dataset": "CIFAR-10", "label_split": split, xcol: x, "method": m, "metric": "accuracy_pct",
                    "mean": s.mean(), "std": s.std(), "n_seeds": len(seeds),
                    "per_seed": ";".join(f"{v:.2f}" for v in seeds), **cols})
    return out


def _shuffled(t, seed):
    return t.sample(frac=1, random_state=seed).reset_index(drop=True)


# ------------------------------------------------------------------------------- fedpals
def test_claim5_not_testable_at_chance_pass_when_equal_within_noise_when_noisy():
    at = pd.DataFrame(_rows("C=10", 10.0, {"FedAvg": [11.0, 12.0, 11.8], "FedPALS": [11.0, 12.0, 11.8],
                                            "Oracle": [10.0, 11.0, 11.7]}))
    v = check("fedpals/claim-5", fig2c=at)
    assert v.verdict == K.NOT_TESTABLE and v.causes[0].kind == K.AT_CHANCE and "one-class score 10.0" in v.detail
    same = pd.DataFrame(_rows("C=10", 10.0, {"FedAvg": [40.0, 41.0, 42.0], "FedPALS": [40.0, 41.0, 42.0],
                                              "Oracle": [40.2, 41.1, 42.3]}))
    assert check("fedpals/claim-5", fig2c=same).verdict == K.PASS
    # identical FedPALS/FedAvg but an Oracle whose gap the seeds cannot pin down: not a pass
    noisy = pd.DataFrame(_rows("C=10", 10.0, {"FedAvg": [36.8, 40.2, 35.0], "FedPALS": [36.8, 40.2, 35.0],
                                               "Oracle": [35.4, 42.2, 35.2]}))
    v = check("fedpals/claim-5", fig2c=noisy)
    assert v.verdict == K.WITHIN_NOISE and v.causes[0].kind == K.NOISE


def test_claim26_a_loser_at_chance_counts_for_the_claim_a_winner_at_chance_is_not_testable():
    """FedPALS beats FedAvg: a FedAvg at zero while FedPALS learns is evidence for the claim (kept in
    the comparison); a FedPALS at chance leaves the row not testable."""
    loser_low = {"FedPALS": [38.0, 45.0, 40.0], "FedAvg": [0.0, 0.0, 0.0]}
    winner_low = {"FedPALS": [33.3, 34.0, 33.3], "FedAvg": [40.0, 41.0, 42.0]}
    learn = {"FedPALS": [48.0, 55.0, 50.0], "FedAvg": [40.0, 41.0, 42.0]}

    def tabs(b_runs, c_runs):
        return dict(fig8b=pd.DataFrame(_rows("C=3", 15, b_runs, xcol="local_epochs")),
                    fig8c=pd.DataFrame(_rows("C=3", 10, c_runs, xcol="training_clients")))
    v = check("fedpals/claim-26", **tabs(loser_low, loser_low))
    assert v.verdict == K.PASS and "losers at chance, kept as evidence for the claim: FedAvg 0.0/0.0/0.0" in v.detail
    v = check("fedpals/claim-26", **tabs(winner_low, winner_low))
    assert v.verdict == K.NOT_TESTABLE and "0 of 2 hold, 2 not testable" in v.detail
    assert v.causes[0].kind == K.AT_CHANCE and "FedPALS 33.3/34.0/33.3" in v.causes[0].evidence
    assert check("fedpals/claim-26", **tabs(learn, learn)).passed
    v = check("fedpals/claim-26", **tabs(learn, winner_low))
    assert v.verdict == K.PARTIAL and "1 of 2 hold, 1 not testable" in v.detail


def test_claims_3_4_a_loser_at_chance_never_changes_the_verdict():
    """FedAvg on one Table 1 row moved from just above chance to just at it (one-class score 50 at
    C=2, margin 2): claims 3 and 4 give the verdict they give when it learns; an Oracle or FedPALS at
    chance makes the row not testable."""
    t = _table1([98.0, 99.0, 100.0])
    pacs = t[t.label_split == "C=3"].assign(dataset="PACS", label_split="C=6")
    t = pd.concat([t[~((t.dataset == "CIFAR-10") & (t.label_split == "C=3"))], pacs,
                   t[(t.dataset == "CIFAR-10") & (t.label_split == "C=3")]], ignore_index=True)
    row = (t.label_split == "C=2") & (t.dataset == "CIFAR-10")
    for cid in ("fedpals/claim-3", "fedpals/claim-4"):
        verdicts = set()
        for seeds in ("53.0;54.0;56.0", "51.0;52.0;56.0", "40.0;45.0;51.0"):  # above, at, below chance
            u = t.copy()
            u.loc[row & (u.method == "FedAvg"), "per_seed"] = seeds
            u.loc[row & (u.method == "FedAvg"), "mean"] = sum(map(float, seeds.split(";"))) / 3
            verdicts.add(check(cid, table1=u).verdict)
        assert verdicts == {K.PASS}, (cid, verdicts)
        winner = "Oracle" if cid.endswith("3") else "FedPALS"
        u = t.copy()
        u.loc[row & (u.method == winner), "per_seed"] = "50.0;51.0;50.5"
        v = check(cid, table1=u)
        assert v.verdict == K.PARTIAL and "5 of 6 hold, 1 not testable" in v.detail and v.causes[0].kind == K.AT_CHANCE


def _table1(oracle_seeds):
    rows = []
    for d, s in (("Fashion-MNIST", "C=3"), ("Fashion-MNIST", "C=2"), ("CIFAR-10", "C=3"), ("CIFAR-10", "C=2"),
                 ("CIFAR-10", "beta=0.1")):
        for r in _rows(s, None, {"FedPALS": [95.0, 96.0, 100.0], "FedAvg": [70.0, 72.0, 75.0],
                                 "FedProx": [70.5, 71.0, 75.0], "SCAFFOLD": [69.0, 71.0, 74.0], "AFL": [68.0, 70.0, 73.0],
                                 "FedRS": [69.0, 70.0, 74.0], "Oracle": oracle_seeds}, xcol="unused"):
            rows.append({**r, "dataset": d})
    return pd.DataFrame(rows).drop(columns=["unused"])


def test_claims_3_4_a_shared_perfect_score_is_never_at_chance():
    # FedPALS and Oracle reach 100 % on seed 2 (with a third method there too): not one-class models
    t = _table1([98.0, 99.0, 100.0])
    t.loc[(t.method == "FedProx") & (t.label_split == "beta=0.1"), "per_seed"] = "70.50;71.00;100.00"
    for cid in ("fedpals/claim-3", "fedpals/claim-4"):
        v = check(cid, table1=t)
        assert v.verdict == K.PARTIAL and "not testable" not in v.detail and "1 not checkable" in v.detail, v.detail
        for seed in range(3):
            assert check(cid, table1=_shuffled(t, seed)).verdict == v.verdict


def test_claims_3_4_on_our_committed_table1_do_not_depend_on_fedavg_being_at_chance(monkeypatch):
    """On our committed Table 1, where FedAvg sits at chance on a row, claims 3 and 4 count their rows
    the same whether FedAvg is judged at chance or not (the at-chance test made blind to FedAvg)."""
    from fedpaper.outputs.artifacts import load_committed
    from fedpaper.claims import chance as C

    monkeypatch.setenv("FEDPAPER_FIGURES", str(REPO_ROOT / "figures"))
    t, _ = load_committed("fedpals/table1")
    low = [(d, s) for d, s in t[["dataset", "label_split"]].drop_duplicates().itertuples(index=False)
           if "FedAvg" in K.at_chance({"FedAvg": K.cell(t, dataset=d, label_split=s, method="FedAvg",
                                                        metric="accuracy_pct")}, K.chance_level(s))]
    assert low, "no Table 1 row of ours has FedAvg at chance: this test needs one"
    base = {cid: check(cid, table1=t) for cid in ("fedpals/claim-3", "fedpals/claim-4")}
    real = C.at_chance
    monkeypatch.setattr(C, "at_chance", lambda cells, chance: [m for m in real(cells, chance) if m != "FedAvg"])
    for cid, v in base.items():
        blind = check(cid, table1=t)
        assert (blind.verdict, blind.detail.split(". ")[0]) == (v.verdict, v.detail.split(". ")[0]), cid
        assert "not testable" not in v.detail.split(". ")[0]


def _pacs(order):
    lam = {0: (86.0, 85.0, 87.0), 12: (84.0, 83.5, 85.0), 42: (81.0, 82.0, 81.5), 93: (77.0, 77.5, 76.5)}
    rows = [{"dataset": "PACS", "clients": 3, "lambda": L, "method": "FedPALS", "metric": "accuracy_pct",
             "mean": sum(lam[L]) / 3, "std": 0.5, "n_seeds": 3, "per_seed": ";".join(map(str, lam[L]))} for L in order]
    rows.append({"dataset": "PACS", "clients": 3, "lambda": 0, "method": "FedProx+FedPALS", "metric": "accuracy_pct",
                 "mean": 86.5, "std": 2.0, "n_seeds": 3, "per_seed": "84.5;86.5;88.5"})
    return pd.DataFrame(rows)


def test_lambda_order_is_read_from_the_lambda_column_not_the_row_position():
    """Claims 9, 12, 13 took lambda order by position: rows in any order give one verdict."""
    t1 = pd.DataFrame([{"dataset": "PACS", "label_split": "C=6", "method": m, "metric": "accuracy_pct", "mean": v,
                        "std": 0.5, "n_seeds": 3, "per_seed": f"{v - 0.5};{v};{v + 0.5}"}
                       for m, v in (("FedProx", 76.0), ("FedRS", 75.0), ("SCAFFOLD", 74.0), ("FedPALS", 86.0))])
    for order in ([0, 12, 42, 93], [93, 42, 12, 0], [42, 0, 93, 12]):
        t4 = _pacs(order)
        assert check("fedpals/claim-9", table4=t4).verdict == K.PASS
        assert check("fedpals/claim-12", table4=t4, table1=t1).verdict == K.PASS
        assert check("fedpals/claim-13", table4=t4).verdict == K.PASS
    rising = _pacs([0, 12, 42, 93]).assign(mean=lambda d: d["mean"][::-1].values)
    rising["per_seed"] = rising["per_seed"][::-1].values
    assert check("fedpals/claim-9", table4=rising).verdict == K.FAIL


def test_iwildcam_lambda_order_and_ess_by_key():
    f1 = {0: 0.13, 600: 0.18, 2500: 0.19, 5800: 0.21}
    rows = [{"dataset": "iWildCam", "lambda": L, "method": "FedPALS", "metric": "f1_macro", "mean": v, "std": 0.0,
             "n_seeds": 3} for L, v in f1.items()]
    t3 = pd.DataFrame(rows)
    for seed in range(3):
        assert check("fedpals/claim-16", table3=_shuffled(t3, seed)).verdict == K.PASS
    ess = pd.DataFrame([{"lambda": L, "method": "FedPALS", "metric": "ess_pct_of_N", "mean": v, "std": 0.0, "n_seeds": 3}
                        for L, v in (("0", 14.0), ("ESS25", 25.0), ("ESS50", 50.0), ("ESS75", 75.0))])
    for seed in range(3):
        assert check("fedpals/claim-28", fig3a=_shuffled(ess, seed)).verdict == K.PASS
        assert check("fedpals/claim-29", fig3b=_shuffled(ess, seed)).verdict == K.FAIL  # lambda=0 gives 14, paper 8


def test_claim27_leaves_out_epochs_where_fedpals_sits_at_chance():
    rows = []
    for e, seeds, val in ((1, [45.0, 50.0, 48.0], 50.0), (5, [40.0, 44.0, 42.0], 45.0), (15, [33.33, 33.33, 40.0], 60.0)):
        rows += _rows("C=3", e, {"FedPALS": seeds}, xcol="local_epochs", val_mean=val)
    t = pd.DataFrame(rows)
    v = check("fedpals/claim-27", fig8b=t)
    assert v.verdict == K.PARTIAL and "left out E in 15" in v.detail and v.causes[0].kind == K.AT_CHANCE
    assert check("fedpals/claim-27", fig8b=t[t.local_epochs < 15]).passed


def _fig9(pals, avg, std=0.5):
    ds = [round(0.1 * i, 1) for i in range(len(pals))]
    return pd.DataFrame([{"delta": d, "projection_distance": 0.375 * d * d, "method": m, "metric": "accuracy_pct",
                          "mean": v, "std": std, "n_seeds": 5} for m, vals in (("FedPALS", pals), ("FedAvg", avg))
                         for d, v in zip(ds, vals)])


def test_claim23_highest_at_zero_and_a_decline_the_seeds_show():
    assert check("fedpals/claim-23", fig9=_fig9([99.0, 98.9, 98.8, 98.4, 97.0], [98.0] * 5)).verdict == K.PASS
    assert check("fedpals/claim-23", fig9=_fig9([97.0, 98.0, 99.0, 98.5, 96.0], [98.0] * 5)).verdict == K.FAIL
    v = check("fedpals/claim-23", fig9=_fig9([99.0, 99.1, 99.0, 98.8, 98.7], [98.0] * 5))
    assert v.verdict == K.WITHIN_NOISE and v.causes[0].kind == K.NOISE


# ------------------------------------------------------------------------------- privlabels
def _pl(seeds: dict, setting="private", **cols):
    """fig2-like table: seeds {(method, L): per-seed accuracies (fractions)}."""
    rows = []
    for (m, L), v in seeds.items():
        s = pd.Series(v, dtype=float)
        rows.append({"dataset": "cifar10", "setting": setting, "labels_per_client": L, "method": m, "metric": "accuracy",
                     "mean": s.mean(), "std": s.std(), "ci_low": s.min(), "ci_high": s.max(), "n_seeds": len(v),
                     "per_seed": ";".join(f"{x:.4f}" for x in v), **cols})
    return pd.DataFrame(rows)


def test_privlabels_claim17_needs_the_seeds_to_show_the_gain():
    # +0.45 points with seeds +0.1 / 0.0 / +1.25: inside noise (the committed long-profile fig12 numbers)
    small = _pl({("Tuning-MSE", 5): [0.2050, 0.2400, 0.2550], ("Tuning-Pairwise", 5): [0.2040, 0.2400, 0.2425]})
    v = check("privlabels/claim-17", fig12=small, fig13=small)
    assert v.verdict == K.WITHIN_NOISE and v.causes[0].kind == K.NOISE
    big = _pl({("Tuning-MSE", 5): [0.25, 0.28, 0.30], ("Tuning-Pairwise", 5): [0.20, 0.24, 0.25]})
    assert check("privlabels/claim-17", fig12=big, fig13=big).passed
    assert check("privlabels/claim-17", fig12=big).verdict == K.PARTIAL  # fig13 missing


def test_privlabels_claim14_needs_a_positive_gain():
    neg = _pl({("FedAvg", 2): [0.30, 0.31, 0.29], ("Tuning-MSE", 2): [0.28, 0.29, 0.27],
               ("Tuning-Pairwise", 2): [0.27, 0.28, 0.26], ("FedAvg", 5): [0.50, 0.51, 0.49],
               ("Tuning-MSE", 5): [0.45, 0.46, 0.44], ("Tuning-Pairwise", 5): [0.44, 0.45, 0.43]})
    assert check("privlabels/claim-14", fig2=neg, fig3=neg).verdict == K.FAIL
    pos = _pl({("FedAvg", 2): [0.30, 0.31, 0.29], ("Tuning-MSE", 2): [0.36, 0.38, 0.35],
               ("Tuning-Pairwise", 2): [0.33, 0.34, 0.32], ("FedAvg", 5): [0.50, 0.51, 0.49],
               ("Tuning-MSE", 5): [0.51, 0.515, 0.495], ("Tuning-Pairwise", 5): [0.49, 0.50, 0.48]})
    assert check("privlabels/claim-14", fig2=pos, fig3=pos).passed


def test_privlabels_chance_level_L_not_testable_and_partial():
    """Claim 5 (the tuning methods beat adapted FedAvg and FedProx): an L where the adapted methods, the
    losers, sit at chance while the tuning methods learn counts for the claim; an L where a tuning
    method, a claimed winner, sits at chance is not testable."""
    learn5 = {("FedAvg", 5): [0.40, 0.41, 0.39], ("FedProx", 5): [0.41, 0.40, 0.41],
              ("Tuning-MSE", 5): [0.50, 0.52, 0.51], ("Tuning-Pairwise", 5): [0.46, 0.47, 0.45]}
    losers_low = _pl({("FedAvg", 2): [0.11, 0.105, 0.10], ("FedProx", 2): [0.10, 0.10, 0.11],
                      ("Tuning-MSE", 2): [0.30, 0.31, 0.29], ("Tuning-Pairwise", 2): [0.28, 0.27, 0.26], **learn5})
    v = check("privlabels/claim-5", fig2=losers_low)
    assert v.verdict == K.PASS and "losers at chance, kept as evidence for the claim: FedAvg 11.0/10.5/10.0" in v.detail
    t = _pl({("FedAvg", 2): [0.20, 0.21, 0.19], ("FedProx", 2): [0.19, 0.20, 0.21],
             ("Tuning-MSE", 2): [0.30, 0.31, 0.29], ("Tuning-Pairwise", 2): [0.11, 0.105, 0.10], **learn5})
    v = check("privlabels/claim-5", fig2=t)
    assert v.verdict == K.PARTIAL and "L=2 (not testable)" in v.detail
    assert v.causes[0].kind == K.AT_CHANCE and "Tuning-Pairwise 11.0/10.5/10.0" in v.causes[0].evidence
    assert check("privlabels/claim-5", fig2=t[t.labels_per_client == 2]).verdict == K.NOT_TESTABLE
    for seed in range(3):
        assert check("privlabels/claim-5", fig2=_shuffled(t, seed)).verdict == K.PARTIAL
        assert check("privlabels/claim-5", fig2=_shuffled(losers_low, seed)).verdict == K.PASS


# ------------------------------------------------------------------------------- report
def test_report_counts_code_checks_apart_and_marks_new_verdicts():
    code = lambda t: K.Verdict.of(True, "formula holds")  # noqa: E731
    code.on_code = True
    claims = [Claim("fedpals/claim-30", "numerical", (), code),
              Claim("fedpals/claim-5", "comparable", (), lambda t: K.Verdict(K.NOT_TESTABLE, "all at chance")),
              Claim("fedpals/claim-1", "every row", (), lambda t: K.Verdict(K.PARTIAL, "5 of 6 rows hold")),
              Claim("fedpals/claim-4", "noise", (), lambda t: K.Verdict(K.WITHIN_NOISE, "+0.3 (SE 2)")),
              Claim("fedpals/claim-3", "fails", (), lambda t: K.Verdict.of(False, "no"))]
    res = K.check_claims(claims, {})
    assert [r["verdict"] for r in res] == ["pass", "not testable", "partial", "within noise", "fail"]
    assert [r["on_code"] for r in res] == [True, False, False, False, False]
    counts = R.claim_counts(res)
    assert counts.startswith("On results: 0 pass, 1 within noise, 1 fail, 1 partial, 1 not testable, 0 not checkable.")
    assert counts.endswith("Checked on code (a formula or a data split, no trained model): 1 pass, 0 within noise, "
                           "0 fail, 0 partial, 0 not testable, 0 not checkable.")


@pytest.mark.parametrize("cid", [f"fedpals/claim-{i}" for i in (1, 2, 3, 4, 6, 26)]
                         + [f"privlabels/claim-{i}" for i in (1, 2, 5, 9, 13, 20)])
def test_committed_verdicts_do_not_depend_on_row_order(cid, monkeypatch):
    monkeypatch.setenv("FEDPAPER_FIGURES", str(REPO_ROOT / "figures"))
    tables = R.committed_tables()
    c = get_claim(cid)
    avail = {a: tables[a] for a in c.artifacts if tables.get(a) is not None}
    if not avail:
        pytest.skip("no committed results")
    want = c.check(avail)
    for seed in range(3):
        got = c.check({a: _shuffled(t, seed) for a, t in avail.items()})
        assert (got.verdict, got.detail) == (want.verdict, want.detail)
