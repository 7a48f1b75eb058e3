"""Every claim check fed the papers' OWN reported numbers (reported_tables.py: the reported CSVs in
our schema, per-seed values synthesised from the reported mean and std):

- each claim gets the verdict EXPECTED lists: pass where the paper's numbers support it; fail where
  the paper's own tables contradict its text (FedMT 28, 32); "within noise" where the paper's own
  seed spread does not resolve it; "not checkable" where the paper reports no numbers for it.
  Twice: with the synthetic per-seed values (paired differences; the seeds' common offsets are the
  most favourable pairing, so "within noise" there holds under any pairing), and without them (the
  toolkit's unpaired rule, SE from the reported stds, as the report reads the packaged tables);
  UNPAIRED lists where the second reading differs;
- shuffling the rows of every table (the paper's and our committed ones) changes no verdict;
- each input in ALTERED, the paper's numbers with a few cells changed so that the claim is false,
  fails; each input in REPAIRED, a contradicted claim's cells changed so that it holds, passes.

privlabels reports no numbers (its claims are orderings of curves), so only the shuffle test
covers it, on our committed tables.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fedpaper.claims import check_claims
from fedpaper.outputs.registry import claims, get_claim
from reported_tables import FIGURES, paper_tables, set_mean, shuffled, standardised, synthesised

PAPERS = ("fedpals", "fedmt", "fednca", "privlabels")
REPORTED_PAPERS = ("fedpals", "fedmt", "fednca")
PASS, FAIL, NOISE, NC, PARTIAL = "pass", "fail", "within noise", "not checkable", "partial"
NAN = math.nan

# ---------------------------------------------------------------------------------------------
# The verdict on the paper's own numbers, read off the reported tables by hand (the comment says
# why where it is not a plain pass).
EXPECTED = {
    # FedPALS: Table 1 (8 or 3 seeds with std), Tables 2-4, the lambda <-> ESS text of Fig 3.
    "fedpals/claim-1": PASS, "fedpals/claim-2": PASS,
    # the paper's own FedAvg is at chance on CIFAR-10 C=2 (46.7 %, one-class 50 %): a loser at chance
    # counts for "well below" and "beats" claims (CONTEST_RULE), so every row holds
    "fedpals/claim-3": PASS,
    "fedpals/claim-4": PASS,  # FedPALS - FedAvg 12.6 .. 26.7
    "fedpals/claim-5": NC, "fedpals/claim-6": NC, "fedpals/claim-7": NC, "fedpals/claim-8": NC,  # figures, no numbers
    "fedpals/claim-9": PASS,
    "fedpals/claim-10": NC, "fedpals/claim-11": NC,  # fig3a: the paper gives only lambda <-> ESS, no weights or curve
    "fedpals/claim-12": PASS, "fedpals/claim-13": PASS, "fedpals/claim-14": PASS,
    "fedpals/claim-15": NC,    # fig3b: no curve numbers
    "fedpals/claim-16": PASS,
    "fedpals/claim-17": NOISE,  # FedPALS 0.21 vs FedAvg 0.20 (std 0.01): "within 0.02" not shown by two decimals
    "fedpals/claim-18": NOISE,  # FedProx 0.21 vs FedAvg 0.20 and FedPALS 0.21: not separated
    "fedpals/claim-19": PASS,
    "fedpals/claim-20": PASS,
    "fedpals/claim-21": NC,    # fig4: no numbers
    "fedpals/claim-22": PASS,
    "fedpals/claim-23": NC, "fedpals/claim-24": NC, "fedpals/claim-25": NC, "fedpals/claim-26": NC,
    "fedpals/claim-27": NC,    # fig8, fig9: no numbers
    "fedpals/claim-28": PASS, "fedpals/claim-29": PASS,
    "fedpals/claim-30": PASS, "fedpals/claim-31": PASS,  # on code
    "fedpals/claim-32": NC,
    # FedMT: Tables 2, 6 (3 seeds with std), Tables 3, 7, 8, 9 and the Fig 2c text (no std).
    "fedmt/claim-1": NOISE,    # Single 29.12 -> 29.57 from n = 20 to 25 (stds 0.80, 0.29)
    "fedmt/claim-2": PASS, "fedmt/claim-3": PASS, "fedmt/claim-4": PASS,
    "fedmt/claim-5": PASS, "fedmt/claim-6": PASS,
    "fedmt/claim-7": NC, "fedmt/claim-8": NC, "fedmt/claim-9": NC,    # fig2a: no numbers
    "fedmt/claim-10": NC, "fedmt/claim-11": NC,                       # fig2b: no numbers
    "fedmt/claim-12": PASS,    # SemiFL 55.98 -> 26.10; FedMT (E) drops by 35.59 % (its endpoints only)
    "fedmt/claim-13": PASS,    # relative drops 53.38 % vs 35.59 %
    "fedmt/claim-14": NC,      # the text gives FedMT (E) only as a relative drop, no accuracy per C
    "fedmt/claim-15": NC, "fedmt/claim-16": NC, "fedmt/claim-17": NC, "fedmt/claim-18": NC,  # fig2d, fig3
    "fedmt/claim-19": PASS, "fedmt/claim-20": PASS, "fedmt/claim-21": PASS, "fedmt/claim-22": PASS,
    "fedmt/claim-23": PASS, "fedmt/claim-24": PASS, "fedmt/claim-25": PASS,
    "fedmt/claim-26": PASS,    # Table 6: ImageNet above random for Single, FedRep, FedTrans at every n
    "fedmt/claim-27": NC,      # no reported numbers (Sec. 4.2 text only)
    "fedmt/claim-28": FAIL,    # Table 7: SemiFL 58.48 at xi = 0.7 < 58.71 at 0.8
    "fedmt/claim-29": PASS, "fedmt/claim-30": PASS, "fedmt/claim-31": PASS,
    "fedmt/claim-32": FAIL,    # Table 9: Learnable + Average above Learnable at gamma 0.1 (55.61 > 55.25) and 0.99
    "fedmt/claim-33": PASS,
    # FedNCA-ML: Tables 1-4 (3 seeds with std), ablations 5-8 (no std).
    "fednca/claim-1": PASS, "fednca/claim-2": PASS, "fednca/claim-3": PASS, "fednca/claim-4": PASS,
    "fednca/claim-5": NOISE,   # VOC beta = 0.01: stated margin 4.55 over FedLGT, whose std is 2.42
    "fednca/claim-6": PASS,    # beta = 0.1: the table gives 71.28 - 70.16 = 1.12, the text 1.21 (within tolerance)
    "fednca/claim-7": NOISE,   # beta = 0.1: FedAvg's micro-AUC 77.90 vs FedNCA-ML's 77.86 (stds 0.20, 0.45)
    "fednca/claim-8": PASS,
    "fednca/claim-9": PASS, "fednca/claim-10": PASS, "fednca/claim-11": PASS, "fednca/claim-12": PASS,
    "fednca/claim-13": PASS, "fednca/claim-14": PASS, "fednca/claim-15": PASS, "fednca/claim-16": PASS,
    "fednca/claim-17": PASS, "fednca/claim-18": PASS,
    "fednca/claim-19": NC, "fednca/claim-20": NC, "fednca/claim-21": NC, "fednca/claim-22": NC,
    "fednca/claim-23": NC, "fednca/claim-24": NC,  # figures: no numbers
}

# Where the unpaired reading (no per-seed values: SE = sqrt(std_a^2/n + std_b^2/n)) differs.
UNPAIRED = {
    "fedpals/claim-1": NOISE,   # Fashion-MNIST: FedPALS vs FedRS / AFL with stds 13-24 over 8 seeds
    "fedpals/claim-4": NOISE,   # Fashion-MNIST C=2 (+26.7, stds 23.7 / 36.2) and PACS (+12.6 vs the 10 asked)
    "fedpals/claim-9": NOISE,   # 86.0 -> 84.3 -> 81.7 (stds 2.9, 2.5, 1.2; 3 seeds)
    "fedpals/claim-12": NOISE,  # lambda = 0 vs the baselines: 86.0 vs 76.1 asked to be >= 5 apart, stds 2.9, 1.6
    "fedpals/claim-13": NOISE,  # FedProx+FedPALS 87.2 vs FedPALS 86.0 "within one std" (stds 4.1, 2.9)
    "fedmt/claim-6": NOISE,     # n = 20: SemiFL 53.42 vs FedRep 53.14 (stds 0.44, 0.34)
    "fednca/claim-1": NOISE,    # 7 of 14 cells beyond noise, 6 within (margins 0.27-1.26 over stds up to 2.4)
    "fednca/claim-2": NOISE,    # beta = 0.5 macro-F1 margin 4.57 over FedLGT: SE 1.36
    "fednca/claim-3": NOISE,    # beta = 0.1 macro-F1 margin 1.26 over SphereFed: SE 0.88
    "fednca/claim-4": NOISE,    # beta = 0.5 macro-AUC margin 0.40: SE 0.34
    "fednca/claim-6": NOISE,    # beta = 0.5 margin 0.69 over FedLGT: SE 0.45
    "fednca/claim-8": NOISE,    # micro - macro gaps: FedNCA-ML's 0.73 (stds 1.34, 0.15) vs FedLGT's 2.41
}
MODES = ("paired", "unpaired")


def expected(claim_id: str, mode: str) -> str:
    return UNPAIRED.get(claim_id, EXPECTED[claim_id]) if mode == "unpaired" else EXPECTED[claim_id]


# ---------------------------------------------------------------------------------------------
# Inputs altered to contradict each claim: claim -> [(artifact, row selector, new mean)].
# A selector matching several rows sets them all.
_T1, _T3, _T4, _T2P = "fedpals/table1", "fedpals/table3", "fedpals/table4", "fedpals/table2"
_M2, _M3, _M6, _M7, _M8, _M9, _M2C = ("fedmt/table2", "fedmt/table3", "fedmt/table6", "fedmt/table7", "fedmt/table8",
                                      "fedmt/table9", "fedmt/fig2c")
_N = {i: f"fednca/table{i}" for i in range(1, 9)}
ACC, A9, A3 = "test_acc_100class", "test_acc_9class", "test_acc_3class"
FULL = "ETF-Clf+LADM+L_Neg+L_Pos"
ALTERED = {
    "fedpals/claim-1": [(_T1, {"dataset": "CIFAR-10", "label_split": "C=3", "method": "AFL"}, 90.0)],
    "fedpals/claim-2": [(_T1, {"dataset": "PACS", "method": "FedRS"}, 95.0)],
    "fedpals/claim-3": [(_T1, {"dataset": "PACS", "method": "FedAvg"}, 89.0)],
    "fedpals/claim-4": [(_T1, {"dataset": "PACS", "method": "FedAvg"}, 85.0)],
    "fedpals/claim-9": [(_T4, {"method": "FedPALS", "lambda": 42}, 90.0)],
    "fedpals/claim-12": [(_T4, {"method": "FedPALS", "lambda": 0}, 70.0)],
    "fedpals/claim-13": [(_T4, {"method": "FedProx+FedPALS"}, 95.0)],
    "fedpals/claim-14": [(_T1, {"dataset": "PACS", "method": "FedRS"}, 90.0)],
    "fedpals/claim-16": [(_T3, {"method": "FedPALS", "lambda": 2500}, 0.25)],
    "fedpals/claim-17": [(_T3, {"method": "FedAvg"}, 0.10)],
    "fedpals/claim-18": [(_T3, {"method": "SCAFFOLD"}, 0.30)],
    "fedpals/claim-19": [(_T3, {"method": "FedAvg"}, 0.30)],
    "fedpals/claim-20": [(_T3, {"method": "AFL"}, 0.15)],
    "fedpals/claim-22": [(_T2P, {"delta": 0.01}, 90.0)],
    "fedpals/claim-28": [("fedpals/fig3a", {"lambda": 42}, 70.0)],
    "fedpals/claim-29": [("fedpals/fig3b", {"lambda": 2500}, 70.0)],
    "fedmt/claim-1": [(_M2, {"method": "Single", "n": 20}, 35.0)],
    "fedmt/claim-2": [(_M2, {"method": "FedTrans", "n": 10}, 15.0)],
    "fedmt/claim-3": [(_M2, {"method": "FedMT (E)", "n": 15}, 45.0)],
    "fedmt/claim-4": [(_M2, {"method": "FedMT (T)", "n": 15}, 60.0)],
    "fedmt/claim-5": [(_M2, {"method": "FedMT (E)", "n": 25}, 50.0)],
    "fedmt/claim-6": [(_M2, {"method": "SemiFL", "n": 20}, 50.0)],
    "fedmt/claim-12": [(_M2C, {"method": "SemiFL", "metric": ACC, "C": 80}, 60.0)],
    "fedmt/claim-13": [(_M2C, {"method": "FedMT (E)", "metric": "relative_drop_percent"}, 60.0)],
    "fedmt/claim-19": [(_M3, {"method": "FedMT (E)", "metric": A9, "r_percent": 10}, 50.0)],
    "fedmt/claim-20": [(_M3, {"method": "FedRep", "metric": A9, "r_percent": 5}, 53.0)],
    "fedmt/claim-21": [(_M3, {"method": "Single", "metric": A9, "r_percent": 20}, 45.0)],
    "fedmt/claim-22": [(_M3, {"method": "FedTrans", "metric": A3, "r_percent": 20}, 71.0)],
    "fedmt/claim-23": [(_M3, {"method": "FedMT (E)", "metric": A9, "r_percent": 5}, 47.0)],
    "fedmt/claim-24": [(_M3, {"method": "FedRep", "metric": A3, "r_percent": 20}, 74.0)],
    "fedmt/claim-25": [(_M3, {"method": "SemiFL", "metric": A9, "r_percent": 20}, 59.0)],
    "fedmt/claim-26": [(_M6, {"method": "Single", "init": "imagenet", "n": 15}, 10.0)],
    "fedmt/claim-29": [(_M7, {"method": "FedMT (E)", "threshold": 0.9}, 55.0)],
    "fedmt/claim-30": [(_M8, {"method": "FedMT (E)", "lambda2": 0.125}, 67.0)],
    "fedmt/claim-31": [(_M9, {"method": "Learnable", "gamma": 0.9}, 60.0)],
    "fedmt/claim-33": [(_M9, {"method": "Learnable", "gamma": 0.9}, 56.0)],
    "fednca/claim-1": [(_N[i], {"method": "FedNCA-ML"}, 10.0) for i in (1, 2, 3)],
    "fednca/claim-2": [(_N[1], {"method": "FedNCA-ML", "beta": 0.5, "metric": "macro-AUC"}, 82.0)],
    "fednca/claim-3": [(_N[1], {"method": "FedNCA-ML", "beta": 0.1, "metric": "macro-F1"}, 33.0)],
    "fednca/claim-4": [(_N[2], {"method": "FedNCA-ML", "beta": 0.1, "metric": "macro-F1"}, 45.0)],
    "fednca/claim-5": [(_N[3], {"method": "FedNCA-ML", "beta": 0.05, "metric": "macro-F1"}, 58.0)],
    "fednca/claim-6": [(_N[4], {"method": "FedNCA-ML", "beta": 0.1, "metric": "macro-AUC"}, 69.0)],
    "fednca/claim-7": [(_N[4], {"method": "FedNCA-ML", "metric": "micro-AUC"}, 90.0)],
    "fednca/claim-8": [(_N[4], {"method": "FedAvg", "metric": "micro-AUC"}, 69.04)],
    "fednca/claim-9": [(_N[1], {"method": "FedNCA-ML", "beta": 0.5, "metric": "macro-AUC"}, 92.0)],
    "fednca/claim-10": [(_N[1], {"method": "FedAvg", "beta": 0.5, "metric": "macro-AUC"}, 95.0)],
    "fednca/claim-11": [(_N[5], {"components": "ETF-Clf", "metric": "macro-F1"}, 45.0)],
    "fednca/claim-12": [(_N[5], {"components": "ETF-Clf+LADM", "metric": "macro-F1"}, 41.0)],
    "fednca/claim-13": [(_N[5], {"components": FULL, "metric": "macro-AUC"}, 84.0)],
    "fednca/claim-14": [(_N[7], {"components": "ETF-Clf+LADM+L_Pos", "metric": "micro-F1"}, 99.0)],
    "fednca/claim-15": [(_N[6], {"query_type": "fixed"}, 10.0)],
    "fednca/claim-16": [(_N[7], {"components": "ETF-Clf+LADM", "metric": "macro-AUC"}, 82.0)],
    "fednca/claim-17": [(_N[7], {"components": FULL, "metric": "macro-F1"}, 44.0)],
    "fednca/claim-18": [(_N[8], {"query_type": "fixed"}, 10.0)],
}
# Claims the paper's own tables contradict, with the cells changed so that they hold.
REPAIRED = {
    "fedmt/claim-28": [(_M7, {"method": "SemiFL", "threshold": 0.8}, 58.0)],
    "fedmt/claim-32": [(_M9, {"method": "Learnable + Average", "gamma": 0.1}, 55.0),
                       (_M9, {"method": "Learnable + Average", "gamma": 0.99}, 36.0)],
}
# A claim checked on code (no table) cannot be contradicted by a table.
ON_CODE = {"fedpals/claim-30", "fedpals/claim-31"}


# Known bugs outside this suite (strict xfail: an XPASS fails the run, so the set can only shrink).
KNOWN_FAILING: set = set()


@pytest.fixture(autouse=True)
def _known_failing(request):
    params = getattr(request.node, "callspec", None)
    params = params.params if params else {}
    key = (request.function.__name__, params.get("paper"), params.get("claim_id"))
    if key in KNOWN_FAILING:
        request.applymarker(pytest.mark.xfail(strict=True, reason="known bug (see KNOWN_FAILING)"))


def _claim_ids(papers):
    return [c.id for p in papers for c in claims(p)]


def _verdict(claim_id: str, tables: dict):
    (r,) = check_claims([get_claim(claim_id)], tables)
    return r["verdict"], r["detail"]


def _apply(tables: dict, changes) -> dict:
    out = dict(tables)
    for aid, where, mean in changes:
        out[aid] = set_mean(out[aid], where, mean)
    return out


@pytest.fixture(scope="module", params=MODES)
def paper(request):
    """The papers' tables with synthetic per-seed values ("paired") or without them ("unpaired")."""
    t = paper_tables()
    return t if request.param == "paired" else {a: x.drop(columns=["per_seed"]) for a, x in t.items()}


