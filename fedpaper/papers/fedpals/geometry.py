"""FedPALS artifacts that need no image training: Fig 1 (ternary geometry), the label-marginal
statistics of Figs 2a/2b/5a/5b/6a, and the synthetic Gaussian task of Fig 9 (App. A.5, B.4).
"""
from __future__ import annotations

import json
import math
from functools import lru_cache

import numpy as np
import pandas as pd

from fedpaper.algorithms import get_method, weights as W
from fedpaper.runs.experiment import Execution, RunSpec
from fedpaper.claims.summaries import seed_summary
from fedpaper.runs.store import spec_json
from fedpaper.blocks.data import gaussian_task
from fedpaper.blocks.data.synthetic import N1, N2, S1, S2, target_marginal
from fedpaper.engine import Federation, Pools

# ----------------------------------------------------------------------------- Fig 1 (vague-24)
#: Panel A: the synthetic task's clients (M=2 < K=3) and a target outside their hull.
#: Panel B: four clients of unequal size and a target inside their hull.
FIG1_PANELS = {
    "A": {"S": [[0.5, 0.5, 0.0], [0.5, 0.0, 0.5]], "n": [40, 18], "T": [0.0, 0.5, 0.5]},
    "B": {"S": [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.45, 0.45, 0.1]],
          "n": [60, 15, 10, 80], "T": [0.3, 0.3, 0.4]},
}
_VERTS = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, math.sqrt(3) / 2]])


def to_xy(p) -> np.ndarray:
    """Barycentric coordinates on the 2-simplex -> points of the plane (equilateral triangle)."""
    return np.asarray(p, dtype=float) @ _VERTS


def fig1_panel(S, n, T) -> dict:
    """alpha^0 (eq. 8), alpha^FA (eq. 4), the implied marginals and their L2 distances to T."""
    S, n, T = np.asarray(S, float), np.asarray(n, float), np.asarray(T, float)
    a0 = W.fedpals_weights(S, n, T, 0.0)
    afa = W.fedavg_weights(n)
    return {"S": S, "n": n, "T": T, "alpha0": a0, "alpha_fa": afa, "p0": a0 @ S, "pfa": afa @ S,
            "d0": float(np.linalg.norm(a0 @ S - T)), "dfa": float(np.linalg.norm(afa @ S - T)),
            "inside": W.projection_distance(S, T) < 1e-12}


def fig1_table(panels=None) -> pd.DataFrame:
    rows = []
    for name, spec in (panels or FIG1_PANELS).items():
        g = fig1_panel(**spec)
        pts = [(f"S{i + 1}", s, g["alpha0"][i], g["alpha_fa"][i]) for i, s in enumerate(g["S"])]
        pts += [("T", g["T"], None, None), ("alpha0 S (FedPALS)", g["p0"], None, None),
                ("alphaFA S (FedAvg)", g["pfa"], None, None)]
        for label, p, a0, afa in pts:
            rows.append({"panel": name, "point": label, "p0": p[0], "p1": p[1], "p2": p[2],
                         "alpha_fedpals": a0, "alpha_fedavg": afa, "metric": "", "value": np.nan})
        for metric, v in (("l2_fedpals_to_T", g["d0"]), ("l2_fedavg_to_T", g["dfa"]),
                          ("T_inside_hull", float(g["inside"]))):
            rows.append({"panel": name, "point": "", "metric": metric, "value": v})
    return pd.DataFrame(rows)


def _simplex_axes(ax):
    tri = np.vstack([_VERTS, _VERTS[:1]])
    ax.plot(tri[:, 0], tri[:, 1], color="0.3", lw=1)
    for v, lab, off in zip(_VERTS, ["Y=0", "Y=1", "Y=2"], [(-0.06, -0.05), (0.0, -0.05), (-0.03, 0.03)]):
        ax.text(v[0] + off[0], v[1] + off[1], lab, fontsize=8)
    ax.set_aspect("equal")
    ax.axis("off")


def draw_fig1_panel(ax, sub: pd.DataFrame, title: str):
    from scipy.spatial import ConvexHull

    _simplex_axes(ax)
    pts = sub[sub["point"].fillna("") != ""].set_index("point")  # an empty cell reads back from csv as NaN
    clients = pts.loc[[i for i in pts.index if i.startswith("S")], ["p0", "p1", "p2"]].to_numpy(float)
    xy = to_xy(clients)
    if len(xy) >= 3:
        hull = xy[ConvexHull(xy).vertices]
        ax.fill(hull[:, 0], hull[:, 1], color="C0", alpha=0.15, label="Conv(S)")
    else:
        ax.plot(xy[:, 0], xy[:, 1], color="C0", lw=3, alpha=0.3, label="Conv(S)")
    ax.scatter(xy[:, 0], xy[:, 1], color="C0", s=25, zorder=3)
    for (x, y), name in zip(xy, [i for i in pts.index if i.startswith("S")]):
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    style = {"T": ("k", "*", 140), "alpha0 S (FedPALS)": ("C3", "o", 50), "alphaFA S (FedAvg)": ("C2", "s", 40)}
    for name, (c, mk, sz) in style.items():
        p = to_xy(pts.loc[name, ["p0", "p1", "p2"]].to_numpy(float))
        ax.scatter([p[0]], [p[1]], color=c, marker=mk, s=sz, zorder=4, label=name.replace("alpha", "α"))
    ax.set_title(title, fontsize=9)


