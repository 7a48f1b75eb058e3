"""The reproduction report, figures/REPORT.md, and the artifact status table of README.md.

Everything is computed from OUR committed files (figures/<paper>/<name>.csv and .json), the
papers' reported numbers (fedpaper/claims/reported/) and the claims the paper modules register.
It works with zero artifacts generated (a fresh clone without data). The output is deterministic
(no timestamps), so regenerating it without new results changes nothing.

REPORT.md opens with a summary that fits one screen (`summary_section`): per paper and profile a
scorecard of the verdicts, a PNG per paper of our means against the paper's (`summary_png`, written
beside the report under summary/, deterministic bytes) and, folded per paper, one line per claim
(`claim_line`: verdict, the claim in a few words, the number that decides it, its cause; within
noise, the seeds that would decide it). Below it every claim's full evidence, the comparison tables
and the provenance are folded in <details> blocks, closed in GitHub and JupyterLab.

Section 1b (`scale_section`), per table committed at the paper profile with reported numbers: per
cell, whether the paper's mean lies inside our seeds' range and whether ours - paper is outside the
paper's seed noise (the claims' rule, noise.beats), and for each such cell and each diverged seed the
factors measured by controlled runs, read from the table's causes json (`causes_path`,
`measured_causes`), or "no measured cause"; a figure of its cells (`summary_png`) beside the report.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
from pathlib import Path
from typing import Optional

import pandas as pd

from fedpaper.runs import provenance as prov
from fedpaper.outputs.artifacts import claim_tables, committed_paths, committed_paths as _paths, load_committed, profile_figures_dir
from fedpaper.claims import CAUSES, CHANCE_RULE, CONTEST_RULE, NOISE_RULE, Verdict, check_claims
from fedpaper.claims.scaling import slope_text
from fedpaper.claims.causes import diagnose, ladder_trends, reported_tables
from fedpaper.claims.noise import beats
from fedpaper.claims.rows import cell_of, norm, parse_per_seed
from fedpaper.outputs.registry import (
    LADDERS,
    PAPER_TITLES,
    PAPERS,
    Claim,  # noqa: F401  (exported here too)
    all_artifacts,
    artifact,
    claims as registered_claims,
    dataset_available,
    how_to_get,
    load_reported,
    missing_message,
    not_implemented_reason,
)
from fedpaper.ground.paths import REPO_ROOT, cache_dir, data_root as _data_root, figures_dir
from fedpaper.ground.files import atomic_write_bytes, atomic_write_text
from fedpaper.claims.scaling import read_trends

STATUS_START = "<!-- artifact-status:start -->"
STATUS_END = "<!-- artifact-status:end -->"
VALUE_COLUMNS = ("mean", "std", "n_seeds", "ci_low", "ci_high", "source", "sem")
# Columns that say how big a run was, not which setting it is: a shrunk profile differs from the
# paper there by design, so rows are not joined on them (the report names our values instead).
SCALE_COLUMNS = ("N_c", "backbone")

__all__ = ["Claim", "write_report", "render_report", "status_rows", "compare_with_reported",
           "diagnose_claims", "update_readme", "readme_path", "artifact_claims",
           "verdict_line", "missing_here_lines"]


def readme_path() -> Path:
    """README.md of the repo (FEDPAPER_README overrides, so tests never touch the real one)."""
    return Path(os.environ.get("FEDPAPER_README", REPO_ROOT / "README.md"))


# ------------------------------------------------------------------------------------ status
def _shown(needs) -> str:
    return ", ".join(d.replace(":labels", " (labels)") for d in needs)


def status_rows(data_root=None, paper: Optional[str] = None, ladders: bool = True) -> list[dict]:
    """One dict per artifact: id, kind, title, data, implemented, committed, status, reason, missing, here.

    `status`, `data` and `reason` come from the committed results, their provenance and the
    catalog only, never from this machine: the README table and REPORT.md are the same wherever
    they are made. What this machine lacks is in `missing` (the data sets absent
    under `data_root`) and `here` (one clause on what that means for the artifact here, '' if
    nothing), for the terminal (`fedpaper list`, `missing_here_lines`). ladders: with the compute
    ladders (`fedpaper list`); REPORT.md and the README table count the TARGETS artifacts only."""
    root = _data_root(data_root)
    rows = []
    for art in all_artifacts(paper, ladders=ladders):
        missing = [d for d in art.needed if not dataset_available(d, root)]
        _, rec = load_committed(art.id) if committed_paths(art.id)["json"].is_file() else (None, None)
        has_csv = committed_paths(art.id)["csv"].is_file()
        data = "none" if not art.needed else _shown(art.needed)
        reason = ""
        here = ""
        explored = (rec or {}).get("exploration")
        if has_csv and explored:  # never scored: its parameters are not the profile's
            has_csv = False
            changed = ", ".join(f"{k}={v}" for k, v in (explored.get("changes") or {}).items())
            status = (f"not scored: figures/ holds an exploration run ({changed}); regenerate it with "
                      "`fedpaper reproduce` to score it")
            reason = status
        elif has_csv:
            profile = (rec or {}).get("profile", "?")
            status = f"regenerated ({profile})"
            if (rec or {}).get("synthetic"):
                status += ", SYNTHETIC data"
            stale = prov.staleness(rec or {})  # made by other code than this checkout's
            if stale:
                status += f"; {stale}"
            left_out = list((rec or {}).get("missing_datasets") or [])
            if left_out:  # regenerated without them: nothing of theirs committed
                status += f"; made without {_shown(left_out)}: no results for it"
            if [d for d in missing if d not in left_out]:
                here = f"{_shown(missing)} missing here: re-rendered from committed results"
        else:
            status = ("not regenerated: " + not_implemented_reason(art.id) if art.notebook is None
                      else "not regenerated: no committed results")
            if missing:
                reason = missing_message(missing[0], root)
                here = f"data missing here: {_shown(missing)}"
        rows.append({"id": art.id, "paper": art.paper, "kind": art.kind, "title": art.title,
                     "data": data, "missing": missing, "here": here, "implemented": art.notebook is not None,
                     "notebook": art.notebook, "committed": has_csv, "provenance": rec,
                     "status": status, "reason": reason, "reported": art.reported})
    return rows


def missing_here_lines(rows: list[dict]) -> list[str]:
    """For the terminal only (never REPORT.md or README.md): which data sets this machine lacks,
    which artifacts can therefore only be re-rendered from their committed results or not be made
    at all, and how to get each data set; empty when nothing is missing."""
    missing = sorted({d for r in rows for d in r["missing"]})
    if not missing:
        return []
    rerendered = [r["id"] for r in rows if r["here"] and r["committed"]]
    blocked = [r["id"] for r in rows if r["here"] and not r["committed"]]
    lines = [f"here: data sets missing on this machine: {_shown(missing)}"]
    if rerendered:
        lines.append(f"here: {len(rerendered)} committed artifacts can only be re-rendered here, not regenerated: "
                     + ", ".join(rerendered))
    if blocked:
        lines.append(f"here: {len(blocked)} artifacts without committed results cannot be made here: " + ", ".join(blocked))
    lines += [f"here: to get {how_to_get(d)}" for d in missing]
    return lines


def _md_escape(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def status_table(rows: list[dict], link_prefix: str = "") -> str:
    lines = ["| artifact | kind | data sets | status |", "|---|---|---|---|"]
    for r in rows:
        aid = f"[`{r['id']}`]({link_prefix}{r['notebook']})" if r["notebook"] else f"`{r['id']}`"
        lines.append(f"| {aid} | {r['kind']} | {_md_escape(r['data'])} | {_md_escape(r['status'])} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ comparisons
# Join keys compare in the claims toolkit's normal form (10, 10.0 and '10' agree; NaN and '' agree).
_norm = norm


def _fmt(mean, std=None) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    s = f"{float(mean):.2f}"
    if std is not None and not (isinstance(std, float) and math.isnan(std)):
        s += f" ± {float(std):.2f}"
    return s


def compare_with_reported(reported: pd.DataFrame, ours: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Side-by-side frame: key columns, paper, ours, difference (ours - paper). Also the join keys.

    Keys are the columns both tables share other than the value columns (mean, std, n_seeds, ...)
    and the scale columns (SCALE_COLUMNS: images per client, backbone)."""
    keys = [c for c in reported.columns
            if c in ours.columns and c not in VALUE_COLUMNS and c not in SCALE_COLUMNS]
    if "mean" not in ours.columns or not keys:
        return pd.DataFrame(), keys
    rep = reported.copy()
    our = ours.copy()
    for c in keys:
        rep["_k_" + c] = rep[c].map(_norm)
        our["_k_" + c] = our[c].map(_norm)
    kk = ["_k_" + c for c in keys]
    our_cols = kk + ["mean"] + (["std"] if "std" in our.columns else [])
    our = our[our_cols].drop_duplicates(subset=kk, keep="last")
    merged = rep.merge(our, on=kk, how="left", suffixes=("_paper", "_ours"))
    out = merged[keys].copy()
    out["paper"] = [_fmt(m, s) for m, s in zip(merged["mean_paper"], merged.get("std_paper", [None] * len(merged)))]
    std_ours = merged["std_ours"] if "std_ours" in merged.columns else [None] * len(merged)
    out["ours"] = [_fmt(m, s) for m, s in zip(merged["mean_ours"], std_ours)]
    diff = pd.to_numeric(merged["mean_ours"], errors="coerce") - pd.to_numeric(merged["mean_paper"], errors="coerce")
    out["difference"] = [("–" if math.isnan(d) else f"{d:+.2f}") for d in diff]
    return out, keys


