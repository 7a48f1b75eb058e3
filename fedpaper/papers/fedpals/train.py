"""Run settings, summaries and drawings of the FedPALS artifacts that train on Fashion-MNIST /
CIFAR-10: Table 1, the accuracy-vs-shift curves (Figs 2c, 5c, 6b), Fig 7 and Fig 8 (a, b, c).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from fedpaper.runs.experiment import default_device
from fedpaper.claims.chance import CHANCE_MARGIN, at_chance, chance_level
from fedpaper.claims.rows import cell_of
from fedpaper.claims.summaries import group_fields, seed_summary
from fedpaper.papers.fedpals import runs as R
from fedpaper.runs.provenance import compute_record


def runs_per_engine_call() -> int:
    """Runs trained together in one engine call of the FedPALS sweeps: one on CPU, else up to 16.

    Clients of unequal size are padded to the largest in an engine call, and each seed's partition
    differs, so several seeds trained together compute more padding than one run alone; on CPU
    one run per call trains more useful samples per CPU second and lets a deadline (--max-hours) be
    checked after every run. A GPU wants the larger batches."""
    return 1 if default_device() == "cpu" else 16


def settings_specs(p: dict, settings: list[dict], data_root=None) -> list:
    """Every spec of the settings, setting by setting: the runs an artifact declares (ArtifactJob.specs)."""
    return [s for st in settings for s in R.method_specs(p, st["dataset"], st["split"], st["methods"], p["seeds"],
                                                         data_root, **st.get("kw", {}))]


def setting_label(*named: str):
    """A declared sweep's `split_by`: one run_specs call per setting, labelled by its data set, label
    split and the `named` settings ("num_clients", "local_epochs") that tell its settings apart."""
    where = {"num_clients": "partition", "local_epochs": "training"}

    def label(s) -> str:
        kw = ", ".join(f"{k}={getattr(s, where[k])[k]}" for k in named)
        return f"{R.dataset_of(s.data)} {R.label_setting(s.partition['split'])}" + (f" ({kw})" if kw else "")
    return label


def records(specs: list, results: list) -> pd.DataFrame:
    """One row per (setting, method, seed): the best-validation snapshot; FedPALS's lambda chosen
    per seed on target-validation accuracy (vague-8, -19); plus 'FedPALS (lambda=0)' rows."""
    rows = []
    for (k, seed), (s, r) in R.selected(specs, results).items():
        rows.append(_record(s, r, k[-1]))
    for s, r in zip(specs, results):
        if s.tags["method"] == "FedPALS" and s.tags["lam"] == 0.0:
            rows.append(_record(s, r, "FedPALS (lambda=0)"))
    return pd.DataFrame(rows)


def _record(s, r: dict, method: str) -> dict:
    t = s.training
    return {"dataset": R.DISPLAY[R.dataset_of(s.data)],
            "label_split": R.label_setting(s.partition["split"]), "clients": s.partition["num_clients"],
            "local_epochs": t["local_epochs"], "rounds": t["rounds"], "participation": t["participation"],
            "method": method, "seed": s.seed, "lam": s.tags["lam"], "test_acc": 100 * r["best"]["test_acc"],
            "val_acc": 100 * R.best_val(r), "best_round": r["best"]["round"], "diverged_at": r.get("diverged_at"),
            "_spec": s, "_result": r}


def summary(rec: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean ± sample std (ddof=1, vague-13) over seeds of the target test accuracy (%). Where a
    seed's run diverged (experiment._result's "diverged_at"), its best-validation snapshot from the
    rounds before is used and a "diverged" column names the seed and round."""
    rows = []
    for key, g in rec.groupby(by, sort=False):
        lam = ";".join("-" if x is None or pd.isna(x) else f"{x:.4g}" for x in g["lam"])
        rows.append({**group_fields(by, key), **seed_summary(g["test_acc"].to_numpy(), "accuracy_pct", n_resamples=500,
                                                              ci=True), "val_mean": g["val_acc"].mean(),
                     "per_seed": ";".join(f"{v:.2f}" for v in g["test_acc"]), "lambda_per_seed": lam,
                     "diverged": diverged_text(g)})
    tab = pd.DataFrame(rows)
    return tab if (tab["diverged"] != "").any() else tab.drop(columns="diverged")


