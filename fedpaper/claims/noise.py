"""The one noise-aware comparison rule of every paper's checks (NOISE_RULE, printed in REPORT.md).

Per seed, d_s = a_s - b_s (paired: the same seed gives both runs the same partition and
initialisation); d = mean(d_s), SE = std(d_s, ddof=1) / sqrt(n), df = n - 1. Without per-seed
values on both sides, d = mean_a - mean_b, SE = sqrt(std_a^2/n_a + std_b^2/n_b) and df = min(n_a,
n_b) - 1 (unpaired). With k = the one-sided 90% quantile of Student's t with df degrees of freedom
(1.89 for 3 seeds, 1.53 for 5, 1.41 for 8), a claim "a exceeds b by more than m" (m = 0: "a beats
b"):

- PASS when d - k SE > m and a majority of seeds have d_s > m (when per-seed values exist);
- FAIL when d + k SE < m and a majority of seeds have d_s < m: the reverse is shown;
- WITHIN_NOISE otherwise: the data do not separate the two (cause "within seed noise").

A near-equality "|a - b| <= tol" passes when |d| + k SE <= tol and a majority of seeds have
|d_s| <= tol (the two one-sided tests of equivalence), fails when |d| - k SE > tol and a majority
have |d_s| > tol, and is within noise otherwise: seed noise is evidence neither of a difference
nor of equality.

How many seeds would decide a comparison within noise (`seeds_to_decide`): the rule solved for n,
the fewest seeds at which k(n - 1) s / sqrt(n) falls below the distance of the mean difference from
the bar, if that difference and its per-seed spread s held (s = SE sqrt(n); unpaired: both sides
with n seeds); the seed majority then follows from the mean for seeds spread evenly about it.

Why this rule: it is the one-sided paired t-test at the 10% level (a one-sided 90% confidence
bound on the mean difference), so the bar grows as the seeds get fewer, as it should: a flat
"one standard error" would pass a gap that 3 seeds support only at about 80% confidence. 95%
(2.92 SE at 3 seeds) would call most real gaps of our 3-5-seed profiles "within noise". The seed
majority keeps one outlier seed from deciding, and the same bound decides pass and fail, so
neither side is favoured.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedpaper.claims.rows import Cell
from fedpaper.claims.verdicts import FAIL, NOISE, PASS, WITHIN_NOISE, Cause, Verdict, all_of, negate

NOISE_RULE = (
    "a difference d = a - b counts only when the seeds show it: with d_s the per-seed (paired) "
    "differences, d their mean, SE = std(d_s)/sqrt(n) and k the one-sided 90% quantile of Student's t "
    "with n - 1 degrees of freedom (k = 1.89 for 3 seeds; unpaired without per-seed values: SE = "
    "sqrt(std_a^2/n_a + std_b^2/n_b), min(n_a, n_b) - 1 degrees of freedom), \"a exceeds b by more "
    "than m\" (m = 0: \"a beats b\") passes when d - k SE > m and a majority of seeds have d_s > m, "
    "fails when d + k SE < m and a majority have d_s < m, and is \"within noise\" otherwise (counted "
    "apart from pass and fail); a near-equality |a - b| <= tol passes when |d| + k SE <= tol (and a "
    "majority of seeds within tol), fails when |d| - k SE > tol (and a majority beyond tol), and is "
    "within noise otherwise. This is the one-sided paired t-test at the 10% level: the bar grows as "
    "the seeds get fewer; at 5% (2.92 SE for 3 seeds) most real gaps of 3-5 seeds would hide; the seed "
    "majority keeps one outlier seed from deciding")

CONFIDENCE = 0.90  # one-sided

#: a difference a paper states (a margin, a gain) holds when the measured one is within 2 points of
#: it, or a quarter of it when that is larger, by the equivalence test (near): about the seed stds
#: of the papers' own tables (0.1-2.4 points), so a margin the paper's spread cannot pin down is
#: "within noise" on its own numbers too
STATED_TOL, STATED_REL = 2.0, 0.25


def t_quantile(df: int) -> float:
    """k: the one-sided CONFIDENCE quantile of Student's t with df >= 1 degrees of freedom (the one
    bar of NOISE_RULE; the compute ladder's trends use it too, `claims.scaling`)."""
    from scipy.stats import t

    return float(t.ppf(CONFIDENCE, df))


#: the most seeds `seeds_to_decide` looks at
SEEDS_CAP = 10_000


