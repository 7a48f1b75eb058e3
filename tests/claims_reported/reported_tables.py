"""The papers' own reported numbers (fedpaper/claims/reported/*.csv) written in the schema of our
committed CSV of each artifact, so every claim check can be fed the paper's numbers.

Conversion of one reported CSV:

- the columns: our committed CSV's (figures/long/<artifact>.csv, else figures/<artifact>.csv) in
  their order, then any reported column ours lacks (e.g. fig2c's C_ref); an artifact we do not
  regenerate (fedmt/table3, fedpals/table2-4) keeps the reported columns and gains `per_seed`;
- `per_seed`: n synthetic seeds (n = the reported n_seeds, else 3) ``mean + std * z`` with one fixed
  vector z of sample mean 0 and sample std 1 (ddof 1), the same for every row: the seeds' mean and
  sample std equal the reported mean and std exactly. A reported cell without a std gets std 0 (n
  equal seeds). Common offsets are the most favourable pairing for a "beats" claim: the std of a
  paired difference is at least |std_a - std_b| (what common offsets give), so a claim that is
  within noise on these seeds is within noise under any pairing of the paper's seeds;
- `std`, `n_seeds`, `ci_low` / `ci_high` (the seeds' min and max, the interval we commit for 3
  seeds) recomputed from those seeds; every other column of ours that the paper does not report is
  left empty (NaN);
- method names, metric names and setting values are the paper's; where ours differ the map
  ``RENAME`` below says so (none needed today: the reported CSVs were written in our names).
"""
from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from fedpaper.outputs.registry import ARTIFACTS
from fedpaper.claims.catalog import REPORTED_DIR
from fedpaper.ground.paths import REPO_ROOT

FIGURES = REPO_ROOT / "figures"
SHARED_REPORTED = Path("/work/shared/papers/reported")
RENAME: dict = {}


def standardised(shape) -> np.ndarray:
    """`shape` shifted and scaled to sample mean 0 and sample std 1 (ddof 1); one value gives [0]."""
    z = np.asarray(shape, dtype=float)
    if len(z) <= 1:
        return np.zeros(1)
    z = z - z.mean()
    return z / z.std(ddof=1)


def _z(n: int) -> np.ndarray:
    """n fixed offsets with sample mean 0 and sample std 1 (ddof 1); n = 1 gives [0]."""
    return standardised(np.linspace(-1.0, 1.0, max(int(n), 1)))


def synth_seeds(mean: float, std: Optional[float], n: int, z=None) -> np.ndarray:
    """Per-seed values whose mean is `mean` and sample std is `std` (0 when std is missing); `z`:
    a function n -> offsets of sample mean 0 and std 1 (default `_z`, evenly spaced)."""
    s = 0.0 if std is None or (isinstance(std, float) and math.isnan(std)) else float(std)
    return float(mean) + s * (z or _z)(int(n))


def _schema(artifact_id: str) -> Optional[list]:
    """Columns of our committed CSV for the artifact (long profile first), or None."""
    for prof in ("long", ""):
        p = FIGURES / prof / f"{artifact_id}.csv" if prof else FIGURES / f"{artifact_id}.csv"
        if p.is_file():
            return list(pd.read_csv(p, nrows=0).columns)
    return None


def reported_files() -> dict:
    """{artifact id: path of its reported CSV} for every artifact with reported numbers (the
    package's copy, plus /work/shared's where it holds a file the package lacks)."""
    out = {}
    for aid, art in ARTIFACTS.items():
        if not art.reported:
            continue
        for d in (REPORTED_DIR, SHARED_REPORTED):
            if (d / art.reported).is_file():
                out[aid] = d / art.reported
                break
    return out


def convert(artifact_id: str, reported: pd.DataFrame, z=None) -> pd.DataFrame:
    """One reported table in our committed schema with synthetic per-seed values (see module doc);
    `z(n, row)`: the offsets of one row (default: `_z(n)` for every row)."""
    rep = reported.drop(columns=[c for c in ("source",) if c in reported]).rename(columns=RENAME)
    cols = _schema(artifact_id) or list(rep.columns) + ["per_seed"]
    cols = cols + [c for c in rep.columns if c not in cols]
    if "per_seed" not in cols:
        cols.append("per_seed")
    rows = []
    for _, r in rep.iterrows():
        out = {c: (r[c] if c in rep else np.nan) for c in cols}
        n_rep = r.get("n_seeds")
        n = int(n_rep) if n_rep is not None and not pd.isna(n_rep) else 3
        seeds = synth_seeds(r["mean"], r.get("std"), n, None if z is None else (lambda k: z(k, r)))
        out["per_seed"] = ";".join(f"{v:.6f}" for v in seeds)
        out["n_seeds"] = n
        std = r.get("std")
        out["std"] = 0.0 if std is None or pd.isna(std) else float(std)  # the seeds' sample std, exactly
        if "ci_low" in cols:
            out["ci_low"], out["ci_high"] = float(seeds.min()), float(seeds.max())
        rows.append(out)
    return pd.DataFrame(rows, columns=cols)


@lru_cache(maxsize=None)
def _paper_tables_cached() -> tuple:
    return tuple((aid, convert(aid, pd.read_csv(p))) for aid, p in sorted(reported_files().items()))


def paper_tables(paper: Optional[str] = None) -> dict:
    """{artifact id: the paper's numbers in our schema} (fresh copies, safe to modify)."""
    return {aid: t.copy() for aid, t in _paper_tables_cached() if paper is None or aid.startswith(paper + "/")}


def synthesised(artifact_id: str, z) -> pd.DataFrame:
    """The paper's table of one artifact in our schema with the per-seed offsets `z(n, row)`."""
    return convert(artifact_id, pd.read_csv(reported_files()[artifact_id]), z)


def shuffled(tables: dict, seed: int) -> dict:
    """Every table with its rows in a different order (and a fresh index)."""
    rng = np.random.default_rng(seed)
    return {a: t.iloc[rng.permutation(len(t))].reset_index(drop=True) for a, t in tables.items()}


def set_mean(t: pd.DataFrame, where: dict, mean: float) -> pd.DataFrame:
    """A copy of t where the rows matching `where` (column -> value; NaN matches NaN) have `mean`
    and per-seed values re-synthesised around it with the row's std. Raises if nothing matches."""
    t = t.copy()
    mask = pd.Series(True, index=t.index)
    for c, v in where.items():
        col = t[c]
        if isinstance(v, float) and math.isnan(v):
            mask &= col.isna()
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            mask &= pd.to_numeric(col, errors="coerce").sub(v).abs() < 1e-9
        else:
            mask &= col.astype(str) == str(v)
    if not mask.any():
        raise KeyError(f"no row matches {where}")
    for i in t.index[mask]:
        n = int(t.at[i, "n_seeds"])
        seeds = synth_seeds(mean, t.at[i, "std"], n)
        t.at[i, "mean"] = float(mean)
        t.at[i, "per_seed"] = ";".join(f"{v:.6f}" for v in seeds)
        if "ci_low" in t:
            t.at[i, "ci_low"], t.at[i, "ci_high"] = float(seeds.min()), float(seeds.max())
    return t
