"""A paper's compute ladder: the numbers behind its headline claims, rerun at >= 3
compute budgets, and the trend of each claim's margin and gap to the paper.

A paper declares a `Ladder` in `papers/<paper>/ladder.py`: the artifact functions whose tables its
quantities read, the rungs per profile (each rung = overrides of a base profile, applied as an
artifact's are: `parameters.settle`; the same seeds, hence the same partitions and
initialisations, at every rung), the quantities (a function of the tables giving per-seed values:
a claim's margin, positive where the claim holds, or the gap |ours - paper|), and `work`: the
training work of one run from the profile dict (rounds x data x model width, as each paper
states). A rung's compute is its work relative to the quick profile's, the paper's compute is the
paper profile's work on the same scale (both computed, never typed).

A rung may instead be COMMITTED (`Rung.committed`, `reads`): a profile whose committed tables
(figures/<profile>/<paper>/<name>.csv, made with the ladder's seeds) are read as that rung, at
that profile's compute, never retrained inside the ladder (FedPALS's long ladder tops out at the
paper profile's Table 1 this way).

`ladder_job` is the `<paper>/scaling` artifact: for each rung it calls the artifact functions with
the rung's overrides and explicit seeds (an exploration: their files go to a scratch folder in the
cache; their runs are cached by the store like any other, so a rung equal to the profile itself
costs nothing after that profile ran with the same cache), then writes, through the pipeline (an ArtifactJob),
the csv of `claims.scaling.ladder_rows` (one row per rung x quantity x seed, then the fit, its SE,
the trend and any projection), the provenance and a figure: each quantity against compute on a
log axis, seeds and their spread, the paper's compute marked, projections dashed and labelled.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from fedpaper.outputs.artifacts import STATUS_FILE_ENV, committed_paths, load_committed
from fedpaper.outputs.pipeline import ArtifactJob
from fedpaper.ground.errors import BadParameterError
from fedpaper.outputs.parameters import settle, validate
from fedpaper.claims import scaling as S
from fedpaper.claims.rows import Cell, Missing, cell_of, norm
from fedpaper.ground.paths import cache_dir
from fedpaper.runs.sweep import current_scope, in_scope
from fedpaper.claims.chance import learning


@dataclass(frozen=True)
class Rung:
    name: str
    overrides: dict = field(default_factory=dict)  # {} = the base profile itself
    #: a profile whose COMMITTED results are this rung (figures/<profile>/<paper>/<name>.csv of each
    #: of `reads`), computed nowhere here: a top rung too costly to rerun inside a ladder (FedPALS
    #: Table 1 at the paper profile: ~11 CPU-hours, committed with its provenance and run archive)
    committed: Optional[str] = None
    reads: tuple = ()  # the artifact names a committed rung reads (the quantities' table keys)


@dataclass(frozen=True)
class Quantity:
    name: str
    claims: tuple  # claim numbers it decides ((): a gap to the paper)
    direction: int  # +1: should rise (margin, agreement); -1: should fall (|ours - paper|)
    value: Callable  # RungTables ({artifact name: DataFrame}) -> Cell (per-seed values in seed order)
    bounds: tuple = (-math.inf, math.inf)  # its range: a projection stops there (GAP: |ours - paper| >= 0)


#: the range of a mean |ours - paper| and of a Kendall tau (Quantity.bounds)
GAP, TAU = (0.0, math.inf), (-1.0, 1.0)


@dataclass(frozen=True)
class Ladder:
    paper: str
    functions: tuple  # artifact functions run at every rung
    rungs: dict  # profile -> (base profile, (Rung, ...))
    quantities: tuple
    settings: Callable  # profile -> the profile dict the overrides apply to
    work: Callable  # profile dict -> training work of one run (any unit)
    work_unit: str
    datasets: tuple

    def rung_settings(self, profile: str, rung: Rung) -> dict:
        """The settings a rung's runs train with: its base profile's, its overrides applied (its work)."""
        if rung.committed is not None:
            return copy.deepcopy(self.settings(rung.committed))
        base = self.rungs[profile][0]
        return settle(self.settings(base), validate(profile=base, overrides=rung.overrides or None),
                      where=f"the {self.paper} ladder rung {rung.name}")

    def compute(self, profile: str, rung: Rung) -> float:
        """The rung's training work per run relative to the quick profile's."""
        return self.work(self.rung_settings(profile, rung)) / self.work(self.settings("quick"))

    def paper_compute(self) -> float:
        return self.work(self.settings("paper")) / self.work(self.settings("quick"))


# ------------------------------------------------------------------------------ quantities
def seeds_of(c: Cell) -> np.ndarray:
    if not c.seeds:
        raise Missing("per-seed values")
    return np.asarray(c.seeds, dtype=float)


def as_cell(values) -> Cell:
    a = np.asarray(values, dtype=float)
    return Cell(float(np.nanmean(a)), float(np.nanstd(a, ddof=1)) if len(a) > 1 else float("nan"), len(a),
                tuple(float(x) for x in a))


def worst(arrays: Sequence[np.ndarray]) -> Cell:
    """Per seed, the smallest of several margins (a claim "in every row" holds where all do)."""
    if not arrays:
        raise Missing("rows for the margin")
    return as_cell(np.min(np.vstack(arrays), axis=0))


class RungTables(dict):
    """{artifact name: table} of one rung, as a quantity's `value` reads them, with the rows the
    quantity leaves out there: `exclude` (row keys left out at every rung, set by compute_table)
    and `left_out` ([(row key, why)] that `testable` found untestable at this rung)."""

    def __init__(self, tables, exclude=frozenset()):
        super().__init__(tables)
        self.exclude = frozenset(exclude)
        self.left_out: list = []


def testable(tables, rows: Sequence[tuple]) -> list:
    """The values of the rows ((key, zero-argument callable giving the row's per-seed margin)) that
    can be tested: a row raising Missing (e.g. its models at chance: `learned`) is left out and
    reported (key, why) in `tables.left_out` to compute_table, which then leaves that row out at
    every rung (`tables.exclude`), so that a "worst row" quantity compares the same rows along the
    whole ladder; Missing when no row is left. `tables`: the quantity's RungTables (a plain dict
    of tables, outside a ladder, leaves nothing out and reports nothing)."""
    out, why = [], []
    skip = tables.exclude if isinstance(tables, RungTables) else frozenset()
    for key, row in rows:
        if key in skip:
            continue
        try:
            out.append(row())
        except Missing as e:
            why.append((key, str(e)))
    if not out:
        raise Missing("; ".join(w for _, w in why) or "no rows left (" + ", ".join(sorted(skip)) + " left out)")
    if isinstance(tables, RungTables):
        tables.left_out.extend(why)
    return out


def learned(cells: dict, names, chance: Optional[float], where: str = "", others=()) -> dict:
    """`cells` ({method: Cell}) without those of `others` that sit at chance, by the claims' own
    `claims.chance.learning` on `names` and `others` scored together; Missing when one of `names`
    or every one of `others` is at chance: a margin between models that never learned tests
    nothing, so the row (`testable`) or the rung gives no value and is left out of the fit
    (compute_table's notes say which and why)."""

    sub = {n: cells[n] for n in (*names, *others) if n in cells}
    kept, untestable, _ = learning(sub, chance, names, others, where)
    if untestable is not None:
        raise Missing("at chance: " + untestable.detail)
    return {k: v for k, v in cells.items() if k not in sub or k in kept}


def differ(cells: dict, a: str, b: str, where: str = "") -> None:
    """Missing when methods `a` and `b` ({method: Cell}) score the same on every seed: the two did not
    differ at this budget (FedMT and SemiFL, say, before the clients' pseudo-labelled training has
    reached the server model), so a margin between them is zero by construction, not a measurement,
    and the rung gives no value for it (compute_table's notes say so)."""
    sa, sb = seeds_of(cells[a]), seeds_of(cells[b])
    if len(sa) and len(sa) == len(sb) and np.array_equal(np.round(sa, 6), np.round(sb, 6)):
        at = f" {where}" if where else ""
        raise Missing(f"{a} and {b} the same on every seed{at} ({'/'.join(f'{v:.1f}' for v in sa)}): "
                      "the methods did not differ at this budget, so their margin tests nothing")


def method_cells(t: pd.DataFrame, **key) -> dict:
    """{method: Cell} of the rows matching key (by normal form)."""
    sel = t
    for k, v in key.items():
        sel = sel[sel[k].map(norm) == norm(v)]
    return {r["method"]: cell_of(r) for _, r in sel.iterrows()}


#: columns that hold values or say how big a run was: never join keys against the paper
_NOT_KEYS = {"mean", "std", "n_seeds", "ci_low", "ci_high", "source", "sem", "per_seed", "N_c", "backbone",
             "init", "val_mean", "lambda_per_seed", "batch_mean", "batch_std", "best_rounds", "our_backbone",
             "interval"}


def gap_to_paper(ours: pd.DataFrame, paper: Optional[pd.DataFrame], metric: Optional[str] = None) -> Cell:
    """Per seed, the mean over the cells both tables have of |ours_s - paper mean| (points)."""
    if paper is None:
        raise Missing("the paper's numbers")
    keys = [c for c in paper.columns if c in ours.columns and c not in _NOT_KEYS]
    if metric is not None:
        ours, paper = ours[ours["metric"] == metric], paper[paper["metric"] == metric]
    ref = {tuple(norm(r[k]) for k in keys): float(r["mean"]) for _, r in paper.iterrows()}
    gaps = []
    for _, r in ours.iterrows():
        p = ref.get(tuple(norm(r[k]) for k in keys))
        c = cell_of(r)
        if p is not None and not math.isnan(p) and c.seeds:
            gaps.append(np.abs(np.asarray(c.seeds, dtype=float) - p))
    if not gaps or len({len(g) for g in gaps}) != 1:
        raise Missing("cells shared with the paper")
    return as_cell(np.mean(np.vstack(gaps), axis=0))


# ------------------------------------------------------------------------------ the artifact
@contextlib.contextmanager
def _quiet_status():
    """The rungs' artifacts are not the artifacts `fedpaper reproduce` tracks: keep them out of its
    status file."""
    saved = os.environ.pop(STATUS_FILE_ENV, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[STATUS_FILE_ENV] = saved


def _committed_tables(ladder: Ladder, rung: Rung, seeds) -> tuple[dict, list]:
    """({name: table}, notes) of a committed rung: each of `rung.reads` as committed at profile
    `rung.committed` (artifacts.load_committed), where its provenance says it was made with the
    ladder's seeds (the same seeds, hence the same partitions); one note per table, read or not."""
    tables, notes = {}, []
    for name in rung.reads:
        aid = f"{ladder.paper}/{name}"
        where = f"rung {rung.name}: {aid} at the {rung.committed} profile"
        table, prov = load_committed(aid, rung.committed)
        if table is None or prov is None:
            csv = committed_paths(aid, rung.committed)["csv"]
            notes.append(f"{where} is not committed ({csv.parent.parent.name}/{csv.parent.name}/{csv.name}): "
                         "no value there")
            continue
        made_with = [int(x) for x in prov.get("seeds") or []]
        if made_with != [int(x) for x in seeds]:
            notes.append(f"{where} was made with seeds {made_with}, the ladder's are {list(seeds)}: not used")
            continue
        tables[name] = table
        git = (prov.get("git") or {}).get("commit", "?")
        notes.append(f"{where}: the committed {name}.csv (made {prov.get('timestamp', '?')}, commit "
                     f"{str(git)[:12]}, {prov.get('wall_time_s', '?')} s of wall time; its runs: no training here)")
    return tables, notes


def _rung_tables(ladder: Ladder, profile: str, rung: Rung, seeds, data_root) -> dict:
    base = ladder.rungs[profile][0]
    out_dir = cache_dir("ladder", profile, ladder.paper, rung.name)
    tables = {}
    # the same sweeps at every rung: each bar says which (the rung's artifacts keep the ladder's scope's suffix)
    rung_scope = dataclasses.replace(current_scope(), suffix=f"(rung {rung.name})")
    with _quiet_status(), in_scope(rung_scope):
        for fn in ladder.functions:
            res = fn(profile=base, data_root=data_root, out_dir=out_dir, seeds=list(seeds),
                     overrides=copy.deepcopy(rung.overrides) or None)
            for r in res if isinstance(res, list) else [res]:
                tables[r.artifact_id.split("/", 1)[1]] = r.table
    return tables


def claim_ids(ladder: Ladder, q: Quantity) -> str:
    return ";".join(f"{ladder.paper}/claim-{n}" for n in q.claims)


def _values_on_common_rows(q: Quantity, rungs: list, tables: dict, seeds) -> tuple[dict, list]:
    """({rung: {seed: value}}, notes) of quantity q, every rung computed over the same rows: a row
    left out at a rung that has a value (`testable`: its models at chance there) is left out at
    every rung, repeated until no new row drops; a rung with no row left gives no value."""
    excluded: dict = {}  # row key -> why (the first rung it failed at)
    while True:
        values, missing, new = {}, [], {}
        for r in rungs:
            try:
                rung = RungTables(tables[r["name"]], exclude=excluded)
                c = q.value(rung)
            except (Missing, KeyError) as e:
                missing.append(f"{q.name}: no value at rung {r['name']} ({e})")
                continue
            values[r["name"]] = dict(zip(seeds, c.seeds))
            for key, why in rung.left_out:
                new.setdefault(key, f"rung {r['name']}: {why}")
        if not new:
            break
        excluded.update(new)
    notes = missing + ([f"{q.name}: rows left out at every rung, so that each rung compares the same rows: "
                        + "; ".join(f"{k} ({w})" for k, w in excluded.items())] if excluded else [])
    return values, notes


def compute_table(ladder: Ladder, p: dict, data_root=None) -> tuple[pd.DataFrame, dict]:
    profile = p["profile"]
    seeds = p["seeds"]
    rungs = [{"name": r.name, "compute": ladder.compute(profile, r), "rung": r} for r in ladder.rungs[profile][1]]
    rungs.sort(key=lambda r: r["compute"])
    values = {q.name: {} for q in ladder.quantities}
    notes = []
    tables, rung_notes = {}, []
    for r in rungs:
        if r["rung"].committed is not None:
            tables[r["name"]], more = _committed_tables(ladder, r["rung"], seeds)
            rung_notes += more
        else:
            tables[r["name"]] = _rung_tables(ladder, profile, r["rung"], seeds, data_root)
    for q in ladder.quantities:
        values[q.name], q_notes = _values_on_common_rows(q, rungs, tables, seeds)
        notes += q_notes
    qs = [{"quantity": q.name, "claim": claim_ids(ladder, q), "direction": q.direction, "values": values[q.name],
           "bounds": q.bounds} for q in ladder.quantities]
    paper = ladder.paper_compute()
    rows = S.ladder_rows(qs, [{"name": r["name"], "compute": r["compute"]} for r in rungs], paper)
    table = pd.DataFrame(rows, columns=S.COLUMNS)
    base = ladder.rungs[profile][0]
    notes = [f"rungs on the {base} profile, compute = {ladder.work_unit} per run relative to the quick profile: "
             + "; ".join(f"{r['name']} {r['compute']:.3g}x ({_describe(r['rung'])})" for r in rungs),
             f"the paper's compute: {paper:.3g}x the quick profile's (its profile dict, the same measure)",
             f"the same seeds {list(seeds)} at every rung; trends by the one-sided 90% bound of the slope "
             "(claims/scaling.py); a projection is a straight line in log-compute, extrapolated"] \
        + rung_notes + notes
    return table, {"notes": notes, "rungs": [{"name": r["name"], "compute": r["compute"],
                                              "overrides": r["rung"].overrides} for r in rungs]}


def _describe(rung: Rung) -> str:
    if rung.committed is not None:
        return f"the committed {rung.committed} profile's {', '.join(rung.reads)}"
    return ", ".join(f"{k}={v}" for k, v in rung.overrides.items()) or "the profile itself"


def draw(table: pd.DataFrame, p: dict):
    import matplotlib.pyplot as plt

    fits = table[table["row"] == "fit"]
    n = max(1, len(fits))
    cols = min(3, n)
    rows_ = math.ceil(n / cols)
    fig, axes = plt.subplots(rows_, cols, figsize=(4.6 * cols, 3.4 * rows_), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, (_, f) in zip(axes.flat, fits.iterrows()):
        pts = table[(table["row"] == "seed") & (table["quantity"] == f["quantity"])]
        if len(pts):
            ax.scatter(pts["compute"], pts["value"], s=10, color="0.6", label="seeds", zorder=2)
            g = pts.groupby("compute")["value"]
            m, sd = g.mean(), g.std(ddof=1).fillna(0.0)
            ax.errorbar(m.index, m.values, yerr=sd.values, marker="o", color="C0", capsize=3, label="mean ± std",
                        zorder=3)
        paper_c = f.get("paper_compute")
        if paper_c is not None and not pd.isna(paper_c):
            ax.axvline(paper_c, color="C3", ls=":", lw=1)
            ax.annotate("paper's compute", (paper_c, 0.02), xycoords=("data", "axes fraction"), rotation=90,
                        fontsize=7, color="C3", ha="right", va="bottom")
        proj = S.shown_projection(f, pts)
        if proj is not None and len(pts):
            x0 = float(pts["compute"].max())
            y0 = float(f["slope"]) * math.log10(x0) + (float(proj) - float(f["slope"]) * math.log10(float(paper_c)))
            ax.plot([x0, paper_c], [y0, proj], ls="--", color="C1", label=S.PROJECTION)
            ax.annotate(f"{S.PROJECTION}: {float(proj):.3g}", (paper_c, proj), fontsize=7, color="C1",
                        ha="right", va="bottom")
        if int(f["direction"]) > 0:
            ax.axhline(0.0, color="k", lw=0.6)
        ax.set_xscale("log")
        ax.set_xlabel("training compute per run (x quick profile)")
        ax.set_ylabel("margin (points)" if int(f["direction"]) > 0 else "|ours - paper| (points)")
        slope = "" if pd.isna(f.get("slope")) else \
            ", slope " + S.slope_text(f["slope"], f["slope_se"], unit="/decade", decimals=2, pm="±")
        ax.set_title(f"{f['quantity']}\n{f['trend']}{slope}", fontsize=7.5)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=6, frameon=False)
    fig.tight_layout()
    return fig


def ladder_job(ladder: Ladder, *, profile="smoke", data_root=None) -> ArtifactJob:
    """The `<paper>/scaling` artifact of `ladder` (see the module docstring)."""
    if profile not in ladder.rungs:
        raise BadParameterError(f"{ladder.paper}/scaling has no rungs at the {profile} profile (a compute ladder climbs "
                                f"to its top rung from below): use profile {' or '.join(map(repr, ladder.rungs))}")
    base = ladder.rungs[profile][0]
    base_seeds = ladder.settings(base)["seeds"]
    params = {"rungs": {r.name: ({"committed": r.committed, "reads": list(r.reads)} if r.committed else r.overrides)
                        for r in ladder.rungs[profile][1]}, "base_profile": base,
              "seeds": base_seeds, "work": ladder.work_unit}
    return ArtifactJob(f"{ladder.paper}/scaling", params, lambda q: compute_table(ladder, q, data_root), draw,
                       tuple(ladder.datasets))