def _committed(profile: str) -> dict:
    """Our committed tables of one profile, read from the repository's figures/ (the test session
    points FEDPAPER_FIGURES at an empty folder)."""
    root = FIGURES / "long" if profile == "long" else FIGURES
    out = {}
    for p in PAPERS:
        for f in sorted((root / p).glob("*.csv")):
            out[f"{p}/{f.stem}"] = pd.read_csv(f)
    return out


# --------------------------------------------------------------------------------- coverage
def test_every_claim_of_a_paper_with_reported_numbers_has_an_expected_verdict():
    assert set(EXPECTED) == set(_claim_ids(REPORTED_PAPERS))


def test_every_claim_the_paper_supports_has_an_altered_input():
    supported = {c for c, v in EXPECTED.items() if v in (PASS, NOISE, PARTIAL)} - ON_CODE
    assert supported <= set(ALTERED), sorted(supported - set(ALTERED))
    assert {c for c, v in EXPECTED.items() if v == FAIL} <= set(REPAIRED)


# --------------------------------------------------------------------------------- verdicts
@pytest.mark.parametrize("claim_id", sorted(EXPECTED))
def test_verdict_on_the_papers_own_numbers(claim_id, paper):
    mode = "paired" if any("per_seed" in t for t in paper.values()) else "unpaired"
    verdict, detail = _verdict(claim_id, paper)
    assert verdict == expected(claim_id, mode), detail
    assert not detail.startswith("check raised"), detail


