"""Rows of a committed (or reported) table found by key, never by position.

Keys compare in normal form (10, 10.0 and "10" agree; NaN and "" agree), so a table read back
from CSV matches the values a check names. Series over an x column come back sorted by x
(numerically when x is numeric): shuffling a CSV's rows never changes what a check sees."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd


class Missing(LookupError):
    """An artifact or a row a check needs is absent; the framework turns it into NOT_CHECKABLE
    with the cause "data or weights absent" (paper modules never guard against it themselves)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


def norm(v) -> str:
    """Key normal form: 10, 10.0 and '10' agree; NaN, None and '' agree."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, str):
        s = v.strip()
        try:
            v = float(s)
        except ValueError:
            return s
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        f = float(v)
        if math.isnan(f):
            return ""
        return str(int(f)) if f.is_integer() else repr(round(f, 10))
    return str(v)


def select(t: pd.DataFrame, **key) -> pd.DataFrame:
    """The rows of `t` whose columns equal `key` (normal form); a key value may be a list/tuple/set
    of accepted values. A key column the table lacks raises Missing."""
    mask = np.ones(len(t), dtype=bool)
    for col, want in key.items():
        if col not in t.columns:
            raise Missing(f"column {col!r} (table has {', '.join(map(str, t.columns))})")
        wanted = {norm(w) for w in want} if isinstance(want, (list, tuple, set, frozenset)) else {norm(want)}
        mask &= t[col].map(norm).isin(wanted).to_numpy()
    return t[mask]


def one(t: pd.DataFrame, **key) -> pd.Series:
    """The single row matching `key`; Missing if none, ValueError if several."""
    r = select(t, **key)
    if len(r) == 0:
        raise Missing("no row " + ", ".join(f"{k}={v}" for k, v in key.items()))
    if len(r) > 1:
        raise ValueError(f"{len(r)} rows match " + ", ".join(f"{k}={v}" for k, v in key.items())
                         + "; name more key columns")
    return r.iloc[0]


def parse_per_seed(cell) -> tuple:
    """A CSV 'per_seed' cell ("53.00;59.00;-") as floats in seed order, NaN for a missing seed."""
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return ()
    out = []
    for v in str(cell).split(";"):
        v = v.strip()
        try:
            out.append(float(v))
        except ValueError:
            out.append(float("nan"))
    return tuple(out)


@dataclass(frozen=True)
class Cell:
    """One table cell over seeds: mean, std (ddof=1), number of seeds and the per-seed values in
    seed order (empty when the table has no per_seed column). Values in the table's own unit;
    `scaled(k)` multiplies them (e.g. fractions to percent)."""

    mean: float
    std: float = float("nan")
    n: int = 0
    seeds: tuple = ()

    def scaled(self, k: float) -> "Cell":
        return Cell(self.mean * k, self.std * k, self.n, tuple(v * k for v in self.seeds))


def cell_of(row: pd.Series, value: str = "mean") -> Cell:
    """The Cell of one row (`value` names the mean column, e.g. 'val_mean')."""
    def num(c):
        v = row.get(c)
        try:
            return float(v)
        except (TypeError, ValueError):
            return float("nan")
    seeds = parse_per_seed(row.get("per_seed")) if value == "mean" else ()
    n = num("n_seeds")
    n = len(seeds) if seeds else (0 if math.isnan(n) else int(n))
    return Cell(num(value), num("std") if value == "mean" else float("nan"), n, seeds)


def cell(t: pd.DataFrame, value: str = "mean", **key) -> Cell:
    """The Cell of the single row matching `key`."""
    return cell_of(one(t, **key), value)


def _sort_key(v):
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def cells(t: pd.DataFrame, by: str, value: str = "mean", **key) -> dict:
    """{value of column `by`: Cell} over the rows matching `key`, ordered by `by` (numerically when
    numeric); each `by` value must occur once (ValueError otherwise). Missing if no row matches."""
    r = select(t, **key)
    if len(r) == 0:
        raise Missing("no row " + ", ".join(f"{k}={v}" for k, v in key.items()))
    keys = [norm(v) for v in r[by]]
    if len(set(keys)) != len(keys):
        raise ValueError(f"column {by!r} repeats within " + ", ".join(f"{k}={v}" for k, v in key.items())
                         + "; name more key columns")
    out = {}
    for raw, (_, row) in sorted(zip(r[by], r.iterrows()), key=lambda p: _sort_key(p[0])):
        out[_plain(raw)] = cell_of(row, value)
    return out


def _plain(v):
    """A key value as a plain Python scalar (numpy scalars unwrapped; '10' and 10.0 -> 10.0)."""
    if isinstance(v, (np.integer, np.floating)):
        v = v.item()
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def values(t: pd.DataFrame, col: str, **key) -> list:
    """The distinct values of column `col` over the rows matching `key`, sorted (numerically when
    numeric). A column the table lacks raises Missing, like a key column."""
    r = select(t, **key)
    if col not in t.columns:
        raise Missing(f"column {col!r} (table has {', '.join(map(str, t.columns))})")
    return sorted({_plain(v) for v in r[col] if norm(v) != ""}, key=_sort_key)
