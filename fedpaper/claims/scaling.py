"""Trends along a compute ladder: does a gap close as compute grows?

Pure (numpy/scipy, no torch). Input: for one quantity, per rung (a compute budget c_r > 0, in any
unit proportional to training work) the per-seed values, the same seeds at every rung.

Fit, against x = log10(c):

- paired by seed (the ladder reruns the same seeds, partitions and initialisations at every rung):
  when at least 2 seeds have a value at every rung, each seed's ordinary least-squares slope b_s,
  slope = mean(b_s), SE = std(b_s, ddof=1) / sqrt(n), df = n - 1: the paired rule of
  `noise.NOISE_RULE` applied to slopes;
- otherwise OLS on the seed-averaged points (`scipy.stats.linregress`: the slope and its standard
  error), df = rungs - 2.

Classification, with `direction` +1 for a quantity that should rise (a claim's margin, an
agreement with the paper's ordering) and -1 for one that should fall (|ours - paper|), and
k = `noise.t_quantile(df)` (the one-sided 90 % quantile of NOISE_RULE; no second copy of it):

- NARROWING  when direction * slope - k SE > 0 (the gap shrinks, the margin grows),
- WIDENING   when direction * slope + k SE < 0,
- FLAT       otherwise (the one-sided 90 % bounds include 0),
- TOO_FEW    with fewer than MIN_RUNGS rungs (or no noise estimate): not classified.

A projection to the paper's compute (intercept + slope * log10(c_paper)) is made only for a clear
trend (narrowing or widening) fitted on at least MIN_RUNGS rungs, and no further above the top rung
than the ladder itself spans (MAX_EXTRAPOLATION x its decades, `within_reach`): a line fitted over
1.2 decades says nothing about 4 decades further. It is always labelled a projection: a straight
line in log-compute, extrapolated. A quantity with a range (a mean |ours -
paper| is >= 0, a Kendall tau in [-1, 1]) is projected no further than its bound: where the line
crosses it before the paper's compute, the projection is the bound and the label says at what
compute the line reaches it (`crossing`).

`ladder_rows` writes the csv rows of a ladder (one per rung x quantity x seed, then one fit row per
quantity); `read_trends` reads the fit rows back (for the report's causes, `causes.ladder_cause`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from fedpaper.claims.noise import t_quantile

NARROWING, FLAT, WIDENING, TOO_FEW = "narrowing", "flat", "widening", "too few rungs"
TRENDS = (NARROWING, FLAT, WIDENING, TOO_FEW)
MIN_RUNGS = 3
PROJECTION = "projection"
#: how far above its top rung a ladder projects, in units of its own span (decades top / bottom)
MAX_EXTRAPOLATION = 1.0

#: csv columns of a ladder table (row = "seed" or "fit")
COLUMNS = ["row", "quantity", "claim", "direction", "rung", "compute", "seed", "value", "slope", "slope_se",
           "df", "k", "fit", "trend", "paper_compute", "projection", "label"]


@dataclass(frozen=True)
class Fit:
    """A quantity's straight-line fit against log10(compute)."""

    slope: float  # per decade of compute
    se: float
    df: int
    intercept: float
    rungs: int
    method: str  # "paired by seed" | "OLS on seed means"
    lo: float = math.nan  # the lowest and highest compute with a value (the fitted range)
    hi: float = math.nan

    @property
    def k(self) -> float:
        return t_quantile(self.df) if self.df >= 1 and not math.isnan(self.se) else float("nan")

    def at(self, compute: float) -> float:
        return self.intercept + self.slope * math.log10(compute)


def _ols(x: np.ndarray, y: np.ndarray) -> tuple:
    from scipy.stats import linregress

    r = linregress(x, y)
    return float(r.slope), float(r.intercept), float(r.stderr) if len(x) > 2 else float("nan")


