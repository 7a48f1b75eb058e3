"""Compute and draw functions of the FedPALS artifacts that train on Fashion-MNIST / CIFAR-10:
Table 1, the accuracy-vs-shift curves (Figs 2c, 5c, 6b), Fig 7 and Fig 8 (a, b, c).
"""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd

from fedpaper.experiment import default_device, run_specs
from fedpaper.metrics import summarize
from fedpaper.papers import fedpals_runs as R

PAPER_FIG8A_CLIENT_SIZE = 50000 / 101  # CIFAR-10 images per partition with 101 partitions


def _progress() -> bool:
    return os.environ.get("FEDPAPER_PROGRESS", "1") != "0"


def _gkey(s: dict) -> tuple:
    t = s["train"]
    return (s["data"].get("stands_for", s["data"]["name"]), json.dumps(s["split"], sort_keys=True),
            s["num_clients"], t["local_epochs"], t["rounds"], t["participation"], R.method_label(s))


def train_settings(p: dict, settings: list[dict], data_root=None, desc="fedpals") -> tuple[list, list]:
    """Run (or read from the cache) every spec of the settings; returns (specs, results)."""
    specs, results = [], []
    for st in settings:  # one sweep per setting: runs batched together must have equal client counts
        sp = R.method_specs(p, st["dataset"], st["split"], st["methods"], p["seeds"], data_root, **st.get("kw", {}))
        specs += sp
        kw = ", ".join(f"{k}={v}" for k, v in st.get("kw", {}).items() if k in ("local_epochs", "num_clients"))
        label = f"{desc} {st['dataset']} {R.label_setting(st['split'])}" + (f" ({kw})" if kw else "")  # unique
        results += run_specs(sp, R.builder(data_root), desc=label, progress=_progress())
    return specs, results


def records(specs: list, results: list) -> pd.DataFrame:
    """One row per (setting, method, seed): the best-validation snapshot; FedPALS's lambda chosen
    per seed on target-validation accuracy (vague-8, -19); plus 'FedPALS (lambda=0)' rows."""
    rows = []
    for (k, seed), (s, r) in R.selected(specs, results, _gkey).items():
        rows.append(_record(s, r, k[-1]))
    for s, r in zip(specs, results):
        if s["method"] == "FedPALS" and s["lam"] == 0.0:
            rows.append(_record(s, r, "FedPALS (lambda=0)"))
    return pd.DataFrame(rows)


def _record(s: dict, r: dict, method: str) -> dict:
    t = s["train"]
    return {"dataset": R.DISPLAY[s["data"].get("stands_for", s["data"]["name"])],
            "label_split": R.label_setting(s["split"]), "clients": s["num_clients"],
            "local_epochs": t["local_epochs"], "rounds": t["rounds"], "participation": t["participation"],
            "method": method, "seed": s["seed"], "lam": s["lam"], "test_acc": 100 * r["best"]["test_acc"],
            "val_acc": 100 * R.best_val(r), "best_round": r["best"]["round"], "_spec": s, "_result": r}