def diverged_text(g: pd.DataFrame) -> str:
    """'seed 2 at round 121; ...' for the rows of `g` whose run diverged, else ''."""
    if "diverged_at" not in g:
        return ""
    return "; ".join(f"seed {s} at round {int(d)}" for s, d in zip(g["seed"], g["diverged_at"])
                     if d is not None and not pd.isna(d))


def has_diverged(cell) -> bool:
    """Whether a table's "diverged" cell names a diverged seed: a non-empty text (a table read back
    from its csv holds NaN where the cell was empty)."""
    return isinstance(cell, str) and cell != ""


def diverged_notes(tab: pd.DataFrame) -> list[str]:
    """One note per table cell with a diverged run, for the figure and its provenance."""
    if "diverged" not in tab:
        return []
    keys = [c for c in ("dataset", "label_split", "method") if c in tab]
    return [f"{' '.join(str(r[c]) for c in keys)}: diverged ({r['diverged']}; non-finite training loss); "
            f"that seed's best-validation snapshot before it is used (marked †)"
            for _, r in tab.iterrows() if has_diverged(r["diverged"])]


def info(p: dict, datasets: list[str], data_root=None, notes=()) -> dict:
    descs = [R.pools(R.data_spec(d, p), data_root).description for d in datasets]
    descs = [dict(d, name=ds) if p.get("stand_ins") else d for d, ds in zip(descs, datasets)]
    return {"datasets": descs, "device": default_device(), "notes": list(notes)}


def subtitle(fig, p: dict, caption: str = ""):
    """The caption under the figure: what the error bars are, then the profile's notes."""
    import textwrap

    notes = p.get("notes") or []
    width = max(60, int(fig.get_size_inches()[0] * 17))
    text = "\n".join(textwrap.fill(t, width) for t in ([caption] if caption else []) + (["; ".join(notes)] if notes else []))
    if text:
        fig.text(0.5, -0.01, text, ha="center", va="top", fontsize=6.5, color="0.3")


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


def table1_run_settings(p: dict) -> list[dict]:
    """The settings of Table 1's image rows (settings_specs' form), every Table 1 method in each."""
    return [{"dataset": d, "split": s, "methods": R.TABLE1_METHODS} for d, s in table1_settings(p)]


def table1_summary(specs: list, results: list, p: dict, data_root=None) -> tuple[pd.DataFrame, dict]:
    """Table 1's image rows and their info from their runs (`table1_run_settings`) and results."""
    rec = records(specs, results)
    tab = summary(rec, ["dataset", "label_split", "clients", "method"])
    datasets = list(dict.fromkeys(d for d, _ in table1_settings(p)))
    inf = info(p, datasets, data_root, list(p.get("notes") or []) + diverged_notes(tab))
    return tab, {**inf, "compute": compute_record(results)}


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
            if len(o) and "diverged" in o and has_diverged(o["diverged"].iloc[0]):
                txt += " †"  # a seed diverged: the notes say which and when
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
    diverged = diverged_notes(tab)
    caption = table_chance_caption(tab) + (" † " + "; ".join(diverged) if diverged else "")
    subtitle(fig, params, caption.strip())
    return fig


def methods_at_chance(g: pd.DataFrame) -> list:
    """The methods of one setting's rows (one label split) at chance by the one rule of the claims
    (claims.chance: CHANCE_RULE; per-seed values from the 'per_seed' column when present)."""
    chance = chance_level(g["label_split"].iloc[0]) if "label_split" in g else None
    return at_chance({r["method"]: cell_of(r) for _, r in g.iterrows()}, chance)


def table_chance_caption(tab: pd.DataFrame) -> str:
    """'At chance (...): FedProx, SCAFFOLD in CIFAR-10 C=3; ...' for the cells whose models sit at
    chance by the claims' rule (claims.chance.CHANCE_RULE), '' when none does."""
    parts = []
    for (ds, ls), g in tab.groupby(["dataset", "label_split"], sort=False):
        low = methods_at_chance(g[~g["method"].str.contains(r"\(", regex=True)])
        if low:
            parts.append(f"{', '.join(low)} in {ds} {ls}")
    head = f"At chance (most seeds within {CHANCE_MARGIN:g} points of a one-class model or of 0): "
    return (head + "; ".join(parts)) if parts else ""


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


