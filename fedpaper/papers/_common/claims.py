"""LEGACY: the pre-toolkit claim helpers, kept only until FedMT and FedNCA-ML use the toolkit
(registry, rows, chance, noise, causes); new code must not import this module.

Claim registration and the verdict rules shared by the paper packages.

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

from .chance import CHANCE_MARGIN as CHANCE_MARGIN_PCT, CHANCE_RULE  # noqa: F401  (the one rule)
from .chance import at_chance as _at_chance, chance_level
from .rows import Cell
from .verdicts import NOT_TESTABLE, PARTIAL  # noqa: F401


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
# Shims onto the one rule of chance.py (the fedpals captions and the FedMT / FedNCA-ML checks still
# call these names until they move onto the toolkit).
def chance_pct(label_split: Optional[str] = None, num_classes: Optional[int] = None) -> Optional[float]:
    """chance.chance_level (kept name)."""
    return chance_level(label_split, num_classes)


def parse_seeds(cell) -> list:
    """The per-seed accuracies of a CSV 'per_seed' cell ("53.00;59.00;51.33"); [] if absent."""
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return []
    return [float(v) for v in str(cell).split(";") if v not in ("", "-")]


def at_chance(mean: float, seeds: list, chance: Optional[float], shared=None, margin=None) -> bool:
    """One model alone by the one rule (chance.at_chance; no shared-score test without peers)."""
    return bool(_at_chance({"m": Cell(mean, float("nan"), len(seeds), tuple(seeds))}, chance))


def chance_models(rows: Iterable[tuple], chance: Optional[float]) -> list:
    """Names of the models at chance among rows (name, mean, per-seed list): chance.at_chance."""
    return _at_chance({n: Cell(m, float("nan"), len(s or ()), tuple(s or ())) for n, m, s in rows}, chance)


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