@pytest.mark.parametrize("claim_id", sorted(ALTERED))
def test_numbers_altered_to_contradict_the_claim_fail(claim_id, paper):
    verdict, detail = _verdict(claim_id, _apply(paper, ALTERED[claim_id]))
    assert verdict == FAIL, detail


@pytest.mark.parametrize("claim_id", sorted(REPAIRED))
def test_a_contradicted_claim_passes_once_its_cells_are_repaired(claim_id, paper):
    verdict, detail = _verdict(claim_id, _apply(paper, REPAIRED[claim_id]))
    assert verdict == PASS, detail


# --------------------------------------------------------------------------------- row order
@pytest.mark.parametrize("claim_id", _claim_ids(REPORTED_PAPERS))
def test_shuffled_rows_change_no_verdict_on_the_papers_numbers(claim_id, paper):
    base = _verdict(claim_id, paper)[0]
    for seed in (1, 2, 3):
        assert _verdict(claim_id, shuffled(paper, seed))[0] == base, f"row order {seed} changes {claim_id}"


@pytest.fixture(scope="module", params=["quick", "long"])
def committed(request):
    return _committed(request.param)


@pytest.mark.parametrize("claim_id", _claim_ids(PAPERS))
def test_shuffled_rows_change_no_verdict_on_our_committed_numbers(claim_id, committed):
    base = _verdict(claim_id, committed)[0]
    for seed in (1, 2):
        assert _verdict(claim_id, shuffled(committed, seed))[0] == base, f"row order {seed} changes {claim_id}"