def shift_summary(specs: list, results: list) -> pd.DataFrame:
    tab = summary(records(specs, results), ["dataset", "label_split", "clients", "method"])
    x = tab["label_split"].str.split("=").str[1].astype(float)
    tab.insert(2, "C" if tab["label_split"].iloc[0].startswith("C") else "beta", x)
    return tab


AXIS_WORDS = {"C": "labels per client C", "beta": "Dirichlet concentration β (smaller = more skewed)",
              "local_epochs": "local epochs per round E", "training_clients": "number of training clients"}
CHANCE_WORDS = "chance: 100/C % on a target uniform over its C labels (a one-class model)"


def std_caption(tab: pd.DataFrame, what: str = "error bars") -> str:
    n = sorted({int(v) for v in tab["n_seeds"].dropna()}) if "n_seeds" in tab else []
    seeds = "/".join(map(str, n)) if n else "the"
    text = f"Points: mean; {what}: ± 1 std over {seeds} seeds, clipped to [0, 100]"
    splits = set(tab["label_split"]) if "label_split" in tab else set()
    if any(chance_level(s) is not None for s in splits):
        text += f"; dotted line or grey dashes: {CHANCE_WORDS}"
    if any(chance_level(s) is None for s in splits):
        text += "; Dirichlet targets: chance not marked (their majority share is not recorded)"
    return text


def clipped_std(g: pd.DataFrame) -> np.ndarray:
    """[2, n] error-bar lengths: ± 1 std, cut where it would cross 0 % or 100 %."""
    m, sd = g["mean"].to_numpy(float), g["std"].fillna(0).to_numpy(float)
    return np.vstack([np.minimum(sd, m), np.minimum(sd, 100 - m)])


def draw_chance(ax, xs, splits) -> None:
    """Chance level at each x (100/C for a "C=k" target; nothing for Dirichlet targets): one dotted
    horizontal line when it is the same everywhere, else a grey dash at each x."""
    pts = [(x, chance_level(s)) for x, s in zip(xs, splits) if chance_level(s) is not None]
    if not pts:
        return
    levels = {c for _, c in pts}
    if len(levels) == 1:
        ax.axhline(levels.pop(), color="0.4", ls=":", lw=1)
    else:
        ax.plot([x for x, _ in pts], [c for _, c in pts], color="0.4", ls="none", marker="_", ms=14, mew=1.5)


def chance_note(tab: pd.DataFrame, xcol: str | None, word: str | None = None) -> str:
    """'at chance: FedAvg, SCAFFOLD at E=15' for the methods at chance at each setting, by the claims'
    rule (claims.chance.CHANCE_RULE: chance 100/C on a C-label target, one-class values)."""
    def where(x):
        return str(x) if isinstance(x, str) else f"{word or xcol}={x:g}"

    parts = []
    for key, g in tab.groupby(xcol or "label_split", sort=False):
        low = methods_at_chance(g)
        if low:
            parts.append(f"{', '.join(low)}" + (f" at {where(key)}" if xcol else ""))
    return ("at chance: " + "; ".join(parts)) if parts else ""