def fit(compute: Sequence[float], per_seed: Sequence[Sequence[float]]) -> Optional[Fit]:
    """The fit of per_seed[r] (the seeds' values at rung r, seeds in one order at every rung; nan
    for a missing value) against log10(compute[r]); None with fewer than two rungs with a value."""
    if len(compute) != len(per_seed):
        raise ValueError("one list of per-seed values per rung")
    x_all = np.log10(np.asarray(compute, dtype=float))
    means = np.array([np.nanmean(v) if len(v) and not np.all(np.isnan(np.asarray(v, float))) else np.nan
                      for v in per_seed])
    ok = ~np.isnan(means)
    if ok.sum() < 2:
        return None
    x, ybar = x_all[ok], means[ok]
    n_seeds = {len(v) for v in per_seed}
    if len(n_seeds) == 1 and n_seeds.pop() >= 2:
        grid = np.asarray(per_seed, dtype=float)  # rungs x seeds
        full = ~np.isnan(grid).any(axis=0)
        if full.sum() >= 2 and ok.all():
            slopes = np.array([_ols(x_all, grid[:, s])[0] for s in np.flatnonzero(full)])
            slope = float(slopes.mean())
            se = float(slopes.std(ddof=1) / math.sqrt(len(slopes)))
            return Fit(slope, se, len(slopes) - 1, float(ybar.mean() - slope * x.mean()), int(ok.sum()),
                       "paired by seed", 10 ** x.min(), 10 ** x.max())
    slope, intercept, se = _ols(x, ybar)
    return Fit(slope, se, int(ok.sum()) - 2, intercept, int(ok.sum()), "OLS on seed means", 10 ** x.min(),
               10 ** x.max())


def classify(f: Optional[Fit], direction: int) -> str:
    """NARROWING / WIDENING / FLAT by the one-sided 90 % bound (see the module docstring), TOO_FEW
    without MIN_RUNGS rungs or a noise estimate."""
    if direction not in (1, -1):
        raise ValueError("direction is +1 (should rise) or -1 (should fall)")
    if f is None or f.rungs < MIN_RUNGS or f.df < 1 or math.isnan(f.se):
        return TOO_FEW
    s, bound = direction * f.slope, f.k * f.se
    if s - bound > 0:
        return NARROWING
    if s + bound < 0:
        return WIDENING
    return FLAT


def within_reach(lo: float, hi: float, paper_compute: Optional[float]) -> tuple[bool, str]:
    """(True, "") when the paper's compute lies no further above the top rung `hi` than
    MAX_EXTRAPOLATION x the ladder's span (log10 hi/lo), else (False, why) in one phrase."""
    if paper_compute is None or not (lo > 0 and hi > 0 and paper_compute > 0):
        return False, "no paper compute or fitted range"
    span, beyond = math.log10(hi / lo), math.log10(paper_compute / hi)
    if beyond <= MAX_EXTRAPOLATION * span:
        return True, ""
    return False, (f"the paper's compute is {beyond:.1f} decades above the top rung, beyond the ladder's own "
                   f"span of {span:.1f}")


def projection(f: Optional[Fit], trend: str, paper_compute: Optional[float],
               bounds: tuple = (-math.inf, math.inf)) -> Optional[float]:
    """The fitted line at the paper's compute, only for a clear trend on >= MIN_RUNGS rungs whose
    paper compute is `within_reach`, held inside the quantity's range `bounds` (lo, hi)."""
    if f is None or paper_compute is None or trend not in (NARROWING, WIDENING) or f.rungs < MIN_RUNGS:
        return None
    if not within_reach(f.lo, f.hi, paper_compute)[0]:
        return None
    lo, hi = bounds
    return float(min(max(f.at(paper_compute), lo), hi))


def crossing(f: Fit, bounds: tuple) -> Optional[float]:
    """The compute at which the fitted line reaches the bound it heads for (None: unbounded that way
    or a flat line)."""
    bound = bounds[1] if f.slope > 0 else bounds[0]
    if f.slope == 0 or not math.isfinite(bound):
        return None
    return 10 ** ((bound - f.intercept) / f.slope)


@dataclass(frozen=True)
class Trend:
    """A quantity's fitted trend, as the csv records it (read back by `read_trends`)."""

    quantity: str
    claim: str  # "" for a gap to the paper not tied to one claim
    direction: int
    trend: str
    slope: Optional[float]  # None: no fit (fewer than two rungs with a value)
    se: Optional[float]
    rungs: int
    projection: Optional[float]
    paper_compute: Optional[float]
    not_projected: str = ""  # why a clear trend has no projection (`within_reach`), else ""

    def text(self) -> str:
        """"<quantity>: narrowing, slope +1.2 +- 0.3 per decade of compute over 3 rungs[; projection ...]"."""
        proj = "" if self.projection is None else (f"; {PROJECTION} at the paper's compute "
                                                   f"({self.paper_compute:.3g}x ours): {self.projection:.3g}")
        if self.not_projected:
            proj = f"; no {PROJECTION}: {self.not_projected}"
        if self.slope is None:
            return f"{self.quantity}: {self.trend} ({self.rungs} rung(s) with a value)"
        return (f"{self.quantity}: {self.trend}, slope {slope_text(self.slope, self.se, unit=' per decade of compute')} "
                f"over {self.rungs} rungs{proj}")


