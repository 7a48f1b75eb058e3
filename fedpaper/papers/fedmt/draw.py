"""Figures of the FedMT artifacts: accuracy lines over a setting, and M-error curves over rounds."""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def _finish(fig, title, sub):
    fig.suptitle(title, fontsize=10, y=0.99)
    fig.text(0.5, -0.02, textwrap.fill(sub, 110), ha="center", va="top", fontsize=7)
    fig.tight_layout()
    return fig


def lines(table: pd.DataFrame, x: str, metric: str, title: str, sub: str, xlabel: str, logx=False):
    """mean ± sd over seeds of `metric` against column `x`, one line per method."""
    t = table[table["metric"] == metric]
    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    for name, g in t.groupby("method", sort=False):
        g = g.sort_values(x)
        ax.errorbar(g[x].astype(float), g["mean"], yerr=g["std"].fillna(0), marker="o", capsize=3, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric.replace("_", " ") + " (%)")
    if logx:
        ax.set_xscale("log", base=2)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False, loc="best")
    return _finish(fig, title, sub)


def bars(table: pd.DataFrame, group: str, metric: str, title: str, sub: str):
    """Grouped bars of `metric` (mean ± sd) per `group` value and method."""
    t = table[table["metric"] == metric].copy()
    t[group] = t[group].astype(str)
    groups = list(dict.fromkeys(t[group]))
    methods = list(dict.fromkeys(t["method"]))
    fig, ax = plt.subplots(figsize=(7.4, 3.6))
    w = 0.8 / max(1, len(methods))
    for i, m in enumerate(methods):
        g = t[t["method"] == m].set_index(group).reindex(groups)
        ax.bar(np.arange(len(groups)) + i * w, g["mean"], w, yerr=g["std"].fillna(0), label=m, capsize=2)
    ax.set_xticks(np.arange(len(groups)) + w * (len(methods) - 1) / 2, groups)
    ax.set_xlabel(group)
    ax.set_ylabel(metric.replace("_", " ") + " (%)")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # off the bars
    ax.grid(alpha=0.3, axis="y")
    return _finish(fig, title, sub)


def error_curves(table: pd.DataFrame, title: str, sub: str):
    """fig3: mean over seeds of the clients' mean Frobenius error per round, band = mean client sd."""
    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    for (method, nc), g in table.groupby(["method", "N_c"], sort=False):
        g = g.groupby("round").agg(m=("err_mean", "mean"), s=("err_sd", "mean")).reset_index()
        ax.errorbar(g["round"], g["m"], yerr=g["s"], marker=".", capsize=2, label=f"{method}, N_c={nc}")
    ax.set_xlabel("communication round")
    ax.set_ylabel("||M_hat_c - M||_F (mean ± sd over clients)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False)
    return _finish(fig, title, sub)
