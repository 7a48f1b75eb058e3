"""The causes of a non-pass verdict, chosen by code at report time.

A check attaches the causes it can see itself (models at chance, within seed noise, data
absent). For a FAIL (or a verdict within noise) :func:`diagnose` adds, in this order:

1. "the paper's own numbers contradict the claim": the same check run on the paper's reported
   table(s) (fedpaper/claims/reported/, :func:`reported_tables`) fails too ("within seed noise:
   the paper's own numbers are within noise too" where it is within noise there);
2. "a setting differs from the paper's": the artifacts' provenance json records how the run
   differs from the paper (its notes that name a shrinkage or a replacement, a lossy data copy,
   data sets it was made without), quoted from the provenance, each distinct difference once
   across the claim's artifacts (:func:`setting_differences`);
3. "compute-limited" / "not compute-limited": the claim's rows of a committed compute ladder
   (`<paper>/scaling`; `ladder_trends` reads them) say whether its margin (or the
   gap to the paper) narrows as compute grows: compute-limited when one of its quantities narrows
   (slope and its SE per decade of compute, and the projection to the paper's compute where the
   trend is clear), not compute-limited when all are flat or widening; a verdict within noise gets
   it too;
4. "untested at this scale": the run is of a shrunk profile but its provenance names no
   difference and no compute ladder covers the claim;
5. "ours disagree at the paper's setting": nothing above applies.

No string here holds a digit: every number comes from the data (tests/papers/test_claims_toolkit.py).
"""
from __future__ import annotations

import re

from fedpaper.claims.catalog import load_reported, reported_path

from fedpaper.claims.registry import as_verdict
from fedpaper.claims.scaling import NARROWING, TOO_FEW, read_trends
from fedpaper.claims.verdicts import (
    ABSENT,
    AT_PAPER_SETTING,
    COMPUTE_LIMITED,
    FAIL,
    NOISE,
    NOT_CHECKABLE,
    NOT_COMPUTE_LIMITED,
    PAPER_CONTRADICTS,
    PASS,
    SETTING_DIFFERS,
    UNTESTED_AT_SCALE,
    WITHIN_NOISE,
    Cause,
    Verdict,
)

# A provenance note that names a difference from the paper's setting.
DIFFERS = re.compile(r"instead of|\(paper|paper:|not the paper|of the paper's|shrunk|capped|keeps|"
                     r"not available offline|absent offline|not in the offline copy|not regenerated|only at",
                     re.IGNORECASE)
# A provenance note that restates a claim (written by the sweep), not a setting.
CLAIM_NOTE = re.compile(r"^paper claim not reproduced", re.IGNORECASE)


def setting_notes(rec: dict) -> list:
    """The differences from the paper's setting that a provenance record names."""
    rec = rec or {}
    notes = [n for n in rec.get("notes") or [] if not CLAIM_NOTE.match(n) and DIFFERS.search(n)]
    if rec.get("lossy_datasets"):
        notes.append("lossy copy of " + ", ".join(rec["lossy_datasets"]))
    if rec.get("missing_datasets"):
        notes.append("made without " + ", ".join(rec["missing_datasets"]))
    return notes


def setting_differences(recs: dict) -> str:
    """Each distinct difference from the paper's setting that the provenance records {artifact id:
    record} name, once: "<artifacts>: <differences>", notes that share a lead ("long profile: ...")
    under it once, a note that only some of the artifacts record followed by their ids; '' if none."""
    where: dict = {}
    for a, r in recs.items():
        for n in setting_notes(r):
            where.setdefault(n, []).append(a)
    noted = list(dict.fromkeys(a for ids in where.values() for a in ids))
    if not where:
        return ""

    def tagged(text: str, n: str) -> str:
        return text if len(where[n]) == len(noted) else f"{text} (only {', '.join(where[n])})"

    leads: dict = {}
    for n in where:
        lead, sep, rest = n.partition(": ")
        leads.setdefault(lead if sep else n, []).append((n, rest if sep else ""))
    groups = []
    for lead, items in leads.items():
        if len(items) == 1:
            groups.append(tagged(items[0][0], items[0][0]))
        else:
            groups.append(lead + ": " + "; ".join(tagged(rest, n) for n, rest in items))
    return ", ".join(noted) + ": " + " | ".join(groups)


def reported_tables(artifact_ids) -> dict:
    """{artifact id: the paper's reported numbers as a DataFrame} for the artifacts that have them
    (the hook for "the paper's own numbers contradict the claim"; tests may pass richer
    conversions, e.g. with per-seed values synthesised from mean and std)."""
    out = {}
    for a in artifact_ids:
        p = reported_path(a)
        if p is not None and p.is_file():
            out[a] = load_reported(a)
    return out


