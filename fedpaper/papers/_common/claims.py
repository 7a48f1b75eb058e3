"""Claim registration and the verdict rules shared by the paper packages.

A check returns (verdict, detail). verdict is True (pass), False (fail), None (not checkable: data
missing) or one of the strings below:

- NOT_TESTABLE: the models the claim compares do not learn on the data the claim uses ("at chance",
  see CHANCE_RULE), so neither a pass nor a fail would say anything about the claim;
- PARTIAL: an "in every row" claim holds in every row we can test, but some rows are not
  checkable (data missing) or not testable; the detail says "k of n rows hold".

Checks decorated with :func:`on_code` test a formula or a data split (no trained model): the report
counts them apart ("checked on code").
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Optional

from fedpaper.papers import Claim, add_claims, artifact_ids, not_implemented

NOT_TESTABLE = "not testable"
PARTIAL = "partial"

CHANCE_MARGIN_PCT = 2.0
CHANCE_RULE = (f"a model is at chance when most of its seeds score at most chance + {CHANCE_MARGIN_PCT:g} "
               "points, or at most that margin above 0 (it predicts classes the target does not have), "
               "or exactly the value that 3 or more methods share on that seed (a one-class model scores "
               "the target's majority share); chance is 100/C % on a target uniform over its C labels "
               "(sparsity sampling), 100/K % on a balanced K-class test set, unknown on Dirichlet targets "
               "(their per-seed majority share is not in the committed CSVs)")


def register_unchecked(paper: str, rows) -> None:
    """A paper not implemented yet: every artifact is declared not implemented and every claim
    (claim id, artifacts, statement) is registered without a check, so the report lists them."""
    not_implemented(artifact_ids(paper))
    add_claims(Claim(cid, text, artifacts=tuple(arts), check=None) for cid, arts, text in rows)


def on_code(fn: Callable) -> Callable:
    """Mark a check as computed from code (a formula or a data split), not from trained models."""
    fn.on_code = True
    return fn


# ------------------------------------------------------------------------------- at chance
def chance_pct(label_split: Optional[str] = None, num_classes: Optional[int] = None) -> Optional[float]:
    """Accuracy (%) of a one-class model: 100/C for a sparsity target "C=k" (uniform over its k
    labels, partition.sparsity_partition + resample_to_marginal), 100/K for a balanced K-class test
    set, None when unknown (Dirichlet targets "beta=...")."""
    if label_split is not None and str(label_split).startswith("C="):
        return 100.0 / float(str(label_split)[2:])
    if num_classes:
        return 100.0 / num_classes
    return None


def parse_seeds(cell) -> list:
    """The per-seed accuracies of a CSV 'per_seed' cell ("53.00;59.00;51.33"); [] if absent."""
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return []
    return [float(v) for v in str(cell).split(";") if v not in ("", "-")]


def shared_values(per_seed: dict, min_methods: int = 3) -> list:
    """Per seed, the accuracies that `min_methods` or more methods score exactly (one-class models)."""
    n = max((len(v) for v in per_seed.values()), default=0)
    out = []
    for s in range(n):
        vals = [round(v[s], 2) for v in per_seed.values() if len(v) > s]
        out.append({x for x in vals if vals.count(x) >= min_methods})
    return out


def seed_at_chance(acc: float, chance: Optional[float], shared: set = frozenset(),
                   margin: float = CHANCE_MARGIN_PCT) -> bool:
    """One seed's accuracy (%) is at chance (see CHANCE_RULE)."""
    return (acc <= margin or (chance is not None and acc <= chance + margin)
            or round(acc, 2) in shared)


def at_chance(mean: float, seeds: list, chance: Optional[float], shared: Optional[list] = None,
              margin: float = CHANCE_MARGIN_PCT) -> bool:
    """A method is at chance (CHANCE_RULE): most seeds at chance, or, without per-seed values,
    its mean at most chance + margin (or at most margin)."""
    if not seeds:
        return mean <= margin or (chance is not None and mean <= chance + margin)
    shared = shared or [set()] * len(seeds)
    hits = sum(seed_at_chance(a, chance, shared[i] if i < len(shared) else set(), margin)
               for i, a in enumerate(seeds))
    return hits * 2 > len(seeds)


def chance_models(rows: Iterable[tuple], chance: Optional[float]) -> list:
    """Names of the models at chance among rows (name, mean, per-seed list)."""
    rows = list(rows)
    shared = shared_values({n: s for n, _, s in rows if s})
    return [n for n, m, s in rows if at_chance(m, s, chance, shared)]


def chance_note(names: list, chance: Optional[float], where: str = "") -> str:
    lvl = f"chance {chance:.1f}%" if chance is not None else "chance unknown, one-class or 0.00 seeds"
    return f"{', '.join(names)} at chance{' ' + where if where else ''} ({lvl})"


# ------------------------------------------------------------------------------- verdicts
def combine_rows(results: list, what: str) -> tuple:
    """An "in every row" verdict from per-row (label, verdict, text): verdict True/False/None/
    NOT_TESTABLE per row. Fail if a testable row fails; pass if every row holds; PARTIAL if the
    testable rows all hold but some are missing or not testable; NOT_TESTABLE / None if no row is
    testable."""
    n = len(results)
    held = [r for r in results if r[1] is True]
    failed = [r for r in results if r[1] is False]
    untestable = [r for r in results if r[1] == NOT_TESTABLE]
    missing = [r for r in results if r[1] is None]
    marks = {False: " (FAILS)", NOT_TESTABLE: " (not testable)", None: " (not checkable)", PARTIAL: " (partial)"}
    body = "; ".join(f"{lab}{marks.get(v, '')}: {txt}" for lab, v, txt in results)
    counts = f"{len(held)} of {n} rows hold"
    if untestable:
        counts += f", {len(untestable)} not testable (models at chance)"
    if missing:
        counts += f", {len(missing)} not checkable (data missing)"
    if failed:
        verdict = False
    elif not held:
        verdict = NOT_TESTABLE if untestable else None
    elif untestable or missing:
        verdict = PARTIAL
    else:
        verdict = True
    return verdict, f"{what}: {counts}. {body}"


# ------------------------------------------------------------------------------- intervals
def interval_name(n_seeds) -> str:
    """What a committed ci_low/ci_high interval over `n_seeds` seeds is. Our tables hold the 95%
    percentile bootstrap of the mean (metrics.bootstrap_ci, 1000 resamples); with 3 or fewer seeds
    the resample made of the smallest seed alone has probability 1/n^n >= 2.5% (1/27 for n=3), so the
    interval is exactly the seeds' min-max range and is labelled so, not "95% CI"."""
    n = int(n_seeds)
    if n <= 3:
        return f"min-max over n={n} seeds"
    return f"95% percentile-bootstrap interval, n={n} seeds"
