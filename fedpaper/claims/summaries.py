"""Per-seed summaries: the mean ± std (ddof=1) [95% bootstrap CI] cells of every paper's tables, and
the name of their interval."""
from __future__ import annotations

from fedpaper.blocks.metrics import summarize


def group_fields(keys: list[str], key) -> dict:
    """The grouping columns of a pandas groupby key as a dict (a scalar key for one column)."""
    return dict(zip(keys, key if isinstance(key, tuple) else (key,)))


def seed_summary(values, metric: str, *, n_resamples: int = 1000, ci: bool = False,
                 per_seed: str | None = None) -> dict:
    """{"metric", "mean", "std", "n_seeds"} of per-seed values (fedpaper.blocks.metrics.summarize), then
    "ci_low", "ci_high" with `ci`, then "per_seed" (the values joined by ';' in format `per_seed`)."""
    s = summarize(values, n_resamples=n_resamples)
    row = {"metric": metric, "mean": s["mean"], "std": s["std"], "n_seeds": s["n"]}
    if ci:
        row.update(ci_low=s["ci_low"], ci_high=s["ci_high"])
    if per_seed is not None:
        row["per_seed"] = ";".join(f"{v:{per_seed}}" for v in values)
    return row


def interval_name(n_seeds) -> str:
    """What a committed ci_low/ci_high interval over `n_seeds` seeds is. Our tables hold the 95%
    percentile bootstrap of the mean (metrics.bootstrap_ci, 1000 resamples); with 3 or fewer seeds
    the resample made of the smallest seed alone has probability 1/n^n >= 2.5% (1/27 for n=3), so the
    interval is exactly the seeds' min-max range and is labelled so, not "95% CI"."""
    n = int(n_seeds)
    if n <= 3:
        return f"min-max over n={n} seeds"
    return f"95% percentile-bootstrap interval, n={n} seeds"