# --------------------------------------------------------------------------------- seed syntheses
# Per-seed offsets with the reported mean and std but other shapes: evenly spaced, most seeds above the
# mean with one far below, most below with one far above; common to every cell of a row (the
# converter's pairing) or rolled by method (another pairing).
SHAPES = {"even": lambda n: np.linspace(-1.0, 1.0, n),
          "most high": lambda n: np.r_[-3.0, np.linspace(0.2, 1.0, n - 1)],
          "most low": lambda n: -np.r_[-3.0, np.linspace(0.2, 1.0, n - 1)]}
T1_METHODS = ("FedPALS", "FedAvg", "FedProx", "SCAFFOLD", "AFL", "FedRS", "Oracle")


def _offsets(shape: str, rolled: bool):
    def z(n, row):
        v = standardised(SHAPES[shape](n))
        return np.roll(v, T1_METHODS.index(row["method"])) if rolled else v
    return z


@pytest.mark.parametrize("rolled", [False, True], ids=["common offsets", "rolled by method"])
@pytest.mark.parametrize("claim_id", ["fedpals/claim-3", "fedpals/claim-4"])
def test_claims_3_4_one_verdict_for_every_seed_synthesis_of_the_papers_numbers(claim_id, rolled):
    """The paper's CIFAR-10 C=2 FedAvg (46.7 +- 15.8 over 8 seeds, one-class score 50) is at chance
    for some syntheses of its seeds and not for others; the verdict does not depend on which (a loser
    at chance counts for the claim, CONTEST_RULE)."""
    from fedpaper.claims import at_chance, cell, chance_level

    verdicts, low = {}, set()
    for shape in SHAPES:
        t = synthesised("fedpals/table1", _offsets(shape, rolled))
        fedavg = cell(t, dataset="CIFAR-10", label_split="C=2", method="FedAvg", metric="accuracy_pct")
        low.add(bool(at_chance({"FedAvg": fedavg}, chance_level("C=2"))))
        verdicts[shape] = _verdict(claim_id, {"fedpals/table1": t})[0]
    assert low == {True, False}  # the syntheses cover FedAvg at chance and above it
    assert len(set(verdicts.values())) == 1, verdicts
    if not rolled:
        assert set(verdicts.values()) == {PASS}


# --------------------------------------------------------------------------------- the converter
def test_synthetic_seeds_reproduce_the_reported_mean_and_std():
    import numpy as np

    from fedpaper.claims import parse_per_seed as parse_seeds

    paper = paper_tables()
    t = paper["fedpals/table1"]
    for _, r in t.iterrows():
        s = np.array(parse_seeds(r["per_seed"]))
        assert len(s) == r["n_seeds"] and abs(s.mean() - r["mean"]) < 1e-5 and abs(s.std(ddof=1) - r["std"]) < 1e-5
    t = set_mean(paper["fedmt/table2"], {"method": "Single", "n": 5}, 1.0)
    assert t.loc[(t.method == "Single") & (t.n == 5), "mean"].tolist() == [1.0]
    with pytest.raises(KeyError):
        set_mean(t, {"method": "no such method"}, 1.0)