def _scale_note(reported: pd.DataFrame, ours: pd.DataFrame) -> str:
    """' Not joined on N_c (ours 400; paper 4000), ...' for the scale columns the two tables share."""
    def values(t: pd.DataFrame, c: str) -> str:
        return ", ".join(map(str, dict.fromkeys(t[c].dropna())))

    parts = [f"{c} (ours {values(ours, c)}; paper {values(reported, c)})"
             for c in SCALE_COLUMNS if c in reported.columns and c in ours.columns]
    return (" Not joined on the run's scale: " + "; ".join(parts) + ".") if parts else ""


def _seed_key(t: pd.DataFrame, keys: list) -> dict:
    """{normalised key tuple: the cell's per-seed values (or mean and std without them)} of `t`."""
    vals = t["per_seed"].astype(str) if "per_seed" in t.columns else (
        t["mean"].astype(str) + "|" + (t["std"].astype(str) if "std" in t.columns else ""))
    return {tuple(_norm(v) for v in k): s for k, s in zip(t[keys].itertuples(index=False), vals)}


def _params_differ(a: Optional[dict], b: Optional[dict]) -> str:
    """'key (quick X; long Y), ...' over the run parameters two provenance records disagree on."""
    pa, pb = (a or {}).get("params") or {}, (b or {}).get("params") or {}
    keys = [k for k in dict.fromkeys([*pa, *pb]) if k not in ("profile", "notes") and pa.get(k) != pb.get(k)]

    def short(v):
        t = str(v)
        return t if len(t) <= 40 else t[:37] + "..."
    return ", ".join(f"{k} (quick {short(pa.get(k))}; {(b or {}).get('profile', '?')} {short(pb.get(k))})" for k in keys)


def _with_quick_column(cmp: pd.DataFrame, reported: pd.DataFrame, artifact_id: str, shown: str, ours: pd.DataFrame,
                       keys: list):
    """Where the compared results are of a more faithful profile than quick and quick results are
    committed too, add them as a column `ours (quick)`. A cell whose per-seed values are the same
    in both profiles is the same runs, not a smaller run: the column says "same runs" there and
    the note counts them, so only the other cells compare scales."""
    if shown == "quick":
        return cmp, ""
    quick, qrec = load_committed(artifact_id, "quick")
    if quick is None:
        return cmp, ""
    q, _ = compare_with_reported(reported, quick)
    if q.empty or len(q) != len(cmp) or not set(keys) <= set(quick.columns):
        return cmp, ""
    _, rec = load_committed(artifact_id)
    ql, ll = _seed_key(quick, keys), _seed_key(ours, keys)
    row_keys = [tuple(_norm(v) for v in k) for k in cmp[keys].itertuples(index=False)]
    both = [k in ql and k in ll for k in row_keys]
    same = [b and ql[k] == ll[k] for k, b in zip(row_keys, both)]
    cmp = cmp.copy()
    cmp.insert(cmp.columns.get_loc("difference") + 1, "ours (quick)",
               ["same runs" if sm else v for sm, v in zip(same, q["ours"].values)])
    n_same, n_both = sum(same), sum(both)
    if n_same:
        note = (f" The quick-profile results (figures/) are shown as `ours (quick)`: {n_same} of {n_both} cells "
                f"present in both are the same runs (identical per-seed values), marked \"same runs\", so they "
                f"say nothing about scale; only the other {n_both - n_same} compare the profiles.")
    else:
        note = (f" The quick-profile results (figures/) are shown as `ours (quick)`: none of the {n_both} cells "
                "present in both has the same per-seed values, so they compare the profiles.")
    differ = _params_differ(qrec, rec)
    if differ:
        note += f" The two provenance records differ in: {differ}."
    return cmp, note


def _frame_to_md(df: pd.DataFrame, drop_constant: bool = True) -> tuple[str, str]:
    """Markdown table (constant columns moved into a one-line note)."""
    note = ""
    if drop_constant and len(df) > 1:
        const = [c for c in df.columns if c not in ("paper", "ours", "difference", "ours (quick)")
                 and df[c].astype(str).nunique(dropna=False) == 1]
        if const:
            note = "; ".join(f"{c} = {_md_escape(df[c].iloc[0])}" for c in const)
            df = df.drop(columns=const)
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        vals = ["" if (isinstance(v, float) and math.isnan(v)) else _md_escape(_norm(v) if isinstance(v, float) else v)
                for v in row]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines), note


# ------------------------------------------------------------------------------------ claims
VERDICTS = ("pass", "within noise", "fail", "partial", "not testable", "not checkable")
VERDICT_MARKS = {"pass": "PASS", "within noise": "within noise", "fail": "FAIL", "partial": "partial",
                 "not testable": "not testable at this scale",
                 "not checkable": "not checkable"}


def diagnose_claims(results: list[dict], rows: list[dict]) -> list[dict]:
    """Fill each result's causes (claims.causes.diagnose) from the status rows: the
    provenance of every committed artifact, the data sets an artifact without committed results
    needs (never what this machine lacks: the report is the same wherever it is made), the papers'
    own tables."""
    prov_ = {r["id"]: r["provenance"] or {} for r in rows if r["committed"]}
    missing = {r["id"]: list(artifact(r["id"]).needed) for r in rows if not r["committed"]}
    reported = reported_tables([r["id"] for r in rows if r["reported"]])
    ladder = committed_ladder()
    for res in results:
        v = Verdict(res["verdict"], res["detail"], tuple(res["causes"]))
        res["causes"] = list(diagnose(res["claim"], v, prov_, reported, missing, ladder))
    return results


