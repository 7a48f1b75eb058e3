"""Figures of the private-label-sets artifacts: line plots over L (or E), grouped bars, curves over
rounds and configuration tables. Every plot shows mean with the 95% bootstrap CI over seeds."""
from __future__ import annotations

import matplotlib.pyplot as plt  # the backend is the caller's (MPLBACKEND, Jupyter): never set it here
import numpy as np
import pandas as pd

COLORS = {"FedAvg": "C0", "FedProx": "C1", "FedRS": "C2", "Tuning-MSE": "C3", "Tuning-Pairwise": "C4",
          "Tuning-Pairwise (all pairs)": "C5"}
ORDER = list(COLORS)
TITLES = {"private": "Private label sets", "public": "Public label sets"}


def _methods(df: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(df["method"]))
    return [m for m in ORDER if m in present] + [m for m in present if m not in ORDER]


def _finish(fig, title: str, sub: str):
    fig.suptitle(title + (f"\n{sub}" if sub else ""), fontsize=9 if sub else 11)
    fig.tight_layout()
    return fig


def lines(table: pd.DataFrame, x: str, title: str, sub: str, xlabel: str):
    """Two panels (private | public): accuracy vs `x`, one line per method, CI as a band."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, setting in zip(axes, ["private", "public"]):
        t = table[table["setting"] == setting]
        for m in _methods(t):
            g = t[t["method"] == m].sort_values(x)
            ax.plot(g[x], g["mean"], marker="o", ms=3, color=COLORS.get(m), label=m)
            ax.fill_between(g[x], g["ci_low"], g["ci_high"], color=COLORS.get(m), alpha=0.15)
        ax.set_title(TITLES[setting], fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_xticks(sorted(t[x].unique()) if len(t) else [])
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy (best-val snapshot)")
    axes[1].legend(fontsize=7, loc="lower right")
    return _finish(fig, title, sub)


def bars(table: pd.DataFrame, title: str, sub: str):
    """Grouped bars: private group, then public group; error bars = 95% bootstrap CI."""
    fig, ax = plt.subplots(figsize=(8, 3.8))
    x0, ticks, labels = 0.0, [], []
    for setting in ["private", "public"]:
        t = table[table["setting"] == setting]
        ms = _methods(t)
        for i, m in enumerate(ms):
            r = t[t["method"] == m].iloc[0]
            xx = x0 + i
            ax.bar(xx, r["mean"], color=COLORS.get(m))
            ax.errorbar(xx, r["mean"], yerr=[[r["mean"] - r["ci_low"]], [r["ci_high"] - r["mean"]]],
                        color="k", capsize=3, lw=1)
        ticks.append(x0 + (len(ms) - 1) / 2)
        labels.append(TITLES[setting])
        x0 += len(ms) + 1
    ax.set_xticks(ticks, labels)
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS.get(m)) for m in _methods(table)]
    ax.legend(handles, _methods(table), fontsize=7, ncol=3, loc="lower center")
    ax.set_ylabel("test accuracy (best-val snapshot)")
    lo = max(0.0, float(table["ci_low"].min()) - 0.1) if len(table) else 0.0
    ax.set_ylim(lo, min(1.0, float(table["ci_high"].max()) + 0.05) if len(table) else 1.0)
    ax.grid(axis="y", alpha=0.3)
    return _finish(fig, title, sub)


def curves(table: pd.DataFrame, title: str, sub: str):
    """Test accuracy per round: mean line and 95% CI band per method."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for m in _methods(table):
        g = table[table["method"] == m].sort_values("round")
        ax.plot(g["round"], g["mean"], color=COLORS.get(m), label=m)
        ax.fill_between(g["round"], g["ci_low"], g["ci_high"], color=COLORS.get(m), alpha=0.2)
    ax.set_xlabel("communication round")
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _finish(fig, title, sub)


def table_figure(table: pd.DataFrame, title: str, sub: str, col_width=None):
    """A configuration table drawn as a figure."""
    n = len(table)
    fig, ax = plt.subplots(figsize=(min(16, 1.6 * len(table.columns) + 2), 0.32 * n + 1.2))
    ax.axis("off")
    cells = [["" if (isinstance(v, float) and np.isnan(v)) else str(v) for v in row] for row in table.to_numpy()]
    tab = ax.table(cellText=cells, colLabels=list(table.columns), loc="center", cellLoc="left",
                   colWidths=col_width)
    tab.auto_set_font_size(False)
    tab.set_fontsize(7)
    tab.scale(1, 1.25)
    for (r, _), cell in tab.get_celld().items():
        if r == 0:
            cell.set_text_props(weight="bold")
    return _finish(fig, title, sub)