def _runs_of_contiguous(xs: list[float], integer_grid: bool) -> list[list[int]]:
    """Index runs to join with a line: on an integer grid (C) a skipped value breaks the line."""
    runs: list[list[int]] = []
    for i, x in enumerate(xs):
        if runs and not (integer_grid and x - xs[i - 1] > 1):
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def draw_curve(tab: pd.DataFrame, params: dict, xcol: str, title: str, logx=False, ylabel="Target accuracy (%)"):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    main = tab[~tab["method"].str.contains(r"\(")]
    integer_grid = xcol in ("C", "local_epochs", "training_clients")
    for i, (m, g) in enumerate(main.groupby("method", sort=False)):
        g = g.sort_values(xcol)
        ls = "--" if m == "Oracle" else "-"
        ax.errorbar(g[xcol], g["mean"], yerr=clipped_std(g), label=m, ls="none", marker="o", ms=3, capsize=2,
                    color=f"C{i}")
        xs = g[xcol].tolist()
        for run in _runs_of_contiguous(xs, integer_grid):  # lines only between neighbouring settings
            if len(run) > 1:
                ax.plot(g[xcol].iloc[run], g["mean"].iloc[run], ls=ls, color=f"C{i}", lw=1.2)
    per_x = main.drop_duplicates(xcol).sort_values(xcol)
    draw_chance(ax, per_x[xcol], per_x["label_split"])
    xs_all = sorted(main[xcol].unique())
    if logx:
        ax.set_xscale("log")
        ax.minorticks_off()
    ax.set_xticks(xs_all, [f"{x:g}" for x in xs_all])  # label every setting that was run (E = 1, 5, 15)
    ax.set_xlabel(AXIS_WORDS.get(xcol, xcol))
    ax.set_ylabel(ylabel)
    word = {"local_epochs": "E", "training_clients": "M"}.get(xcol, xcol)
    note = chance_note(main, xcol, word)
    ax.set_title(title + (f"\n{note}" if note else ""), fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(alpha=0.3)
    gaps = integer_grid and any(b - a > 1 for a, b in zip(xs_all, xs_all[1:]))
    caption = std_caption(main) + (f"; no line across values of {word} that were not run" if gaps else "")
    subtitle(fig, params, caption)
    return fig


# ----------------------------------------------------------------------------- Fig 7
FIG7_SETTINGS = [("fashion-mnist", {"scheme": "sparsity", "C": 6}), ("cifar10", {"scheme": "dirichlet", "beta": 0.2})]


def fig7_settings(p: dict) -> list[dict]:
    return [{"dataset": d, "split": s, "methods": p["fig7_methods"]} for d, s in FIG7_SETTINGS]


def fig7_summary(specs: list, results: list, p: dict, data_root=None) -> tuple[pd.DataFrame, dict]:
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
            lo, hi = clipped_std(g)
            ax.fill_between(g["round"], g["mean"] - lo, g["mean"] + hi, color=f"C{i}", alpha=0.12)
        draw_chance(ax, [0], [ls])
        note = chance_note(sub[sub["round"] == sub["round"].max()], None)
        ax.set_title(f"{ds}, {ls}" + (f"\nfinal round: {note}" if note else ""), fontsize=9)
        ax.set_xlabel("Round")
        ax.set_ylabel("Target test accuracy (%)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    subtitle(fig, params, std_caption(tab, "bands").replace("Points", "Lines"))
    return fig


# ----------------------------------------------------------------------------- Fig 8
def fig8a_lambda(p: dict) -> float:
    """lambda = 1000 (App. B.3); with a data fraction f < 1, lambda = 1000 f: the penalty
    lambda * sum(alpha_i^2 / n_i) of eq. (9) is unchanged when every n_i shrinks by f."""
    f = R.data_fraction(p, "cifar10")
    return 1000.0 if f is None or f == 1 else round(1000.0 * float(f), 4)


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


#: The settings each Fig 8 panel's sweeps are labelled by (setting_label): num_clients or local_epochs, as its kw set
FIG8_NAMED = {"fig8a": ("num_clients",), "fig8b": ("local_epochs",), "fig8c": ("num_clients",)}


def fig8_summary(specs: list, results: list) -> pd.DataFrame:
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
            ax.bar(np.arange(len(xs)) + i * w, g["mean"], w, yerr=clipped_std(g), label=m, capsize=2)
        ax.set_xticks(np.arange(len(xs)) + 0.4 - w / 2, xs)
        ax.set_xlabel("label split (labels per client C)")
        ax.set_ylabel("Target test accuracy (%)")
        chance = [chance_level(x) for x in xs]
        ax.hlines([c for c in chance if c is not None], [k - w for k, c in enumerate(chance) if c is not None],
                  [k + 0.8 for k, c in enumerate(chance) if c is not None], color="0.4", ls=":", lw=1)
        note = chance_note(tab, "label_split")
        ax.set_title(f"CIFAR-10, {int(tab['training_clients'].iloc[0])} clients, 10% participation, "
                     f"lambda={tab['lambda_per_seed'].iloc[0].split(';')[0]}" + (f"\n{note}" if note else ""),
                     fontsize=9)
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        subtitle(fig, params, std_caption(tab).replace("Points", "Bars"))
        return fig
    xcol = "local_epochs" if which == "fig8b" else "training_clients"
    title = ("CIFAR-10, C=3: accuracy vs local epochs E (rounds = base rounds / E)" if which == "fig8b"
             else "CIFAR-10, C=3: accuracy vs number of training clients")
    return draw_curve(tab, params, xcol, title, logx=True)