def ladder_section() -> list[str]:
    """REPORT.md's compute ladders, one table per committed `<paper>/scaling` csv: each
    quantity's trend, slope and its SE per decade of compute, and the projection to the paper's
    compute where the trend is clear. Nothing while no ladder is committed."""

    out = []
    for a in LADDERS:
        table, rec = load_committed(a)
        if table is None or (rec or {}).get("exploration") or (rec or {}).get("synthetic"):
            continue
        rows = [[t.quantity, ", ".join(f"`{c}`" for c in t.claim.split(";") if c) or "–", t.trend,
                 "–" if t.slope is None else slope_text(t.slope, t.se, decimals=2, pm="±"),
                 str(t.rungs),
                 f"not projected: {t.not_projected}" if t.not_projected else
                 "–" if t.projection is None else f"{t.projection:.3g} (projection)"] for t in read_trends(table)]
        md, _ = _frame_to_md(pd.DataFrame(rows, columns=["quantity", "claims", "trend", "slope per decade",
                                                         "rungs", "at the paper's compute"]), drop_constant=False)
        out += [f"### Compute ladder `{a}` ({(rec or {}).get('profile', '?')} profile)", "",
                _md_escape("; ".join(((rec or {}).get("notes") or [])[:2])), "", md, ""]
    return (["## Compute ladders", ""] + out) if out else []


def committed_ladder() -> dict:
    """{claim id: [Trend]} from the committed compute ladders (`<paper>/scaling` csvs, most
    faithful profile present; explorations never count)."""
    tables = []
    for a in LADDERS:
        table, rec = load_committed(a)
        if table is not None and not (rec or {}).get("exploration") and not (rec or {}).get("synthetic"):
            tables.append(table)
    return ladder_trends(tables)


def artifact_claims(artifact_id: str, table: pd.DataFrame, provenance: Optional[dict] = None,
                    profile: Optional[str] = None) -> list[dict]:
    """The registered claims about one artifact checked on `table` (other artifacts a claim needs:
    their committed csv, artifacts.claim_tables) with their computed causes, as in REPORT.md:
    what a notebook shows after its run (fedpaper.notebook.show_claims)."""

    claims_, tables = claim_tables(artifact_id, table, profile)
    results = check_claims(claims_, tables)
    ids = {a for c in claims_ for a in c.artifacts}
    prov_ = {a: load_committed(a)[1] or {} for a in ids if a != artifact_id and _paths(a)["csv"].is_file()}
    prov_[artifact_id] = provenance or {}
    missing = {a: list(artifact(a).needed) for a in ids if a not in prov_}
    reported = reported_tables([a for a in ids if artifact(a).reported])
    ladder = committed_ladder()
    for res in results:
        v = Verdict(res["verdict"], res["detail"], tuple(res["causes"]))
        res["causes"] = list(diagnose(res["claim"], v, prov_, reported, missing, ladder))
    return results


def verdict_line(result: dict) -> str:
    """'**FAIL** `id`: text — detail **Cause:** ...', one claim as REPORT.md writes it."""
    mark = VERDICT_MARKS[result["verdict"]] + (" (code)" if result["on_code"] else "")
    return (f"**{mark}** `{result['id']}`: {_md_escape(result['text'])} — {_md_escape(result['detail'])}"
            + _causes(result))


def _causes(result: dict) -> str:
    """' Cause: <kind>: <evidence>; ...' for a verdict other than pass ('' for a pass)."""
    if result["verdict"] == "pass":
        return ""
    text = "; ".join(str(c) for c in result.get("causes") or []) or "no cause found by code"
    return f" **Cause:** {_md_escape(text)}."


def claim_counts(results: list[dict]) -> str:
    """'On results: a pass, b within noise, c fail, ...; checked on code (no trained model): ...'."""
    def count(rs):
        return ", ".join(f"{sum(r['verdict'] == v for r in rs)} {v}" for v in VERDICTS)
    res = [r for r in results if not r["on_code"]]
    code = [r for r in results if r["on_code"]]
    text = f"On results: {count(res)}."
    if code:
        text += f" Checked on code (a formula or a data split, no trained model): {count(code)}."
    return text


RULES = [
    "How a verdict is decided (one rule for every paper, in `fedpaper/claims`):",
    "",
    f"- **Noise.** {NOISE_RULE}.",
    f"- **At chance.** {CHANCE_RULE}. A comparison whose models sit at chance is \"not testable at this "
    f"scale\": neither pass nor fail would test the claim. The comparative claims that name a winner (checked with `contest`) follow a second rule: {CONTEST_RULE}.",
    "- **partial**: an every-row claim holds in the rows we can test, other rows being not testable or not "
    "checkable. **not checkable**: its data are not here.",
    "- **Cause** of every verdict other than pass, chosen by code from one vocabulary (" + "; ".join(CAUSES)
    + "), its numbers read from the CSVs and provenance when this report is made: the check names models at "
    "chance, seed noise and absent data; a FAIL is explained, in this order, by the same check failing on the "
    "paper's own numbers, by the differences from the paper's setting its provenance records, or, with none, "
    "as untested at this scale or as a disagreement at the paper's setting.",
    "",
]


def _profiles_note(rows, paper: str) -> str:
    """' Computed from ... profile results' for a paper's committed artifacts (empty if none); a
    profile other than 'paper' is shrunk, so its verdicts speak for that scale only."""
    profs = sorted({(r["provenance"] or {}).get("profile", "?") for r in rows
                    if r["committed"] and r["id"].startswith(paper + "/")})
    if not profs:
        return ""
    where = {"quick": "figures/", "long": "figures/long/", "paper": "figures/paper/"}
    note = (f" Computed from the {', '.join(profs)}-profile results (in "
            + ", ".join(where.get(p, p) for p in profs) + "; per artifact the most faithful profile present)")
    if profs != ["paper"]:
        note += (" (shrunk from the paper's setting as each figure's subtitle and provenance say): a verdict "
                 "holds for that scale, not for the paper's")
    return note + "."


# ------------------------------------------------------------------------------------ summary
SUMMARY_DIR = "summary"  # beside REPORT.md: the PNGs of ours vs the paper's numbers
PROFILE_ORDER = ("paper", "long", "quick", "smoke")
SHORT_CLAIM = 72  # characters of a claim's text in its one-line form
SHORT_EVIDENCE = 150  # characters of the evidence (a cause's or a detail's) in a one-line form