# ----------------------------------------------------------------------------- label marginals
def distance_rows(parts_by_x: dict, dataset: str, xname: str) -> list[dict]:
    """Mean ± std (ddof=1) of d(T, S) over the seeds' partitions at each grid value (vague-25)."""
    rows = []
    for x, parts in parts_by_x.items():
        d = [W.projection_distance(p.marginals[:-1], p.marginals[-1]) for p in parts]
        rows.append({"dataset": dataset, xname: x,
                     **seed_summary(d, "projection_distance", n_resamples=200, per_seed=".5f")})
    return rows


def marginal_rows(part, dataset: str, setting: str, class_names) -> list[dict]:
    rows = []
    for i, (cnt, mg) in enumerate(zip(part.counts, part.marginals)):
        for k, name in enumerate(class_names):
            rows.append({"dataset": dataset, "label_split": setting, "client": i,
                         "role": "target" if i == part.num_clients - 1 else "train", "class": k,
                         "class_name": name, "count": int(cnt[k]), "proportion": float(mg[k])})
    return rows


# ----------------------------------------------------------------------------- Fig 9 (App. A.5, B.4)
def standardise_task(t):
    """The task with every feature standardised by the mean and std of the two clients' pooled
    training points (vague-22, as every image data set here: statistics of the training data only).

    App. B.4 (l.416) does not say how the features are scaled; raw features (|mu_y| up to 7.2)
    left 100 full-batch GD steps at lr 0.1 far from convergence, with a ranking of FedPALS and
    FedAvg decided by the optimiser's progress rather than by the aggregation weights."""
    import dataclasses

    x = np.concatenate([c[0] for c in t.clients])
    mu, sd = x.mean(axis=0), x.std(axis=0)

    def f(a):
        return ((a - mu) / sd).astype(np.asarray(a).dtype)

    return dataclasses.replace(t, clients=[(f(cx), cy) for cx, cy in t.clients], x_val=f(t.x_val),
                               x_test=f(t.x_test), meta=dict(t.meta, standardised=True))


def fig9_pools(deltas, seeds, n_test, n_val, standardise=False):
    """One train/test pool holding every (delta, seed) task, and the Federation of each."""

    xs, ys, xt, yt, feds, tasks = [], [], [], [], {}, {}
    off_tr = off_te = 0
    for d in deltas:
        for s in seeds:
            t = gaussian_task(d, seed=s, n_test=n_test, n_val=n_val)
            if standardise:
                t = standardise_task(t)
            parts = [t.clients[0], t.clients[1], (t.x_val, t.y_val)]
            idx = []
            for x, y in parts:
                idx.append(np.arange(off_tr, off_tr + len(y)))
                xs.append(x), ys.append(y)
                off_tr += len(y)
            xt.append(t.x_test), yt.append(t.y_test)
            test = np.arange(off_te, off_te + len(t.y_test))
            off_te += len(t.y_test)
            feds[(d, s)] = Federation(idx[:2], test, val_indices=idx[2], target_marginal=t.target_marginal, seed=s)
            tasks[(d, s)] = t
    pools = Pools.from_arrays(np.concatenate(xs), np.concatenate(ys), np.concatenate(xt), np.concatenate(yt), 3)
    return pools, feds, tasks


@lru_cache(maxsize=4)
def _fig9_joint(options_json: str):
    o = json.loads(options_json)
    return fig9_pools(o["deltas"], o["seeds"], o["n_test"], o["n_val"], o.get("standardise", False))


def _fig9_run_pools(options: dict, data_root, device):
    """Every (delta, seed) task of the sweep in one pool, so runs of any delta train as one batch."""
    return _fig9_joint(spec_json(options))[0]


def _fig9_federation(spec: RunSpec, pools=None, data_root=None):
    """The two clients, validation and test set of the (delta, seed) task in the joint pool."""
    return _fig9_joint(spec_json(spec.data["options"]))[1][(spec.partition["delta"], spec.seed)]


def fig9_lambdas(S, n, T, range_fractions) -> list[float]:
    """lambda = 0 and the lambdas whose ESS lies the given fractions of the way from ESS(alpha^0)
    to N (FedAvg, Prop. 2).

    The paper tunes FedPALS's lambda on a target-distributed validation set (Sec. 5, l.194). The
    image grid {lambda_25, lambda_50, lambda_75} (ESS = 25/50/75 % of N, vague-8) is empty here:
    alpha^0 = (0.5, 0.5) already has ESS = 86 % of N, so every fraction maps to lambda = 0 and
    nothing would be tuned. Fractions of the remaining range keep three distinct candidates between
    alpha^0 and the FedAvg weights."""
    a0 = W.fedpals_weights(S, n, T, 0.0)
    e0 = W.effective_sample_size(a0, n) / n.sum()
    lams = {0.0} | {round(W.lambda_for_ess(S, n, T, e0 + f * (1 - e0)), 9) for f in range_fractions}
    return sorted(lams)


