"""The reproduction report, figures/REPORT.md, and the artifact status table of README.md.

Everything is computed from OUR committed files (figures/<paper>/<name>.csv and .json), the
papers' reported numbers (fedpaper/papers/reported/) and the claims the paper modules register.
It works with zero artifacts generated (a fresh clone without data). The output is deterministic
(no timestamps), so regenerating it without new results changes nothing.
"""
from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Optional

import pandas as pd

from fedpaper.runs import provenance as prov
from fedpaper.outputs.artifacts import claim_tables, committed_paths, committed_paths as _paths, load_committed
from fedpaper.papers._common import CAUSES, CHANCE_RULE, CONTEST_RULE, NOISE_RULE, Verdict, check_claims
from fedpaper.papers._common.scaling import slope_text
from fedpaper.papers._common.causes import diagnose, ladder_trends, reported_tables
from fedpaper.papers._common.rows import norm
from fedpaper.papers import (
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
from fedpaper.ground.files import atomic_write_text
from fedpaper.papers._common.scaling import read_trends

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
    they are made (issue 32, item 4). What this machine lacks is in `missing` (the data sets absent
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
    the note counts them (issue 26, item 7), so only the other cells compare scales."""
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
    """Fill each result's causes (papers._common.causes.diagnose) from the status rows: the
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
    """REPORT.md's compute ladders (issue 29), one table per committed `<paper>/scaling` csv: each
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
    "How a verdict is decided (one rule for every paper, in `fedpaper/papers/_common`):",
    "",
    f"- **Noise.** {NOISE_RULE}.",
    f"- **At chance.** {CHANCE_RULE}. A comparison whose models sit at chance is \"not testable at this "
    f"scale\": neither pass nor fail would test the claim. A comparative claim checked with `contest` (FedPALS's today) follows a second rule: {CONTEST_RULE}.",
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


# ------------------------------------------------------------------------------------ report
def committed_tables(rows=None, data_root=None) -> dict:
    """{artifact id: our committed csv as a DataFrame} for every committed artifact (most faithful
    profile present), what the claims are checked on."""
    rows = rows if rows is not None else status_rows(data_root, ladders=False)
    return {r["id"]: load_committed(r["id"])[0] for r in rows if r["committed"]}


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
                + _scale_note(reported, ours) + also + (f" Fixed: {note}." if note else ""), "", md, ""]
    with_reported = [r["id"] for r in rows if r["reported"]]
    if not any_cmp:
        out += [f"No artifact with reported numbers has been regenerated yet ({len(with_reported)} have "
                "reported numbers).", ""]
    else:
        pending = [i for i in with_reported if not any(r["id"] == i and r["committed"] for r in rows)]
        if pending:
            out += ["Not yet regenerated, so not compared: " + ", ".join(f"`{i}`" for i in pending) + ".", ""]

    # 2. claims
    out += ["## 2. Claims", ""]
    results = diagnose_claims(check_claims(claims, tables), rows)
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
            out.append("- " + verdict_line(c))
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
                 claims=None) -> Path:
    """Write figures/REPORT.md (atomically) and refresh the README status table, both from the
    committed results only; print what this machine lacks (missing_here_lines) and keep it, untracked,
    in the cache (cache/report/missing-here.txt)."""
    rows = status_rows(data_root, ladders=False)
    text = render_report(data_root, claims=claims, rows=rows)
    path = Path(path) if path is not None else figures_dir() / "REPORT.md"
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    if text != old:
        atomic_write_text(path, text)
    update_readme(rows, readme)
    here = missing_here_lines(rows)
    for line in here:
        print(line)
    with contextlib.suppress(OSError):
        atomic_write_text(cache_dir("report") / "missing-here.txt", "".join(f"{x}\n" for x in here))
    return path