def seeds_to_decide(gap: float, spread: float, cap: int = SEEDS_CAP):
    """The fewest seeds n >= 2 at which the rule's bound k(n - 1) spread / sqrt(n) is below `gap`
    (the distance of the mean difference from the bar: |d - m| for `exceeds`, | |d| - tol | for
    `near`), or None when no n up to `cap` gives that (a gap of zero: the mean sits on the bar)."""
    from scipy.stats import t

    if not (gap > 0) or math.isnan(spread):
        return None
    if spread <= 0:
        return 2
    n = np.arange(2, cap + 1)
    ok = np.nonzero(t.ppf(CONFIDENCE, n - 1) * spread / np.sqrt(n) < gap)[0]
    return int(n[ok[0]]) if len(ok) else None


def const(x: float) -> Cell:
    """A fixed number (a threshold, a paper's value) as a Cell without noise."""
    return Cell(float(x), 0.0, 0, ())


@dataclass(frozen=True)
class Diff:
    """a - b over seeds: mean d, its standard error se (nan: no noise estimate), the per-seed
    differences (empty when not paired) and whether they are paired."""

    d: float
    se: float
    per_seed: tuple
    paired: bool
    df: int = 0

    @property
    def k(self) -> float:
        """The one-sided CONFIDENCE quantile of Student's t with df degrees of freedom (0: no noise
        estimate)."""
        if self.df < 1 or math.isnan(self.se):
            return 0.0
        return t_quantile(self.df)

    @property
    def bound(self) -> float:
        """k SE: how far the mean difference may move within seed noise (0 without an estimate)."""
        return 0.0 if math.isnan(self.se) else self.k * self.se

    @property
    def n(self) -> int:
        return len(self.per_seed)

    @property
    def spread(self) -> float:
        """The per-seed spread behind se: SE sqrt(seeds) (paired: std of the per-seed differences)."""
        return self.se * math.sqrt(self.df + 1) if self.df >= 1 else math.nan

    def brief(self, what: str, bar: str, unit: str = "") -> str:
        """'what +d ± k SE vs bar': the difference, the rule's bound and the bar, in a few words."""
        return f"{what} {self.d:+.2f}{unit} ± {self.bound:.2f} vs {bar}"

    def noise_cause(self, text: str, gap: float, brief: str = "") -> Cause:
        """The "within seed noise" cause of this difference, with how many seeds would decide it
        (seeds_to_decide at `gap`, the distance of the mean from the bar; -1: none would)."""
        n = seeds_to_decide(gap, self.spread)
        return Cause(NOISE, text, seeds=-1 if n is None else n, n_now=self.df + 1, brief=brief)

    def majority(self, pred) -> bool:
        """A majority of seeds satisfy pred(d_s) (True when there are no per-seed values)."""
        if not self.per_seed:
            return True
        return 2 * sum(bool(pred(x)) for x in self.per_seed) > len(self.per_seed)

    def text(self, unit: str = "") -> str:
        se = "no noise estimate" if math.isnan(self.se) or self.df < 1 else f"SE {self.se:.2f}, k SE {self.bound:.2f}"
        seeds = (f", per seed {'/'.join(f'{x:+.2f}' for x in self.per_seed)}" if self.per_seed else "")
        kind = "paired" if self.paired else "unpaired"
        return f"{self.d:+.2f}{unit} ({se}, {kind}{seeds})"


def minus(a: Cell, b: Cell) -> Cell:
    """a - b as a Cell: per seed when both have per-seed values of one length, else the difference
    of the means with the two stds combined."""
    if a.seeds and len(a.seeds) == len(b.seeds):
        s = np.asarray(a.seeds) - np.asarray(b.seeds)
        return Cell(float(s.mean()), float(s.std(ddof=1)) if len(s) > 1 else math.nan, len(s), tuple(s))
    return Cell(a.mean - b.mean, math.hypot(a.std, b.std), min(a.n, b.n), ())


def _is_const(c: Cell) -> bool:
    return not c.seeds and c.n == 0 and c.std == 0


def diff(a: Cell, b: Cell) -> Diff:
    """a - b by the rule above (paired when both have per-seed values of one length, or one side
    is a constant)."""
    if _is_const(b) and a.seeds:
        ds = tuple(x - b.mean for x in a.seeds if not math.isnan(x))
    elif _is_const(a) and b.seeds:
        ds = tuple(a.mean - x for x in b.seeds if not math.isnan(x))
    elif a.seeds and b.seeds and len(a.seeds) == len(b.seeds):
        ds = tuple(x - y for x, y in zip(a.seeds, b.seeds) if not (math.isnan(x) or math.isnan(y)))
    else:
        ds = ()
    if len(ds) >= 2:
        arr = np.asarray(ds)
        return Diff(float(arr.mean()), float(arr.std(ddof=1) / math.sqrt(len(arr))), ds, True, len(ds) - 1)
    terms, ns = [], []
    for c in (a, b):
        if _is_const(c):
            continue
        terms.append(c.std ** 2 / c.n if c.n >= 2 and not math.isnan(c.std) else float("nan"))
        ns.append(c.n)
    se = math.sqrt(sum(terms)) if terms else float("nan")
    return Diff(a.mean - b.mean, se, ds if len(ds) == 1 else (), bool(ds), min(ns) - 1 if ns else 0)