def slope_text(slope, se, unit: str = "", decimals: Optional[int] = None, pm: str = "+-") -> str:
    """"+1.2 +- 0.3<unit>" (3 and 2 significant digits, or `decimals` places), or "+1.2<unit> (no
    noise estimate)" where the fit has none (two rungs fitted on seed means: SE nan or None), so a
    label never shows "nan"."""
    s = f"{float(slope):+.3g}" if decimals is None else f"{float(slope):+.{decimals}f}"
    if se is None or math.isnan(float(se)):
        return f"{s}{unit} (no noise estimate)"
    e = f"{float(se):.2g}" if decimals is None else f"{float(se):.{decimals}f}"
    return f"{s} {pm} {e}{unit}"


def ladder_rows(quantities: Sequence[dict], rungs: Sequence[dict], paper_compute: Optional[float]) -> list[dict]:
    """The csv rows of a ladder. quantities: [{"quantity", "claim", "direction", "values": {rung
    name: {seed: value}}, optional "bounds": (lo, hi)}], rungs: [{"name", "compute"}] in compute order."""
    rows = []
    for q in quantities:
        base = {"quantity": q["quantity"], "claim": q.get("claim") or "", "direction": q["direction"]}
        seeds = sorted({s for r in rungs for s in q["values"].get(r["name"], {})})
        grid = []
        for r in rungs:
            vals = q["values"].get(r["name"], {})
            grid.append([float(vals.get(s, np.nan)) for s in seeds])
            rows += [dict(base, row="seed", rung=r["name"], compute=r["compute"], seed=s, value=vals[s])
                     for s in seeds if s in vals]
        f = fit([r["compute"] for r in rungs], grid) if seeds else None
        trend = classify(f, q["direction"])
        bounds = tuple(q.get("bounds") or (-math.inf, math.inf))
        proj = projection(f, trend, paper_compute, bounds)
        label = "" if f is None else (f"{trend}: slope {slope_text(f.slope, f.se, unit=' per decade')} "
                                      f"({f.method}, {f.rungs} rungs)")
        if proj is not None:
            label += f"; {PROJECTION} at the paper's compute {proj:.3g}"
            c = crossing(f, bounds)
            if c is not None and proj != f.at(paper_compute):
                label += f" (the line reaches {proj:.3g}, the end of its range, at {c:.3g}x)"
        elif trend in (NARROWING, WIDENING) and paper_compute is not None:
            label += f"; no {PROJECTION}: {within_reach(f.lo, f.hi, paper_compute)[1]}"
        rows.append(dict(base, row="fit", slope=None if f is None else f.slope, slope_se=None if f is None else f.se,
                         df=None if f is None else f.df, k=None if f is None else f.k,
                         fit=None if f is None else f.method, trend=trend, paper_compute=paper_compute,
                         projection=proj, label=label))
    return rows


def _num(v) -> Optional[float]:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def read_trends(table) -> list[Trend]:
    """The fit rows of a ladder csv (a DataFrame) as Trends."""
    if table is None or "row" not in getattr(table, "columns", ()):
        return []
    out = []
    for _, r in table[table["row"] == "fit"].iterrows():
        claim = r.get("claim")
        claim = "" if claim is None or (isinstance(claim, float) and math.isnan(claim)) else str(claim)
        pts = table[(table["row"] == "seed") & (table["quantity"] == r["quantity"])]
        paper = _num(r.get("paper_compute"))
        reach, why = within_reach(*compute_range(pts), paper)
        proj = _num(r.get("projection")) if reach else None  # a csv written before MAX_EXTRAPOLATION
        # is read by today's rule
        why = why if str(r["trend"]) in (NARROWING, WIDENING) and paper is not None else ""
        out.append(Trend(str(r["quantity"]), claim, int(r["direction"]), str(r["trend"]),
                         _num(r.get("slope")), _num(r.get("slope_se")),
                         int(pts["rung"].nunique()), proj, paper, why))
    return out


def compute_range(seed_rows) -> tuple[float, float]:
    """(lowest, highest) compute of a quantity's seed rows with a value (nan, nan without one)."""
    c = seed_rows.loc[seed_rows["value"].notna(), "compute"].astype(float) if len(seed_rows) else []
    return (float(min(c)), float(max(c))) if len(c) else (math.nan, math.nan)


def shown_projection(fit_row, seed_rows) -> Optional[float]:
    """The projection a ladder csv's fit row holds, if today's rule (`within_reach`) still shows it."""
    proj = _num(fit_row.get("projection"))
    if proj is None or not within_reach(*compute_range(seed_rows), _num(fit_row.get("paper_compute")))[0]:
        return None
    return proj