def _html(s) -> str:
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _cut(text: str, limit: int) -> str:
    """`text` cut at a word boundary to at most `limit` characters ('…' marks a cut)."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:(")
    return cut + "…"


def short_claim(text: str) -> str:
    """A claim's text in a few words: its first sentence without the parenthesised asides that
    turn words into numbers ("(here: ...)", "(paper ...)"), cut at SHORT_CLAIM characters."""
    t = re.sub(r"\s*\((?:here|paper)\b[^()]*(?:\([^()]*\)[^()]*)*\)", "", str(text))
    t = re.split(r"(?<=[a-z0-9)%])\. ", t)[0].rstrip(". ")
    return _cut(t, SHORT_CLAIM)


def _noise_seeds(result: dict) -> str:
    """For a verdict within noise, how many seeds would decide it (the within-noise cause whose
    numbers decide the verdict, else the one needing most seeds); '' when no cause says."""
    noisy = [c for c in result.get("causes") or () if getattr(c, "seeds", None) is not None]
    if not noisy:
        return ""
    decides = result.get("decides") or ""
    own = [c for c in noisy if c.brief and c.brief in decides]
    pick = own[0] if own else max(noisy, key=lambda c: (c.seeds < 0, c.seeds))
    return pick.seeds_note


def claim_line(result: dict) -> str:
    """One claim in one line: its verdict, the claim in a few words, the number that decides it,
    its cause (and, within noise, how many seeds would decide it)."""
    v = result["verdict"]
    mark = VERDICT_MARKS[v] + (" (code)" if result["on_code"] else "")
    causes = [c for c in result.get("causes") or ()]
    number = result.get("decides") or ""
    if v in ("not testable", "not checkable") and causes:
        number = causes[0].brief or causes[0].evidence
    elif not number:
        number = result["detail"]
    text = _cut(number, SHORT_EVIDENCE)
    if v == "within noise":
        seeds = _noise_seeds(result)
        text += f"; {seeds}" if seeds else ""
    elif v not in ("pass", "not testable", "not checkable") and causes:
        text += " · " + "; ".join(dict.fromkeys(c.brief or c.kind for c in causes))
    return f"**{mark}** `{result['id']}` {_md_escape(short_claim(result['text']))} — {_md_escape(text)}"


def claim_details(result: dict) -> list[str]:
    """The claim's full evidence (verdict_line), folded under its one-line form."""
    mark = VERDICT_MARKS[result["verdict"]] + (" (code)" if result["on_code"] else "")
    head = f"<b>{_html(mark)}</b> <code>{_html(result['id'])}</code> {_html(short_claim(result['text']))}"
    return [f"<details><summary>{head}</summary>", "", "- " + verdict_line(result), "", "</details>"]


def _claim_profile(result: dict, profiles: dict) -> str:
    """The profile(s) of the committed results a claim is checked on ('code' for a check of a formula
    or a data split without results, 'none' without committed results)."""
    got = sorted({profiles[a] for a in result["artifacts"] if a in profiles},
                 key=lambda p: (PROFILE_ORDER.index(p) if p in PROFILE_ORDER else len(PROFILE_ORDER), p))
    if got:
        return "+".join(got)
    return "code" if result["on_code"] else "none"


def scorecard(results: list[dict], rows: list[dict]) -> list[str]:
    """Per paper and profile, how many claims got each verdict (a markdown table)."""
    profiles = {r["id"]: (r["provenance"] or {}).get("profile", "?") for r in rows if r["committed"]}
    lines = ["| paper | results of profile | " + " | ".join(VERDICTS) + " |", "|---|---|" + "---:|" * len(VERDICTS)]
    for paper in PAPERS:
        pr = [c for c in results if c["id"].startswith(paper + "/")]
        groups: dict = {}
        for c in pr:
            groups.setdefault(_claim_profile(c, profiles), []).append(c)
        for prof in sorted(groups, key=lambda p: (p in ("code", "none"), p == "none", p)):
            counts = [sum(c["verdict"] == v for c in groups[prof]) for v in VERDICTS]
            lines.append(f"| {paper} | {prof} | " + " | ".join(str(n) if n else "·" for n in counts) + " |")
    return lines


def matched_cells(reported: pd.DataFrame, ours: pd.DataFrame) -> pd.DataFrame:
    """Every cell of the paper's table that ours has (joined as compare_with_reported joins): columns
    paper, ours, low, high (our seeds' range; NaN without per-seed values)."""
    keys = [c for c in reported.columns if c in ours.columns and c not in VALUE_COLUMNS and c not in SCALE_COLUMNS]
    if "mean" not in ours.columns or not keys:
        return pd.DataFrame(columns=["paper", "ours", "low", "high"])
    rep, our = reported.copy(), ours.copy()
    kk = ["_k_" + c for c in keys]
    for c in keys:
        rep["_k_" + c] = rep[c].map(_norm)
        our["_k_" + c] = our[c].map(_norm)
    seeds = [parse_per_seed(v) for v in our["per_seed"]] if "per_seed" in our.columns else [()] * len(our)
    our["low"] = [min(s) if s and not any(math.isnan(x) for x in s) else math.nan for s in seeds]
    our["high"] = [max(s) if s and not any(math.isnan(x) for x in s) else math.nan for s in seeds]
    our = our[kk + ["mean", "low", "high"]].drop_duplicates(subset=kk, keep="last")
    m = rep[kk + ["mean"]].merge(our, on=kk, how="inner", suffixes=("_paper", "_ours"))
    out = pd.DataFrame({"paper": pd.to_numeric(m["mean_paper"], errors="coerce"),
                        "ours": pd.to_numeric(m["mean_ours"], errors="coerce"),
                        "low": m["low"].astype(float), "high": m["high"].astype(float)})
    return out.dropna(subset=["paper", "ours"]).reset_index(drop=True)


def paper_matches(paper: str, rows: list[dict], tables: dict) -> list[tuple]:
    """[(artifact id, its profile, matched_cells)] of a paper's committed artifacts with reported
    numbers and at least one matched cell, in catalogue order."""
    out = []
    for r in rows:
        if r["paper"] != paper or not r["reported"] or not r["committed"] or tables.get(r["id"]) is None:
            continue
        cells_ = matched_cells(load_reported(r["id"]), tables[r["id"]])
        if len(cells_):
            out.append((r["id"], (r["provenance"] or {}).get("profile", "?"), cells_))
    return out