def fig9_specs(p: dict) -> list[RunSpec]:
    """FedAvg on every (delta, seed), then FedPALS over each lambda of its grid (`fig9_lambdas`,
    per delta); runs sharing a method and lambda train as one batch, whatever their delta."""

    deltas, seeds = p["deltas"], p["seeds"]
    opts = {"deltas": list(deltas), "seeds": list(seeds), "n_test": p["n_test"], "n_val": p["n_val"]}
    if p.get("standardise"):
        opts["standardise"] = True
    data = {"name": "fedpals-fig9", "options": opts, "stands_for": None}
    training = {"model": "logreg", "model_kwargs": {"in_features": 2, "num_classes": 3}, "lr": p["lr"],
                "batch_size": p["batch_size"], "local_epochs": 1, "rounds": p["rounds"]}
    S, n = np.stack([S1, S2]), np.array([N1, N2], float)
    by_lam: dict = {}  # runs sharing lambda train as one batch, whatever their delta
    for d in deltas:
        for lam in fig9_lambdas(S, n, target_marginal(d), p["ess_range"]):
            by_lam.setdefault(lam, []).extend((d, s) for s in seeds)
    jobs = [("FedAvg", None, [(d, s) for d in deltas for s in seeds])]
    jobs += [("FedPALS", lam, keys) for lam, keys in sorted(by_lam.items())]
    specs = []
    for name, lam, keys in jobs:
        m = get_method(name) if lam is None else get_method(name, lam=float(lam))
        specs += [RunSpec(paper="fedpals", data=data, partition={"layout": "fedpals-fig9", "seed": s, "delta": d},
                          method=m.algorithm().spec(), training=training, tags={"method": name, "lam": lam})
                  for d, s in keys]
    return specs


#: How Fig 9's runs execute: on CPU, with vmap, every run in one engine call (the pipeline's
#: ArtifactJob.execution, with max_batch=None)
FIG9_EXECUTION = Execution(backend="vmap", device="cpu")


def fig9_records(specs: list, results: list) -> pd.DataFrame:
    """Per (delta, seed, method) of Fig 9's runs (`fig9_specs`) and their results: best-validation
    test accuracy; FedPALS over its lambda grid."""
    lams: dict = {}  # distinct lambda candidates per delta (1: nothing was chosen on validation)
    for s in specs:
        if s.tags["lam"] is not None:
            lams.setdefault(s.partition["delta"], set()).add(s.tags["lam"])
    rows = []
    for s, r in zip(specs, results):
        hr = pd.DataFrame(r["history"])
        best = hr.loc[hr["val_acc"].idxmax()]
        rows.append({"delta": s.partition["delta"], "seed": s.seed, "method": s.tags["method"], "lam": s.tags["lam"],
                     "val_acc": best["val_acc"], "test_acc": best["test_acc"], "final_test_acc": hr["test_acc"].iloc[-1],
                     "lambda_candidates": len(lams[s.partition["delta"]]) if s.tags["lam"] is not None else None})
    return pd.DataFrame(rows)


def _candidates(g: pd.DataFrame):
    """How many distinct lambdas FedPALS chose from at this delta ("-" for other methods)."""
    if "lambda_candidates" not in g or g["lambda_candidates"].isna().all():
        return "-"
    return int(g["lambda_candidates"].max())


def fig9_table(runs: pd.DataFrame) -> pd.DataFrame:
    """FedPALS: per (delta, seed) the lambda with the best validation accuracy (vague-18)."""

    runs = runs.sort_values(["delta", "seed", "method", "val_acc"], ascending=[True, True, True, False])
    sel = runs.groupby(["delta", "seed", "method"], as_index=False).first()
    rows = []
    for (d, m), g in sel.groupby(["delta", "method"]):
        dist = W.projection_distance(np.stack([S1, S2]), target_marginal(d))
        rows.append({"delta": d, "projection_distance": dist, "method": m,
                     **seed_summary(100 * g["test_acc"].to_numpy(), "accuracy_pct", n_resamples=200),
                     "lambda_selected": ";".join("-" if pd.isna(x) else f"{x:g}" for x in g["lam"]),
                     "lambda_candidates": _candidates(g)})
    return pd.DataFrame(rows)


def fig9_lambda_notes(tab: pd.DataFrame) -> list[str]:
    """Say where FedPALS's lambda was not chosen on validation: the ESS grid gave one candidate."""
    one = tab[(tab["method"] == "FedPALS") & (tab["lambda_candidates"] == 1)]
    if one.empty:
        return ["FedPALS lambda chosen per seed on validation accuracy from lambda=0 and the lambdas whose ESS lies "
                "25/50/75% of the way from ESS(alpha^0) to N (lambda_candidates)"]
    ds = ", ".join(f"{d:g}" for d in one["delta"])
    return [f"FedPALS lambda NOT chosen on validation at delta {ds}: the ESS grid collapsed to one candidate "
            "(lambda_candidates = 1), so lambda_selected there is that single value"]
