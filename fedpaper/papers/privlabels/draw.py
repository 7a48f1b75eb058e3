"""Figures of the private-label-sets artifacts: line plots over L (or E), grouped bars, curves over
rounds and configuration tables. Every plot shows the mean over seeds with its interval over seeds
(named by `interval_text`: with 3 seeds the seeds' min-max range), accuracy in % (the csv keeps fractions), the legend outside the axes, and a caption that says
what the bands / bars are and over how many seeds."""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt  # the backend is the caller's (MPLBACKEND, Jupyter): never set it here
import numpy as np
import pandas as pd

from fedpaper.claims.chance import CHANCE_MARGIN
from fedpaper.claims import at_chance, cell_of
from fedpaper.claims.summaries import interval_name

COLORS = {"FedAvg": "C0", "FedProx": "C1", "FedRS": "C2", "Tuning-MSE": "C3", "Tuning-Pairwise": "C4",
          "Tuning-Pairwise (all pairs)": "C5"}
ORDER = list(COLORS)
TITLES = {"private": "Private label sets", "public": "Public label sets"}


def _methods(df: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(df["method"]))
    return [m for m in ORDER if m in present] + [m for m in present if m not in ORDER]


PCT = 100.0  # the csv holds fractions; figures print %
CHANCE = 10.0  # % for the 10-class data sets of this paper


def _wrap(text: str, fig) -> str:
    """Wrap a caption to the figure's width (a long line would widen the saved canvas)."""
    width = max(40, int(fig.get_size_inches()[0] * 15))
    return "\n".join(textwrap.fill(part, width) for part in text.split("\n"))


def interval_text(table: pd.DataFrame) -> str:
    """What the table's ci_low/ci_high are, named as the report and the csv `interval` column name
    them (claims.summaries.interval_name): with 3 seeds the seeds' min-max range, not a 95% CI."""

    ns = sorted({int(v) for v in table.get("n_seeds", pd.Series(dtype=float)).dropna()})
    if not ns:
        return "interval over an unknown number of seeds"
    return "; ".join(dict.fromkeys(interval_name(n) for n in ns))


def _ci_caption(table: pd.DataFrame, what: str) -> str:
    return f"{what}: {interval_text(table)}; dotted: chance ({CHANCE:.0f}%)"


SETTING_COLS = ("dataset", "setting", "labels_per_client", "local_epochs", "round")


def _at_chance(table: pd.DataFrame) -> list[str]:
    """Methods at chance at every setting of the figure, by the one rule of the claims
    (claims.chance.CHANCE_RULE: most seeds at most chance + CHANCE_MARGIN points, or a score
    shared by 3+ methods on a seed below that seed's best); accuracies are fractions, the rule reads
    percent."""

    def low_in(g):
        return set(at_chance({r["method"]: cell_of(r).scaled(100) for _, r in g.iterrows()}, CHANCE))

    if "metric" in table:
        table = table[table["metric"] == "accuracy"]
    keys = [c for c in SETTING_COLS if c in table]
    if not len(table) or "mean" not in table:
        return []
    groups = [g for _, g in table.groupby(keys)] if keys else [table]
    low = [low_in(g) for g in groups]
    return [m for m in _methods(table) if all(m in lo or m not in set(g["method"]) for lo, g in zip(low, groups))]


def _finish(fig, title: str, sub: str, table: pd.DataFrame | None = None, caption: str = ""):
    chance = _at_chance(table) if table is not None and len(table) else []
    if chance:
        title += "\n" + _wrap(f"{', '.join(chance)} at chance everywhere in this figure (most seeds <= "
                              f"{CHANCE + CHANCE_MARGIN:.0f}%, or one-class models)", fig)
    fig.suptitle(title + (f"\n{_wrap(sub, fig)}" if sub else ""), fontsize=9 if sub else 11)
    if caption:
        fig.text(0.5, 0.0, _wrap(caption, fig), ha="center", va="top", fontsize=7.5, color="0.25")
    fig.tight_layout()
    return fig


def _legend_outside(ax, *args):
    """The legend right of the axes, so it covers no data."""
    ax.legend(*args, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0)


def _contiguous(xs: list) -> list[list[int]]:
    """Index runs of neighbouring integer settings (a skipped value, e.g. L = 6..9, breaks a run)."""
    runs: list[list[int]] = []
    for i, v in enumerate(xs):
        if runs and v - xs[i - 1] <= 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _yerr(r):
    """Error-bar lengths (%) below / above the mean; clipped at 0 (identical seeds give a mean a
    rounding error outside [min, max])."""
    return [np.clip(PCT * (r["mean"] - r["ci_low"]), 0, None), np.clip(PCT * (r["ci_high"] - r["mean"]), 0, None)]


def _chance_line(ax):
    ax.axhline(CHANCE, color="0.4", ls=":", lw=1)