def summary_png(paper: str, matches: list[tuple]) -> bytes:
    """The PNG of ours (y) against the paper's numbers (x), every matched cell, one colour per
    artifact, our seeds' range as a vertical bar, the diagonal dashed; deterministic bytes (Agg, no
    time stamp or software in the metadata)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # start-up time: matplotlib only when drawing
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2, 5.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    lo, hi = math.inf, -math.inf
    for i, (aid, prof, c) in enumerate(matches):
        colour = f"C{i % 10}"
        bars = c.dropna(subset=["low", "high"])
        ax.vlines(bars["paper"], bars["low"], bars["high"], colors=colour, alpha=0.45, linewidth=1.2)
        ax.scatter(c["paper"], c["ours"], s=16, color=colour, zorder=3,
                   label=f"{aid.split('/', 1)[1]} ({prof}, {len(c)} cells)")
        vals = [*c["paper"], *c["ours"], *bars["low"], *bars["high"]]
        lo, hi = min(lo, *vals), max(hi, *vals)
    pad = 0.04 * (hi - lo or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "k--", linewidth=0.8, label="ours = paper")
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_aspect("equal")
    ax.set_xlabel("the paper's mean")
    ax.set_ylabel("our mean (bar: our seeds' range)")
    profs = sorted({p for _, p, _ in matches})
    n = sum(len(c) for _, _, c in matches)
    ax.set_title(f"{paper}: ours ({', '.join(profs)} profile) vs the paper, {n} cells", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def write_summary_figures(folder: Path, rows: list[dict], tables: dict) -> dict:
    """{paper: path} of the summary PNGs written (atomically, only when the bytes change) under
    `folder` for the papers with matched cells."""
    out = {}
    for paper in PAPERS:
        matches = paper_matches(paper, rows, tables)
        if not matches:
            continue
        out[paper] = write_summary_figure(Path(folder) / f"{paper}.png", paper, matches)
    return out


def _under_figures(p: Path) -> str:
    """A committed file's path relative to the figures folder (the quick profile's), else as it is."""
    try:
        return p.relative_to(profile_figures_dir("quick")).as_posix()
    except ValueError:
        return p.as_posix()


def write_summary_figure(path: Path, paper: str, matches: list[tuple]) -> Path:
    """summary_png at `path`, with the cells it draws beside it (<name>.csv: artifact, profile, paper,
    ours, low, high) and what they were read from (<name>.json: each artifact's committed csv and the
    code version that made it); each file written atomically, only when its bytes change."""
    table = pd.concat([c.assign(artifact=aid, profile=prof)[["artifact", "profile", "paper", "ours", "low", "high"]]
                       for aid, prof, c in matches], ignore_index=True)
    sources = [{"artifact": aid, "profile": prof,
                "csv": _under_figures(committed_paths(aid, prof)["csv"]),
                "code_version": (load_committed(aid, prof)[1] or {}).get("code_version")} for aid, prof, _ in matches]
    record = {"made_by": "fedpaper report (report.summary_png)", "paper": paper,
              "what": "ours against the paper's numbers, every matched cell (reported numbers: "
                      "fedpaper/claims/reported/)", "sources": sources}
    for target, data in ((path, summary_png(paper, matches)),
                         (path.with_suffix(".csv"), table.to_csv(index=False).encode()),
                         (path.with_suffix(".json"), (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())):
        if not target.is_file() or target.read_bytes() != data:
            atomic_write_bytes(target, data)
    return path


def summary_section(results: list[dict], rows: list[dict], tables: dict) -> list[str]:
    """REPORT.md's first screen: the scorecard, the figures of ours vs the paper's numbers, and per
    paper its claims one line each (folded)."""
    out = ["## Summary", "",
           "Claims per paper and the profile of the committed results they are checked on (a claim on "
           "artifacts of two profiles counts under both, joined by +; code: a formula or a data split, no "
           "trained model; none: no committed results). Rules, evidence and causes: section 2.", ""]
    out += scorecard(results, rows) + [""]
    out += scale_summary_lines(rows)
    figs = [p for p in PAPERS if paper_matches(p, rows, tables)]
    if figs:
        out += ["Ours against the paper's numbers, every matched cell (bar: our seeds' range; dashed: ours = "
                "paper; per artifact the most faithful profile committed, named in the legend):", "",
                " ".join(f'<a href="{SUMMARY_DIR}/{p}.png"><img src="{SUMMARY_DIR}/{p}.png" width="24%" '
                         f'alt="{p}: ours vs the paper"></a>' for p in figs), ""]
        without = [p for p in PAPERS if p not in figs]
        if without:
            out += ["No figure for " + ", ".join(without) + ": no committed result meets a reported number.", ""]
    out += ["Each claim in one line: verdict, the claim, the number that decides it (a comparison: the "
            "difference, ± the noise rule's bound k SE, vs the bar), its cause; within noise, how many seeds "
            "would decide it if the difference and its seed spread held.", ""]
    for paper in PAPERS:
        pr = [c for c in results if c["id"].startswith(paper + "/")]
        if not pr:
            continue
        counts = ", ".join(f"{n} {v}" for v in VERDICTS if (n := sum(c["verdict"] == v for c in pr)))
        out += [f"<details><summary><b>{_html(paper)}</b>: {len(pr)} claims, {_html(counts)}</summary>", ""]
        out += ["- " + claim_line(c) for c in pr]
        out += ["", "</details>", ""]
    return out


# ------------------------------------------------------------------ paper-scale tables
#: the folder of the paper-scale tables' causes json, <paper>_<table>_causes.json (causes_path)
CAUSES_DIR = Path("benchmarks") / "results"
_SCALE_RE = re.compile(r"^\s*([A-Za-z0-9-]+?)(?:,|\s+(C=\d+|beta=[\d.]+))")


def paper_scale_rows(rows: list[dict]) -> list[dict]:
    """The status rows of artifacts committed at the paper profile (figures/paper/<paper>/<table>.csv)
    with reported numbers, in catalogue order."""
    return [r for r in rows if r["reported"] and committed_paths(r["id"], "paper")["csv"].is_file()]


def causes_path(artifact_id: str) -> Path:
    return CAUSES_DIR / (artifact_id.replace("/", "_") + "_causes.json")


def causes_record(artifact_id: str) -> Optional[dict]:
    """The measured causes of an artifact's gaps (causes_path, a benchmark's json), or None."""
    import json

    try:
        return json.loads((REPO_ROOT / causes_path(artifact_id)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _scale_of(section: dict) -> tuple:
    """(data set, label split) that a section's `scale` text opens with ('' where it names none)."""
    m = _SCALE_RE.match(str(section.get("scale", "")))
    return (m.group(1), m.group(2) or "") if m else ("", "")


