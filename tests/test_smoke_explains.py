"""A notebook at its smoke defaults explains its run without blaming absent data for what the smoke
profile does not run: its run specs name no missing data set when none is missing, and its claims
give no "data or weights absent" cause for a row the profile leaves out."""
import pytest

from fedpaper.claims.causes import diagnose
from fedpaper.claims.verdicts import ABSENT, NOT_CHECKABLE, UNTESTED_AT_SCALE, Cause, Verdict
from fedpaper.claims.catalog import Claim


@pytest.fixture(scope="module")
def smoke_table1(tmp_path_factory):
    import os

    from fedpaper.notebook import run
    from fedpaper.papers.fedpals import table1

    tmp = tmp_path_factory.mktemp("smoke")
    old = {k: os.environ.get(k) for k in ("FEDPAPER_CACHE", "FEDPAPER_FIGURES")}
    os.environ.update(FEDPAPER_CACHE=str(tmp / "cache"), FEDPAPER_FIGURES=str(tmp / "figures"))
    try:
        yield run(table1, profile="smoke")
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def test_smoke_run_specs_name_no_missing_data_when_none_is_missing(smoke_table1):
    from fedpaper.notebook import run_specs

    rec = smoke_table1.provenance
    assert rec["missing_datasets"] == []
    lines, _ = run_specs(smoke_table1)
    assert not [ln for ln in lines if "missing" in ln], lines
    assert any("PACS row not run at the smoke profile" in ln for ln in lines), lines


def test_smoke_claims_blame_no_absent_data_for_rows_the_profile_does_not_run(smoke_table1):
    from fedpaper.report import artifact_claims

    rec = smoke_table1.provenance
    results = artifact_claims("fedpals/table1", smoke_table1.table, rec, "smoke")
    causes = [c for r in results for c in r["causes"]]
    assert not [str(c) for c in causes if c.kind == ABSENT and "no row" in c.evidence], causes
    assert [c for c in causes if c.kind == UNTESTED_AT_SCALE and "smoke profile does not run it" in c.evidence]


def test_a_row_missing_from_a_committed_profile_stays_absent_data():
    claim = Claim("p/claim-1", "a claim", ["p/table1"])
    verdict = Verdict(NOT_CHECKABLE, "not checkable: no row dataset=X", (Cause(ABSENT, "no row dataset=X"),))
    at = {p: diagnose(claim, verdict, {"p/table1": {"profile": p}}, {}, {}) for p in ("smoke", "quick")}
    assert at["quick"] == (Cause(ABSENT, "no row dataset=X"),)
    assert at["smoke"] == (Cause(UNTESTED_AT_SCALE, "the smoke profile does not run it (no row dataset=X)"),)