def lines(table: pd.DataFrame, x: str, title: str, sub: str, xlabel: str):
    """Two panels (private | public): accuracy vs `x`, one line per method, CI as a band."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, setting in zip(axes, ["private", "public"]):
        t = table[table["setting"] == setting]
        for m in _methods(t):
            g = t[t["method"] == m].sort_values(x)
            ax.plot(g[x], PCT * g["mean"], marker="o", ms=3, ls="none", color=COLORS.get(m), label=m)
            for run in _contiguous(g[x].tolist()):  # no line or band across settings that were not run
                r = g.iloc[run]
                ax.plot(r[x], PCT * r["mean"], color=COLORS.get(m))
                ax.fill_between(r[x], PCT * r["ci_low"], PCT * r["ci_high"], color=COLORS.get(m), alpha=0.15)
            single = [i for i in range(len(g)) if all(i not in r or len(r) == 1 for r in _contiguous(g[x].tolist()))]
            if single:  # an isolated setting: its CI as an error bar
                r = g.iloc[single]
                ax.errorbar(r[x], PCT * r["mean"], yerr=_yerr(r),
                            ls="none", color=COLORS.get(m), capsize=2, lw=1, alpha=0.6)
        _chance_line(ax)
        ax.set_title(TITLES[setting], fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_xticks(sorted(t[x].unique()) if len(t) else [])
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy (%, best-val snapshot)")
    _legend_outside(axes[1])
    xs = sorted(table[x].unique()) if len(table) else []
    gaps = any(b - a > 1 for a, b in zip(xs, xs[1:]))
    skip = f"; no line across values of {xlabel.split()[-1]} that were not run" if gaps else ""
    return _finish(fig, title, sub, table, _ci_caption(table, "Point: mean; band / error bar") + skip)


def bars(table: pd.DataFrame, title: str, sub: str):
    """Grouped bars: private group, then public group; error bars = the seed interval (interval_text)."""
    fig, ax = plt.subplots(figsize=(8, 3.8))
    x0, ticks, labels = 0.0, [], []
    for setting in ["private", "public"]:
        t = table[table["setting"] == setting]
        ms = _methods(t)
        for i, m in enumerate(ms):
            r = t[t["method"] == m].iloc[0]
            xx = x0 + i
            ax.bar(xx, PCT * r["mean"], color=COLORS.get(m))
            ax.errorbar(xx, PCT * r["mean"], yerr=[[v] for v in _yerr(r)],
                        color="k", capsize=3, lw=1)
        ticks.append(x0 + (len(ms) - 1) / 2)
        labels.append(TITLES[setting])
        x0 += len(ms) + 1
    ax.set_xticks(ticks, labels)
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS.get(m)) for m in _methods(table)]
    _legend_outside(ax, handles, _methods(table))
    ax.set_ylabel("test accuracy (%, best-val snapshot)")
    lo = max(0.0, PCT * float(table["ci_low"].min()) - 10) if len(table) else 0.0
    ax.set_ylim(lo, min(100.0, PCT * float(table["ci_high"].max()) + 5) if len(table) else 100.0)
    _chance_line(ax)
    ax.grid(axis="y", alpha=0.3)
    return _finish(fig, title, sub, table, _ci_caption(table, "Bar: mean; error bar"))


def curves(table: pd.DataFrame, title: str, sub: str):
    """Test accuracy per round: mean line and seed-interval band (interval_text) per method."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for m in _methods(table):
        g = table[table["method"] == m].sort_values("round")
        ax.plot(g["round"], PCT * g["mean"], color=COLORS.get(m), label=m)
        ax.fill_between(g["round"], PCT * g["ci_low"], PCT * g["ci_high"], color=COLORS.get(m), alpha=0.2)
    _chance_line(ax)
    ax.set_xlabel("communication round")
    ax.set_ylabel("test accuracy (%)")
    _legend_outside(ax)
    ax.grid(alpha=0.3)
    return _finish(fig, title, sub, table, _ci_caption(table, "Line: mean; band"))


def _cell_text(v) -> str:
    """A table cell as drawn: empty for a missing value, a whole number without ".0" (a column with gaps
    reads back from its csv as floats, so the computed and the re-rendered figure agree)."""
    if v is None or (isinstance(v, (float, np.floating)) and np.isnan(v)):
        return ""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def table_figure(table: pd.DataFrame, title: str, sub: str, col_width=None):
    """A configuration table drawn as a figure."""
    n = len(table)
    fig, ax = plt.subplots(figsize=(min(16, 1.6 * len(table.columns) + 2), 0.32 * n + 1.2))
    ax.axis("off")
    cells = [[_cell_text(v) for v in row] for row in table.to_numpy()]
    if col_width is None:  # columns as wide as their longest cell, so no text runs past its cell
        longest = [max([len(str(c))] + [len(r[i]) for r in cells]) + 2 for i, c in enumerate(table.columns)]
        col_width = [w / sum(longest) for w in longest]
        fig.set_size_inches(max(fig.get_size_inches()[0], min(16, 0.075 * sum(longest))), fig.get_size_inches()[1])
    tab = ax.table(cellText=cells, colLabels=list(table.columns), loc="center", cellLoc="left",
                   colWidths=col_width)
    tab.auto_set_font_size(False)
    tab.set_fontsize(7)
    tab.scale(1, 1.25)
    for (r, _), cell in tab.get_celld().items():
        if r == 0:
            cell.set_text_props(weight="bold")
    return _finish(fig, title, sub)