def exceeds(a: Cell, b: Cell, margin: float = 0.0, what: str = "a - b", unit: str = "") -> Verdict:
    """"a exceeds b by more than `margin`" by NOISE_RULE (margin 0: "a beats b"); `se` below is the
    bound k SE."""
    dd = diff(a, b)
    se = dd.bound
    bar = f" vs margin {margin:g}{unit}" if margin else ""
    text = f"{what} {dd.text(unit)}{bar}"
    short = dd.brief(what, f"{margin:g}", unit)
    if dd.d - se > margin and dd.majority(lambda x: x > margin):
        return Verdict(PASS, text, (), short)
    if dd.d + se < margin and dd.majority(lambda x: x < margin):
        return Verdict(FAIL, text, (), short)
    return Verdict(WITHIN_NOISE, text, (dd.noise_cause(text, abs(dd.d - margin), short),), short)


def beats(a: Cell, b: Cell, names=("a", "b"), unit: str = "") -> Verdict:
    """"names[0] beats names[1]": exceeds with margin 0."""
    return exceeds(a, b, 0.0, f"{names[0]} - {names[1]}", unit)


def near(a: Cell, b: Cell, tol: float, what: str = "a - b", unit: str = "") -> Verdict:
    """"|a - b| <= tol" by NOISE_RULE."""
    dd = diff(a, b)
    se = dd.bound
    text = f"{what} {dd.text(unit)} vs tolerance {tol:g}{unit}"
    short = dd.brief(what, f"±{tol:g}", unit)
    if abs(dd.d) + se <= tol and dd.majority(lambda x: abs(x) <= tol):
        return Verdict(PASS, text, (), short)
    if abs(dd.d) - se > tol and dd.majority(lambda x: abs(x) > tol):
        return Verdict(FAIL, text, (), short)
    return Verdict(WITHIN_NOISE, text, (dd.noise_cause(text, abs(abs(dd.d) - tol), short),), short)


def stated(d: Cell, value: float, what: str) -> Verdict:
    """A difference `d` the paper states as `value`: near(d, value) with tolerance STATED_TOL, or
    STATED_REL of the value when that is larger."""
    return near(d, const(value), max(STATED_TOL, STATED_REL * abs(value)), f"{what} vs the stated {value:g}")


def not_below(a: Cell, b: Cell, names=("a", "b")) -> Verdict:
    """"names[0] is at least names[1]": FAIL when b beats a by the rule, PASS when a beats b or the
    two are equal without any seed noise (an exact tie), within noise otherwise."""
    dd = diff(a, b)
    if dd.d == 0 and (math.isnan(dd.se) or dd.se == 0):
        return Verdict(PASS, f"{names[0]} = {names[1]} ({a.mean:.2f}, no seed noise)", (), f"{names[0]} = {names[1]}")
    return negate(beats(b, a, names[::-1]))


def best(cells: dict, winner: str, unit: str = "") -> Verdict:
    """`winner` beats every other model in `cells` {name: Cell} (all_of the pairwise beats)."""
    parts = [(f"vs {m}", beats(cells[winner], c, (winner, m), unit)) for m, c in cells.items() if m != winner]
    return all_of(parts, f"{winner} best of {len(cells)}")


def monotone(series: dict, direction: int, name: str = "", unit: str = "") -> Verdict:
    """Values of `series` {x: Cell} (ordered by x) rise (direction +1) or fall (-1) at every step,
    each step by the beats rule."""
    xs = list(series)
    parts = []
    for x0, x1 in zip(xs, xs[1:]):
        hi, lo = (x1, x0) if direction > 0 else (x0, x1)
        parts.append((f"{x0:g}->{x1:g}" if isinstance(x0, float) else f"{x0}->{x1}",
                      beats(series[hi], series[lo], (f"{name}@{hi}", f"{name}@{lo}"), unit)))
    return all_of(parts, f"{name} {'rises' if direction > 0 else 'falls'} at every step")