def summary(rec: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean ± sample std (ddof=1, vague-13) over seeds of the target test accuracy (%)."""
    rows = []
    for key, g in rec.groupby(by, sort=False):
        s = summarize(g["test_acc"].to_numpy(), n_resamples=500)
        lam = ";".join("-" if x is None or pd.isna(x) else f"{x:.4g}" for x in g["lam"])
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "metric": "accuracy_pct",
                     "mean": s["mean"], "std": s["std"], "n_seeds": s["n"], "ci_low": s["ci_low"],
                     "ci_high": s["ci_high"], "val_mean": g["val_acc"].mean(),
                     "per_seed": ";".join(f"{v:.2f}" for v in g["test_acc"]), "lambda_per_seed": lam})
    return pd.DataFrame(rows)


def info(p: dict, datasets: list[str], data_root=None, notes=()) -> dict:
    descs = [R.pools(R.data_spec(d, p), data_root).description for d in datasets]
    descs = [dict(d, name=ds) if p.get("stand_ins") else d for d, ds in zip(descs, datasets)]
    return {"datasets": descs, "device": default_device(), "notes": list(notes)}


def subtitle(fig, p: dict):
    notes = p.get("notes") or []
    if notes:
        fig.text(0.5, -0.01, "; ".join(notes), ha="center", va="top", fontsize=6.5, wrap=True, color="0.3")


# ----------------------------------------------------------------------------- Table 1
TABLE1_SETTINGS = [("fashion-mnist", {"scheme": "sparsity", "C": 3}), ("fashion-mnist", {"scheme": "sparsity", "C": 2}),
                   ("cifar10", {"scheme": "sparsity", "C": 3}), ("cifar10", {"scheme": "sparsity", "C": 2}),
                   ("cifar10", {"scheme": "dirichlet", "beta": 0.1})]


def table1_settings(p: dict) -> list:
    """The Table 1 rows of this profile (all five, except at the smoke profile)."""
    rows = p.get("table1_rows")
    if rows is None:
        return TABLE1_SETTINGS
    return [(d, s) for d, s in TABLE1_SETTINGS if [d, R.label_setting(s)] in [list(r) for r in rows]]


def table1_compute(p: dict, data_root=None) -> tuple[pd.DataFrame, dict]:
    settings = [{"dataset": d, "split": s, "methods": R.TABLE1_METHODS} for d, s in table1_settings(p)]
    specs, results = train_settings(p, settings, data_root, desc="fedpals table1")
    rec = records(specs, results)
    tab = summary(rec, ["dataset", "label_split", "clients", "method"])
    return tab, info(p, ["fashion-mnist", "cifar10"], data_root, p.get("notes"))


def draw_table(tab: pd.DataFrame, params: dict, reported: pd.DataFrame | None, title: str):
    """A table figure: rows = settings, columns = methods, cells 'ours ± std (paper)'."""
    import matplotlib.pyplot as plt

    rows = list(dict.fromkeys(zip(tab["dataset"], tab["label_split"])))
    methods = [m for m in R.TABLE1_METHODS if m in set(tab["method"])]
    cells = []
    for ds, ls in rows:
        line = []
        for m in methods:
            o = tab[(tab.dataset == ds) & (tab.label_split == ls) & (tab.method == m)]
            txt = f"{o['mean'].iloc[0]:.1f} ± {o['std'].iloc[0]:.1f}" if len(o) else "–"
            if reported is not None:
                q = reported[(reported.dataset == ds) & (reported.label_split == ls) & (reported.method == m)]
                txt += f"\n({q['mean'].iloc[0]:.1f})" if len(q) else ""
            line.append(txt)
        cells.append(line)
    fig, ax = plt.subplots(figsize=(1.35 * len(methods) + 1.6, 0.62 * len(rows) + 1.0))
    ax.axis("off")
    t = ax.table(cellText=cells, rowLabels=[f"{d} {s}" for d, s in rows], colLabels=methods, loc="center",
                 cellLoc="center")
    t.auto_set_font_size(False)
    t.set_fontsize(7)
    t.scale(1, 2.2)
    ax.set_title(title, fontsize=9)
    subtitle(fig, params)
    return fig


# ----------------------------------------------------------------------------- accuracy vs shift
def shift_settings(p: dict, g: dict) -> dict:
    """{artifact name: [settings]}: Fig 2c (CIFAR-10, C), Fig 6b (FMNIST, C), Fig 5c (CIFAR-10, beta).

    Points that coincide with a Table 1 row run all Table 1 methods (shared cached runs)."""
    t1 = {(d, json.dumps(s, sort_keys=True)) for d, s in table1_settings(p)}

    def st(d, s):
        full = (d, json.dumps(s, sort_keys=True)) in t1
        return {"dataset": d, "split": s, "methods": R.TABLE1_METHODS if full else g["shift_methods"]}

    return {"fig2c": [st("cifar10", {"scheme": "sparsity", "C": c}) for c in g["shift_C"]],
            "fig6b": [st("fashion-mnist", {"scheme": "sparsity", "C": c}) for c in g["shift_C"]],
            "fig5c": [st("cifar10", {"scheme": "dirichlet", "beta": b}) for b in g["shift_beta"]]}


def shift_table(p: dict, settings: list, data_root=None) -> pd.DataFrame:
    specs, results = train_settings(p, settings, data_root, desc="fedpals accuracy vs shift")
    tab = summary(records(specs, results), ["dataset", "label_split", "clients", "method"])
    x = tab["label_split"].str.split("=").str[1].astype(float)
    tab.insert(2, "C" if tab["label_split"].iloc[0].startswith("C") else "beta", x)
    return tab


def draw_curve(tab: pd.DataFrame, params: dict, xcol: str, title: str, logx=False, ylabel="Target accuracy (%)"):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for i, (m, g) in enumerate(tab[~tab["method"].str.contains(r"\(")].groupby("method", sort=False)):
        g = g.sort_values(xcol)
        ls = "--" if m == "Oracle" else "-"
        ax.errorbar(g[xcol], g["mean"], yerr=g["std"], label=m, ls=ls, marker="o", ms=3, capsize=2, color=f"C{i}")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xcol)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, frameon=False)
    ax.grid(alpha=0.3)
    subtitle(fig, params)
    return fig


# ----------------------------------------------------------------------------- Fig 7
FIG7_SETTINGS = [("fashion-mnist", {"scheme": "sparsity", "C": 6}), ("cifar10", {"scheme": "dirichlet", "beta": 0.2})]


def fig7_compute(p: dict, data_root=None) -> tuple[pd.DataFrame, dict]:
    settings = [{"dataset": d, "split": s, "methods": p["fig7_methods"]} for d, s in FIG7_SETTINGS]
    specs, results = train_settings(p, settings, data_root, desc="fedpals fig7")
    rec = records(specs, results)
    rows = []
    for _, r in rec[~rec["method"].str.contains(r"\(")].iterrows():
        for h in r["_result"]["history"]:
            rows.append({"dataset": r["dataset"], "label_split": r["label_split"], "method": r["method"],
                         "seed": r["seed"], "round": h["round"], "acc": 100 * h["test_acc"]})
    long = pd.DataFrame(rows)
    tab = (long.groupby(["dataset", "label_split", "method", "round"], sort=False)["acc"]
           .agg(mean="mean", std=lambda v: v.std(ddof=1) if len(v) > 1 else 0.0, n_seeds="count").reset_index())
    tab.insert(3, "metric", "accuracy_pct")
    return tab, info(p, ["fashion-mnist", "cifar10"], data_root, p.get("notes"))


def draw_fig7(tab: pd.DataFrame, params: dict):
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys(zip(tab["dataset"], tab["label_split"])))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, (ds, ls) in zip(axes[0], panels):
        sub = tab[(tab.dataset == ds) & (tab.label_split == ls)]
        for i, (m, g) in enumerate(sub.groupby("method", sort=False)):
            ax.plot(g["round"], g["mean"], label=m, color=f"C{i}", ls="--" if m == "Oracle" else "-")
            ax.fill_between(g["round"], g["mean"] - g["std"], g["mean"] + g["std"], color=f"C{i}", alpha=0.12)
        ax.set_title(f"{ds}, {ls}", fontsize=9)
        ax.set_xlabel("Round")
        ax.set_ylabel("Target test accuracy (%)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, frameon=False)
    subtitle(fig, params)
    return fig


# ----------------------------------------------------------------------------- Fig 8
def fig8a_lambda(p: dict) -> float:
    """lambda = 1000 (App. B.3); with capped clients, rescaled so lambda / N matches the paper's."""
    cap = p["per_client"].get("cifar10")
    return 1000.0 if cap is None else round(1000.0 * cap / PAPER_FIG8A_CLIENT_SIZE, 4)


def fig8_settings(p: dict) -> dict:
    c3 = {"scheme": "sparsity", "C": 3}
    ms, R0 = p["fig8_methods"], p["rounds"]["cifar10"]
    a = [{"dataset": "cifar10", "split": {"scheme": "sparsity", "C": c}, "methods": ms,
          "kw": {"num_clients": p["fig8a_clients"] + 1, "participation": 0.1, "lam": fig8a_lambda(p)}}
         for c in p["fig8a_C"]]
    b = [{"dataset": "cifar10", "split": c3, "methods": ms,
          "kw": {"local_epochs": e, "rounds": max(1, round(R0 / e))}} for e in p["fig8b_E"]]
    c = [{"dataset": "cifar10", "split": c3, "methods": ms,
          "kw": {"num_clients": m + 1, "participation": 0.1 if m >= 50 else 1.0}} for m in p["fig8c_clients"]]
    return {"fig8a": a, "fig8b": b, "fig8c": c}


def fig8_table(p: dict, settings: list, data_root=None) -> pd.DataFrame:
    specs, results = train_settings(p, settings, data_root, desc="fedpals fig8")
    rec = records(specs, results)
    rec["training_clients"] = rec["clients"] - 1
    return summary(rec, ["dataset", "label_split", "clients", "training_clients", "local_epochs", "rounds",
                         "participation", "method"])


def draw_fig8(tab: pd.DataFrame, params: dict, which: str):
    import matplotlib.pyplot as plt

    tab = tab[~tab["method"].str.contains(r"\(")]
    if which == "fig8a":
        fig, ax = plt.subplots(figsize=(5.2, 3.6))
        xs = list(dict.fromkeys(tab["label_split"]))
        methods = list(dict.fromkeys(tab["method"]))
        w = 0.8 / len(methods)
        for i, m in enumerate(methods):
            g = tab[tab.method == m].set_index("label_split").reindex(xs)
            ax.bar(np.arange(len(xs)) + i * w, g["mean"], w, yerr=g["std"], label=m, capsize=2)
        ax.set_xticks(np.arange(len(xs)) + 0.4 - w / 2, xs)
        ax.set_ylabel("Target test accuracy (%)")
        ax.set_title(f"CIFAR-10, {int(tab['training_clients'].iloc[0])} clients, 10% participation, "
                     f"lambda={tab['lambda_per_seed'].iloc[0].split(';')[0]}", fontsize=9)
        ax.legend(fontsize=7, frameon=False)
        subtitle(fig, params)
        return fig
    xcol = "local_epochs" if which == "fig8b" else "training_clients"
    title = ("CIFAR-10, C=3: accuracy vs local epochs E (rounds = base rounds / E)" if which == "fig8b"
             else "CIFAR-10, C=3: accuracy vs number of training clients")
    return draw_curve(tab, params, xcol, title, logx=True)