def on_reported(claim, reported: dict):
    """The claim's check run on the paper's own tables: a Verdict, or None when the paper has no
    numbers for it (or the check cannot read them)."""
    tabs = {a: reported[a] for a in claim.artifacts if a in reported}
    if claim.check is None or not tabs:
        return None
    try:
        v = as_verdict(claim.check(tabs))
    except Exception:  # the reported table lacks what the check reads: no verdict on it
        return None
    return None if v.verdict == NOT_CHECKABLE else v


def ladder_trends(tables) -> dict:
    """{claim id: [scaling.Trend]} from committed ladder tables (DataFrames of `<paper>/scaling`
    csvs; a quantity names its claims in its `claim` column, separated by ';')."""
    out: dict = {}
    for t in tables:
        for tr in read_trends(t):
            for cid in filter(None, tr.claim.split(";")):
                out.setdefault(cid.strip(), []).append(tr)
    return out


def ladder_cause(trends) -> Cause | None:
    """"compute-limited" when a quantity of the claim narrows along the ladder, "not
    compute-limited" when every classified one is flat or widening, None without a classified trend."""
    known = [t for t in trends or () if t.trend != TOO_FEW]
    if not known:
        return None
    narrowing = [t for t in known if t.trend == NARROWING]
    kind = COMPUTE_LIMITED if narrowing else NOT_COMPUTE_LIMITED
    return Cause(kind, "compute ladder: " + "; ".join(t.text() for t in (narrowing or known)))


def smoke_only(claim, provenance: dict) -> bool:
    """True when every artifact of the claim is a smoke run here (a notebook at its smoke defaults): its
    tables hold only the rows the smoke profile runs, on stand-in data, so a row it lacks is not data absent."""
    recs = [provenance.get(a) for a in claim.artifacts]
    return bool(recs) and all(r and r.get("profile") == "smoke" for r in recs)


def not_run_at_smoke(cause: Cause) -> Cause:
    """A "data or weights absent" cause for a row a smoke run lacks, as what it is: not run at that scale."""
    if cause.kind == ABSENT and cause.evidence.startswith("no row "):
        return Cause(UNTESTED_AT_SCALE, f"the smoke profile does not run it ({cause.evidence})")
    return cause


def diagnose(claim, result: Verdict, provenance: dict, reported: dict, missing_datasets: dict,
             ladder: dict | None = None) -> tuple:
    """Causes for `result` of `claim`: those the check found, plus the report-time ones above.
    provenance: {artifact id: provenance record}; reported: {artifact id: paper's table};
    missing_datasets: {artifact id without committed results: [data sets it needs]} (never what one
    machine lacks: the report is the same wherever it is made); ladder: {claim id: [Trend]}
    (`ladder_trends` of the committed `<paper>/scaling` tables)."""
    if result.verdict == PASS:
        return ()
    causes = [not_run_at_smoke(c) for c in result.causes] if smoke_only(claim, provenance) else list(result.causes)
    if result.verdict == NOT_CHECKABLE:
        absent = [a for a in claim.artifacts if a not in provenance]
        miss = sorted({d for a in claim.artifacts for d in missing_datasets.get(a, [])})
        where = f" (it needs the data sets {', '.join(miss)})" if miss else ""
        if not causes and absent:
            causes.append(Cause(ABSENT, "no committed results for " + ", ".join(absent) + where))
        elif where:
            causes = [Cause(c.kind, c.evidence + where) if c.kind == ABSENT else c for c in causes]
        return tuple(dict.fromkeys(causes))
    if result.verdict not in (FAIL, WITHIN_NOISE):
        return tuple(causes)
    theirs = on_reported(claim, reported)
    if theirs is not None and theirs.verdict == FAIL:
        causes.insert(0, Cause(PAPER_CONTRADICTS, f"on the paper's numbers the check fails too: {theirs.detail}",
                               brief="the paper's own numbers fail the check too"))
    elif theirs is not None and theirs.verdict == WITHIN_NOISE:
        causes.insert(0, Cause(NOISE, f"the paper's own numbers are within noise too: {theirs.detail}",
                               brief="the paper's own numbers are within noise too"))
    scale = ladder_cause((ladder or {}).get(claim.id))
    if result.verdict == FAIL and not causes:
        recs = {a: provenance[a] for a in claim.artifacts if a in provenance}
        shrunk = [f"{a} ran at the {r.get('profile')} profile" for a, r in recs.items()
                  if r.get("profile") not in (None, "paper")]
        differences = setting_differences(recs)
        if differences:
            causes.append(Cause(SETTING_DIFFERS, differences))
        elif shrunk:
            if scale is None:
                causes.append(Cause(UNTESTED_AT_SCALE, "; ".join(shrunk) + ", whose provenance names no "
                                    "difference from the paper's setting; no compute ladder yet"))
        else:
            causes.append(Cause(AT_PAPER_SETTING, "the provenance of " + ", ".join(recs)
                                + " names no difference from the paper's setting"))
    if scale is not None:
        causes.append(scale)
    return tuple(dict.fromkeys(causes))
