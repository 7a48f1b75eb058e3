"""FedNCA-ML figures: result tables (ours next to the paper's), per-client class counts (figs
9-12), composite examples (fig 8), t-SNE and cosine maps (figs 3, 4, 6, 7) and attention maps
(fig 5). Reads results only."""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

METRIC_ORDER = ["macro-AUC", "macro-F1", "micro-AUC", "micro-F1"]


def _finish(fig, title: str, sub: str, notes=()):
    fig.suptitle(title, fontsize=11, y=0.995)
    lines = [sub] + [n for n in notes]
    text = "\n".join(textwrap.fill(t, 150) for t in lines if t)
    fig.text(0.01, -0.01, text, fontsize=7, va="top", ha="left", color="#444")
    return fig


def _fmt(v, s=None):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "–"
    return f"{v:.2f}" + ("" if s is None or (isinstance(s, float) and np.isnan(s)) else f" ± {s:.2f}")


def results_table(table: pd.DataFrame, reported: pd.DataFrame | None, row_keys: list, title: str, sub: str,
                  notes=()):
    """One row per (row keys), one column per metric: "ours (paper)"; the per-batch value under it."""
    rows, cells = [], []
    metrics = [m for m in METRIC_ORDER if m in set(table["metric"])]
    for key, g in table.groupby(row_keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        rows.append(" | ".join(str(k) for k in key))
        line = []
        for m in metrics:
            r = g[g["metric"] == m]
            ours = _fmt(r["mean"].iloc[0], r["std"].iloc[0]) if len(r) else "–"
            batch = _fmt(r["batch_mean"].iloc[0]) if len(r) else "–"
            paper = "–"
            if reported is not None:
                sel = reported[reported["metric"] == m]
                for k, v in zip(row_keys, key):
                    if k in sel:
                        sel = sel[sel[k].astype(str) == str(v)]
                if len(sel):
                    paper = _fmt(float(sel["mean"].iloc[0]), float(sel["std"].iloc[0]) if "std" in sel and
                                 pd.notna(sel["std"].iloc[0]) else None)
            line.append(f"{ours}\n(batch {batch}; paper {paper})")
        cells.append(line)
    fig, ax = plt.subplots(figsize=(3.0 * len(metrics) + 3.5, 0.62 * len(rows) + 1.3))
    ax.axis("off")
    t = ax.table(cellText=cells, rowLabels=rows, colLabels=metrics, loc="center", cellLoc="center")
    t.auto_set_font_size(False)
    t.set_fontsize(7)
    t.scale(1, 2.4)
    return _finish(fig, title, sub, ["cells: ours over the whole test set (mean ± std over seeds), the official "
                                     "per-batch average, and the paper's number; best-validation macro-AUC round",
                                     *notes])


def client_counts(panels: list, title: str, sub: str, notes=()):
    """panels: [(partition, class names, panel title)] -> stacked per-client class-count bars."""
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 3.8), squeeze=False)
    for ax, (part, names, ptitle) in zip(axes[0], panels):
        part.plot(ax=ax, title=ptitle, class_names=names, normalize=False)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return _finish(fig, title, sub, notes)


def composite_examples(x: np.ndarray, y: np.ndarray, names: list, title: str, sub: str, notes=(), n=8):
    """Example composite images (uint8 [N, C, S, S]) with their label sets."""
    n = min(n, len(x))
    fig, axes = plt.subplots(1, n, figsize=(1.8 * n, 2.6), squeeze=False)
    for i, ax in enumerate(axes[0]):
        img = x[i].transpose(1, 2, 0)
        ax.imshow(img.squeeze(), cmap="gray" if img.shape[-1] == 1 else None)
        ax.set_axis_off()
        ax.set_title("\n+ ".join(names[c] for c in np.flatnonzero(y[i])), fontsize=6)
    return _finish(fig, title, sub, notes)


def tsne_panel(tab: pd.DataFrame, title: str, sub: str, notes=()):
    """t-SNE points coloured by class, marker by the image's label count."""
    fig, ax = plt.subplots(figsize=(6.2, 5.2))
    classes = sorted(set(tab["class"]))  # the same colour for a class in every panel
    cmap = plt.get_cmap("tab10" if len(classes) <= 10 else "tab20")
    markers = {1: "o", 2: "^"}
    for ci, c in enumerate(classes):
        for cnt, g in tab[tab["class"] == c].groupby("label_count"):
            ax.scatter(g["x"], g["y"], s=8, color=cmap(ci % cmap.N), marker=markers.get(int(cnt), "s"), alpha=0.7,
                       label=f"{c}" if cnt == tab[tab['class'] == c]["label_count"].min() else None)
    ax.set_xticks([]), ax.set_yticks([])
    ax.legend(fontsize=6, markerscale=1.5, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False,
              title="class (o: 1 label, ^: 2 labels)", title_fontsize=6)
    fig.tight_layout()
    return _finish(fig, title, sub, notes)


def cosine_panel(tab: pd.DataFrame, title: str, sub: str, notes=()):
    names = list(dict.fromkeys(tab["class_i"]))
    S = tab.pivot(index="class_i", columns="class_j", values="cosine").loc[names, names].to_numpy()
    fig, ax = plt.subplots(figsize=(5.4, 4.8))
    im = ax.imshow(S, vmin=-1, vmax=1, cmap="coolwarm")
    short = [n[:12] for n in names]
    ax.set_xticks(range(len(names)), short, rotation=60, fontsize=6, ha="right")
    ax.set_yticks(range(len(names)), short, fontsize=6)
    for i in range(len(names)):
        for j in range(len(names)):
            ax.text(j, i, f"{S[i, j]:.2f}", ha="center", va="center", fontsize=5)
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title(f"mean off-diagonal cosine {float(tab['mean_off_diagonal'].iloc[0]):.3f}", fontsize=8)
    fig.tight_layout()
    return _finish(fig, title, sub, notes)


def attention_panel(shown: list, classes: list, tab: pd.DataFrame, title: str, sub: str, notes=()):
    """Rows: composites; columns: the image, then its attention map per positive class (bilinear
    upsampling by imshow over the image extent)."""
    n = max(1, len(shown))
    fig, axes = plt.subplots(n, 3, figsize=(6.0, 2.0 * n), squeeze=False)
    for i, row in enumerate(axes):
        for ax in row:
            ax.set_axis_off()
        if i >= len(shown):
            continue
        img, pos, maps = shown[i]
        im = img.transpose(1, 2, 0)
        row[0].imshow(im)
        row[0].set_title("image", fontsize=7)
        for j, c in enumerate(pos[:2]):
            ax = row[1 + j]
            ax.imshow(im)
            ax.imshow(maps[c], cmap="jet", alpha=0.5, interpolation="bilinear",
                      extent=(-0.5, im.shape[1] - 0.5, im.shape[0] - 0.5, -0.5))
            sel = tab[(tab["image"] == tab["image"].unique()[i]) & (tab["class"] == classes[c])] if len(tab) else tab
            share = (f"\nmass: own quadrant {sel['mass_own'].iloc[0]:.3f}, other {sel['mass_other'].iloc[0]:.3f}"
                     if len(sel) else "")
            ax.set_title(textwrap.shorten(classes[c], 24) + share, fontsize=6)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / fig.get_figheight()))  # room for the suptitle
    scale = ("colour scale of each map: its own minimum (blue) to maximum (red), so a nearly uniform map (every "
             "quadrant near 0.25 of the mass, see the titles) still looks contrasted")
    return _finish(fig, title, sub, [*notes, scale])