def _mean(xs) -> float:
    xs = [float(x) for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else math.nan


def _toward(ours: float, paper: float, new: float) -> Optional[float]:
    """How much of |ours - paper| moving ours to `new` closes (> 0), or None when it does not."""
    closes = abs(ours - paper) - abs(new - paper)
    return closes if closes > max(0.5, 0.1 * abs(ours - paper)) else None


def _selection_cause(s: dict, key: dict, ours: float, paper: float) -> list[tuple]:
    out = []
    for c in s.get("cells", []):
        if (c.get("dataset"), c.get("label_split"), c.get("method")) != (key.get("dataset"), key.get("label_split"),
                                                                          key.get("method")):
            continue
        vals = {k[:-len("_per_seed")]: float(c[k[:-len("_per_seed")]]) for k in c
                if k.endswith("_per_seed") and k[:-len("_per_seed")] in c}
        if "best_val" not in vals or len(vals) < 2:
            continue
        best = min(vals, key=lambda r: abs(vals[r] - paper))
        closes = _toward(vals["best_val"], paper, vals[best])
        out.append((f"model selection: control best_val {vals['best_val']:.1f} -> "
                    + ", ".join(f"{r} {v:.1f}" for r, v in vals.items() if r != "best_val")
                    + (f"; {best} closes {closes:.1f} points of the gap to the paper" if closes else ""),
                    f"toward the paper: {closes:.1f}" if closes else None))
    return out


def _lr_cause(s: dict, key: dict, ours: float, paper: float) -> list[tuple]:
    runs = [r for r in s.get("runs", []) if r.get("method") == key.get("method") and "lr" in r]
    if not runs or _scale_of(s) != (key.get("dataset"), key.get("label_split")):
        return []
    lrs = sorted({r["lr"] for r in runs}, reverse=True)
    mean = {lr: _mean(r.get("best_val") for r in runs if r["lr"] == lr) for lr in lrs}
    div = {lr: sum(r.get("diverged_at") is not None for r in runs if r["lr"] == lr) for lr in lrs}
    n = {lr: sum(r["lr"] == lr for r in runs) for lr in lrs}
    closes = _toward(ours, paper, ours + mean[lrs[-1]] - mean[lrs[0]]) if len(lrs) > 1 else None
    finite = len(lrs) > 1 and div[lrs[0]] > 0 and div[lrs[-1]] == 0
    return [(f"{key['method']} learning rate: " + " -> ".join(
        f"lr {lr:g}: best_val {mean[lr]:.1f}, diverged {div[lr]} of {n[lr]}" for lr in lrs)
,
        "; ".join(x for x in ("the variant is finite" if finite else "",
                               f"toward the paper: {closes:.1f}" if closes else "") if x) or None)]


def _seeds_cause(s: dict, key: dict, ours: float, paper: float) -> list[tuple]:
    if _scale_of(s)[0] != key.get("dataset") or not isinstance(s.get("summary"), list):
        return []
    out = []
    for c in s["summary"]:
        if (c.get("label_split"), c.get("method")) != (key.get("label_split"), key.get("method")) or "seeds_0_2" not in c:
            continue
        (m3, s3), (m8, s8) = c["seeds_0_2"], c["seeds_0_7"]
        closes = _toward(ours, paper, ours + m8 - m3)
        out.append((f"seed draw ({c.get('rule')}): seeds 0-2 {m3:.1f} ± {s3:.1f} -> seeds 0-7 {m8:.1f} ± {s8:.1f} "
                    f"({m8 - m3:+.1f})", f"toward the paper: {closes:.1f}" if closes else None))
    return out


def _draw_cause(s: dict, key: dict, ours: float, paper: float, seeds: list) -> list[tuple]:
    rows_ = [r for r in s.get("rows", []) if "uncovered_target_labels" in r
             and (r.get("dataset"), r.get("label_split")) == (key.get("dataset"), key.get("label_split"))]
    bad = [r for r in rows_ if r["uncovered_target_labels"] and r.get("seed") not in seeds]
    if not bad:
        return []
    # such a seed caps the paper's mean (it has it, we do not) by an amount no run here measured
    return [("target label draw: the paper's seeds " + f"{min(r['seed'] for r in rows_)}-{max(r['seed'] for r in rows_)}"
             + " hold " + ", ".join(f"seed {r['seed']} (a target label no client holds: at most "
                                    f"{r['max_accuracy_if_uncovered_pct']:g}%)" for r in bad)
             + f", ours ({', '.join(map(str, seeds))}) none", None)]


def _diverge_cause(s: dict, key: dict, diverged: dict) -> list[tuple]:
    """A reproduced divergence (control: every client trained; variant: the section's factor)."""
    c, v = (s.get("control") or {}).get("run") or {}, (s.get("variant") or {}).get("run") or {}
    if (not c or not str(key.get("method", "")).startswith(str(c.get("method", "?")))
            or _scale_of(s) != (key.get("dataset"), key.get("label_split")) or c.get("seed") not in diverged):
        return []
    bad = [(r["round"], r["non_finite_clients"]) for r in (s["control"].get("rounds") or []) if r.get("non_finite_clients")]
    w = s.get("weights") or []
    who = (f"first non-finite update: round {bad[0][0]}, client(s) {bad[0][1]} of weight "
           + ", ".join(f"{w[i]:g}" for i in bad[0][1] if i < len(w))) if bad else "not reproduced: no non-finite update"
    what = str(s.get("factor", "")).split("variant: ")[-1]
    fixed = c.get("diverged_at") is not None and v.get("diverged_at") is None
    def at(run):
        return "did not diverge" if run.get("diverged_at") is None else f"diverged at {run['diverged_at']}"
    return [(f"divergence, seed {c['seed']}: control {at(c)} (best_val {_mean([c.get('best_val')]):.1f}) -> {what}: "
             f"{at(v)} (best_val {_mean([v.get('best_val')]):.1f}); {who}", "the variant is finite" if fixed else None)]


def _zero_weight_cause(s: dict, key: dict, diverged: dict) -> list[tuple]:
    runs = [r for r in s.get("runs", []) if "zero_weight_clients" in r and str(key.get("method", "")).startswith("FedPALS")
            and (r.get("dataset"), r.get("label_split")) == (key.get("dataset"), key.get("label_split"))
            and r.get("seed") in diverged and r.get("diverged_at") == diverged[r["seed"]]]
    if not runs:
        return []
    w, wo = s.get("diverged_with_zero_weight_clients"), s.get("diverged_without")
    return [("clients of weight 0 trained: " + ", ".join(f"seed {r['seed']} had {r['zero_weight_clients']}"
                                                       for r in sorted(runs, key=lambda r: r["seed"]))
             + (f" (archive: {w[0]} of {w[1]} runs with a weight-0 client diverged, {wo[0]} of {wo[1]} without)"
                if w and wo else ""),
             "divergence only with weight-0 clients" if all(r["zero_weight_clients"] for r in runs) and w and wo
             and not wo[0] else None)]


def measured_causes(record: Optional[dict], key: dict, ours: float, paper: float, seeds: list, diverged: dict,
                    divergence_only: bool = False) -> list[tuple]:
    """[(text, section, why)] for every measured factor of `record` (a causes json, one section
    per factor) that concerns the cell `key` (data set, label split, method): the control and variant
    numbers; why: how it explains the cell (the points of |ours - paper| the variant closes, a
    divergence the variant removes), None where it does not. divergence_only: only the factors of a
    diverged seed (`diverged` {seed: round})."""
    out = []
    for name in sorted(record or {}):
        s = record[name]
        if not isinstance(s, dict):
            continue
        found = []
        if diverged:
            found += _diverge_cause(s, key, diverged) + _zero_weight_cause(s, key, diverged)
            found += [x for x in _lr_cause(s, key, ours, paper) if divergence_only and x[1] is not None]
        if not divergence_only:
            found += (_selection_cause(s, key, ours, paper) + _lr_cause(s, key, ours, paper)
                      + _seeds_cause(s, key, ours, paper) + _draw_cause(s, key, ours, paper, seeds))
        out += [(text, name, why) for text, why in dict.fromkeys(found)]
    return out


def _diverged_seeds(text) -> dict:
    """{seed: round} from a table's `diverged` text ('seed 1 at round 126; ...')."""
    return {int(a): int(b) for a, b in re.findall(r"seed (\d+) at round (\d+)", str(text or ""))}


def scale_cells(artifact_id: str) -> list[dict]:
    """Per cell of the paper's table that our paper-profile table has: the key, the paper's and our
    Cells, our seed range, whether the paper's mean is inside it, the noise rule's verdict on
    ours - paper (noise.beats, unpaired against the paper's std and seed count: 'pass' ours above,
    'fail' below, 'within noise'), the diverged seeds and, for a cell outside the noise or with a
    diverged seed, its measured causes (measured_causes)."""
    reported = load_reported(artifact_id)
    ours, rec = load_committed(artifact_id, "paper")
    if reported is None or ours is None or "mean" not in ours.columns:
        return []
    keys = [c for c in reported.columns if c in ours.columns and c not in VALUE_COLUMNS and c not in SCALE_COLUMNS]
    seeds = [int(s) for s in (rec or {}).get("seeds") or []]
    record = causes_record(artifact_id)
    index = {tuple(_norm(r[c]) for c in keys): r for _, r in ours.iterrows()}
    out = []
    for _, rep in reported.iterrows():
        row = index.get(tuple(_norm(rep[c]) for c in keys))
        if row is None:
            continue
        mine, theirs = cell_of(row), cell_of(rep)
        if math.isnan(mine.mean) or math.isnan(theirs.mean):
            continue
        finite = [x for x in mine.seeds if not math.isnan(x)]
        lo, hi = (min(finite), max(finite)) if finite else (math.nan, math.nan)
        v = beats(mine, theirs, ("ours", "paper"))
        diverged = _diverged_seeds(row.get("diverged"))
        key = {c: str(rep[c]) for c in keys}
        outside = v.verdict != "within noise"
        causes = (measured_causes(record, key, mine.mean, theirs.mean, seeds, diverged, divergence_only=not outside)
                  if outside or diverged else [])
        out.append({"key": key, "paper": theirs, "ours": mine, "low": lo, "high": hi,
                    "inside": bool(finite) and lo <= theirs.mean <= hi, "verdict": v, "outside": outside,
                    "diverged": diverged, "causes": causes,
                    "explained": any(c[2] is not None for c in causes)})
    return out


def scale_png_name(artifact_id: str) -> str:
    """The figure of a paper-scale table, relative to REPORT.md's folder."""
    return f"{SUMMARY_DIR}/{artifact_id.replace('/', '-')}-paper.png"


def write_scale_figures(folder: Path, rows: list[dict]) -> list[Path]:
    """Per paper-scale table, summary_png of its cells alone (ours vs the paper, our seed range as a
    bar, the diagonal) at <folder>/scale_png_name; written atomically when the bytes change."""
    out = []
    for r in paper_scale_rows(rows):
        cells_ = matched_cells(load_reported(r["id"]), load_committed(r["id"], "paper")[0])
        if not len(cells_):
            continue
        out.append(write_summary_figure(Path(folder) / scale_png_name(r["id"]), r["paper"],
                                        [(r["id"], "paper", cells_)]))
    return out


def _scale_counts(cs: list[dict]) -> str:
    n_in = sum(c["inside"] for c in cs)
    out_ = [c for c in cs if c["outside"]]
    div = [c for c in cs if c["diverged"]]
    return (f"{len(cs)} cells: the paper's mean inside our seed range in {n_in}, outside in {len(cs) - n_in}; "
            f"ours - paper outside the paper's seed noise in {len(out_)} (a measured cause for "
            f"{sum(c['explained'] for c in out_)}); a diverged seed in {len(div)} (a measured cause for "
            f"{sum(c['explained'] for c in div)})")


def scale_summary_lines(rows: list[dict]) -> list[str]:
    """One line per paper-scale table for the report's first screen."""
    out = []
    for r in paper_scale_rows(rows):
        cs = scale_cells(r["id"])
        if cs:
            stale = prov.staleness(load_committed(r["id"], "paper")[1] or {})
            out.append(f"- Paper scale, `{r['id']}`: {_scale_counts(cs)}" + (f"; {stale}" if stale else "")
                       + f" ([figure]({scale_png_name(r['id'])}); section 1b).")
    return out + [""] if out else []


def _cause_cell(c: dict) -> str:
    if not (c["outside"] or c["diverged"]):
        return ""
    lines = [f"{text} [{name}] ({why})" for text, name, why in c["causes"] if why is not None]
    rest = [f"{text} [{name}]" for text, name, why in c["causes"] if why is None]
    head = [] if lines else ["no measured cause" + (" (measured, none moves ours toward the paper:)" if rest else "")]
    return "<br>".join(_md_escape(x) for x in head + lines + rest)


def scale_section(rows: list[dict]) -> list[str]:
    """REPORT.md's section on the paper-scale tables: per table its counts, staleness and figure, and
    folded, one row per cell (inside/outside our seed range, the noise rule's verdict on ours - paper,
    diverged seeds, the measured causes read from the causes json, with each section's command)."""
    prs = [(r, scale_cells(r["id"])) for r in paper_scale_rows(rows)]
    prs = [(r, cs) for r, cs in prs if cs]
    if not prs:
        return []
    out = ["## 1b. Paper-scale tables: every cell against the paper's seed noise", "",
           "Per cell of each table committed at the paper profile: whether the paper's mean lies inside our "
           "seeds' range, and whether ours - paper is outside the paper's seed noise by the claims' rule "
           "(section 2; unpaired: our seeds against the paper's reported std and seed count). For a cell "
           "outside the noise or with a diverged seed (†): the factors measured by controlled runs (control "
           "-> variant) read from the table's causes json, first those that move ours toward the paper (or make "
           "a diverged run finite), each naming its [section] (the command that measured it is listed below "
           "the table); \"no measured cause\" where none does.", ""]
    for r, cs in prs:
        rec = load_committed(r["id"], "paper")[1] or {}
        stale = prov.staleness(rec)
        record = causes_record(r["id"])
        varying = [k for k in cs[0]["key"] if len({c["key"][k] for c in cs}) > 1]
        out += [f"### `{r['id']}` at the paper profile", "",
                f"{_scale_counts(cs)}. "
                + (f"The committed table is {stale}: the code changed since it was made (fixes included); "
                   "regenerate it." if stale else "Made by this checkout's code.")
                + (f" Causes from `{causes_path(r['id'])}`." if record else
                   f" No `{causes_path(r['id'])}`: no measured causes."), "",
                f'<a href="{scale_png_name(r["id"])}"><img src="{scale_png_name(r["id"])}" width="40%" '
                f'alt="{r["id"]}: ours vs the paper"></a>', ""]
        lines = ["| cell | paper (n) | ours (seed range) | paper's mean | ours - paper ± k SE | diverged | causes |",
                 "|---|---|---|---|---|---|---|"]
        for c in cs:
            v = c["verdict"]
            where = {"pass": "above, outside noise", "fail": "below, outside noise"}.get(v.verdict, "within noise")
            div = "; ".join(f"† seed {s} at round {n}" for s, n in sorted(c["diverged"].items()))
            lines.append(f"| {_md_escape(' '.join(c['key'][k] for k in varying))} | {_fmt(c['paper'].mean, c['paper'].std)} "
                         f"({c['paper'].n}) | {c['ours'].mean:.2f} ({_fmt(c['low'])}-{_fmt(c['high'])}) | "
                         f"{'inside' if c['inside'] else 'outside'} | "
                         f"{_md_escape(v.decides.replace('ours - paper ', '').replace(' vs 0', ''))} ({where}) | "
                         f"{div} | {_cause_cell(c)} |")
        used = sorted({name for c in cs for _, name, _ in c["causes"]})
        lines += [""] + [_md_escape(f"- [{n}] " + "; ".join(x for x in (record[n].get("factor"), record[n].get("scale")) if x)
                                    + f": `{record[n].get('command', '?')}` ({record[n].get('cpu', '?')}, "
                                    f"{record[n].get('cpu_s', '?')} CPU s, {record[n].get('when', '?')})") for n in used]
        out += folded(f"{r['id']}: {len(cs)} cells, the measured causes of each gap outside the noise and of each "
                      "divergence", "\n".join(lines))
    return out


# ------------------------------------------------------------------------------------ report
def committed_tables(rows=None, data_root=None) -> dict:
    """{artifact id: our committed csv as a DataFrame} for every committed artifact (most faithful
    profile present), what the claims are checked on."""
    rows = rows if rows is not None else status_rows(data_root, ladders=False)
    return {r["id"]: load_committed(r["id"])[0] for r in rows if r["committed"]}


def _fold_open(summary: str) -> list[str]:
    return [f"<details><summary>{_html(summary)}</summary>", ""]


def folded(summary: str, body: str) -> list[str]:
    """Lines of a <details> block (closed in GitHub and JupyterLab) holding the markdown `body`."""
    return [f"<details><summary>{_html(summary)}</summary>", "", body, "", "</details>", ""]


def render_report(data_root=None, claims=None, rows=None) -> str:
    """The text of REPORT.md."""
    rows = rows if rows is not None else status_rows(data_root, ladders=False)
    claims = list(registered_claims() if claims is None else claims)
    tables = committed_tables(rows)
    n_reg = sum(r["committed"] for r in rows)
    n_not = len(rows) - n_reg
    out = ["# Reproduction report", "",
           "Generated by `fedpaper report` (also run at the end of `make figures`) from the committed "
           "results in `figures/`; do not edit by hand.", "",
           f"{len(rows)} artifacts: {n_reg} regenerated, {n_not} not regenerated.", ""]
    results = diagnose_claims(check_claims(claims, tables), rows)
    out += summary_section(results, rows, tables)

    # 1. comparisons with reported numbers
    out += ["## 1. Our numbers next to the papers'", ""]
    any_cmp = False
    for r in rows:
        if not r["reported"]:
            continue
        if not r["committed"]:
            continue
        reported = load_reported(r["id"])
        ours = tables.get(r["id"])
        if ours is None:
            continue
        cmp, keys = compare_with_reported(reported, ours)
        any_cmp = True
        out += [f"### `{r['id']}`: {r['title']}", ""]
        if cmp.empty:
            out += ["Our table has no `mean` column or shares no setting column with the reported "
                    f"file `{r['reported']}`; no side-by-side comparison.", ""]
            continue
        prof = (r["provenance"] or {}).get("profile", "?")
        cmp, also = _with_quick_column(cmp, reported, r["id"], prof, ours, keys)
        md, note = _frame_to_md(cmp)
        out += [f"Joined on {', '.join(keys)}. Ours: profile {prof} (difference = ours - paper)."
                + _scale_note(reported, ours) + also + (f" Fixed: {note}." if note else ""), ""]
        out += folded(f"the table: {len(cmp)} cells of the paper, {(cmp['ours'] != '–').sum()} of them ours", md)
    with_reported = [r["id"] for r in rows if r["reported"]]
    if not any_cmp:
        out += [f"No artifact with reported numbers has been regenerated yet ({len(with_reported)} have "
                "reported numbers).", ""]
    else:
        pending = [i for i in with_reported if not any(r["id"] == i and r["committed"] for r in rows)]
        if pending:
            out += ["Not yet regenerated, so not compared: " + ", ".join(f"`{i}`" for i in pending) + ".", ""]

    out += scale_section(rows)

    # 2. claims
    out += ["## 2. Claims", ""]
    if not results:
        out += ["No claims registered yet.", ""]
    else:
        out += RULES
    for paper in PAPERS:
        pr = [c for c in results if c["id"].startswith(paper + "/")]
        if not pr:
            continue
        out += [f"### {paper}: {PAPER_TITLES[paper]}", "", claim_counts(pr) + _profiles_note(rows, paper), ""]
        for c in pr:
            out += claim_details(c)
        out.append("")

    out += ladder_section()

    # 3. not regenerated
    out += ["## 3. Not regenerated", ""]
    nr = [r for r in rows if not r["committed"]]
    if not nr:
        out += ["Every artifact has been regenerated.", ""]
    for r in nr:
        out.append(_md_escape(f"- `{r['id']}` ({r['title']}): {r['status'].removeprefix('not regenerated: ')}"))
    out.append("")
    missing_sets = sorted({d for r in nr for d in artifact(r["id"]).needed})
    if missing_sets:
        out += ["Data sets the artifacts above need, and how to get them (then point "
                "`FEDPAPER_DATA` or `--data-root` at the data folder):", ""]
        for d in missing_sets:
            out.append(f"- {_md_escape(how_to_get(d))}")
        out.append("")

    # 4. provenance
    out += ["## 4. Provenance of regenerated artifacts", ""]
    regen = [r for r in rows if r["committed"]]
    if not regen:
        out += ["None yet.", ""]
    out += _fold_open(f"{len(regen)} artifacts: profile, device, commit, seeds, runs and the notes of each") if regen else []
    for r in regen:
        rec = r["provenance"] or {}
        line = f"- `{r['id']}`: " + (prov.summary(rec) if rec else "no provenance json")
        flags = []
        if rec.get("synthetic"):
            flags.append("SYNTHETIC stand-in data: not a result")
        if rec.get("lossy_datasets"):
            flags.append("lossy data copy: " + ", ".join(rec["lossy_datasets"]))
        if rec.get("missing_datasets"):
            flags.append("made without: " + ", ".join(rec["missing_datasets"]))
        if flags:
            line += ". " + "; ".join(flags)
        out.append(_md_escape(line))
        for n in rec.get("notes") or []:
            out.append(f"  - {_md_escape(n)}")
    out.append("")
    out += ["</details>", ""] if regen else []

    # 5. status table
    out += ["## 5. Status of every artifact", ""]
    for paper in PAPERS:
        pr = [r for r in rows if r["paper"] == paper]
        out += [f"### {paper}: {PAPER_TITLES[paper]}", "", status_table(pr, link_prefix="../"), ""]
    return "\n".join(out).rstrip() + "\n"


def readme_status_block(rows: list[dict]) -> str:
    lines = [STATUS_START,
             "<!-- generated by `fedpaper report`; edits between these markers are overwritten -->", ""]
    n_reg = sum(r["committed"] for r in rows)
    lines += [f"{n_reg} of {len(rows)} artifacts regenerated. Details and comparisons: "
              "[figures/REPORT.md](figures/REPORT.md).", ""]
    for paper in PAPERS:
        pr = [r for r in rows if r["paper"] == paper]
        lines += [f"**{paper}**: {PAPER_TITLES[paper]}", "", status_table(pr), ""]
    lines.append(STATUS_END)
    return "\n".join(lines)


def update_readme(rows: list[dict], path: Optional[Path] = None) -> bool:
    """Rewrite the block between the status markers of README.md. False if no markers/README."""
    path = Path(path) if path is not None else readme_path()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    i, j = text.find(STATUS_START), text.find(STATUS_END)
    if i < 0 or j < i:
        return False
    new = text[:i] + readme_status_block(rows) + text[j + len(STATUS_END):]
    if new != text:
        atomic_write_text(path, new)
    return True


def write_report(data_root=None, path: Optional[Path] = None, readme: Optional[Path] = None,
                 claims=None, only=None) -> Path:
    """Write figures/REPORT.md (atomically), the PNGs its summary links (summary/<paper>.png beside
    it) and refresh the README status table, all from the committed results only; print what this machine lacks (missing_here_lines) and keep it, untracked,
    in the cache (cache/report/missing-here.txt)."""
    rows = status_rows(data_root, ladders=False)
    text = render_report(data_root, claims=claims, rows=rows)
    path = Path(path) if path is not None else figures_dir() / "REPORT.md"
    write_summary_figures(path.parent / SUMMARY_DIR, rows, committed_tables(rows))
    write_scale_figures(path.parent, rows)
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    if text != old:
        atomic_write_text(path, text)
    update_readme(rows, readme)
    here = missing_here_lines(rows)
    # printed: with `only` (artifact ids, `fedpaper reproduce --only`) what those artifacts lack; kept: all of it
    for line in here if only is None else missing_here_lines([r for r in rows if r["id"] in set(only)]):
        print(line)
    with contextlib.suppress(OSError):
        atomic_write_text(cache_dir("report") / "missing-here.txt", "".join(f"{x}\n" for x in here))
    return path
