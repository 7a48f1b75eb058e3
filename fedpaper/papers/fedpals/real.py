"""FedPALS on PACS (App. A.6: Fig 3a, Tables 2 and 4, Table 1's PACS row) and iWildCam (App. A.7:
Fig 3b, Fig 4, Table 3).

Real code paths: ResNet-50 with ImageNet weights (`resnet50_imagenet`), the Bai et al. PACS split
modified as in App. A.6 (`pacs_split`), the WILDS iWildCam loader with camera locations grouped into
100 clients (`location_clients`), the target perturbation of App. A.4 (`perturb_marginal`). Without
the data (or the weights) the artifacts are not regenerated (DataMissingError). The SMOKE profile
runs the same code on clearly labelled synthetic stand-ins: 7-class synthetic images for PACS and a
20-class, 100-client stand-in with synthetic "camera locations" for iWildCam, with the small LeNet
instead of ResNet-50.
"""
from __future__ import annotations

import copy
import os

import numpy as np
import pandas as pd

from fedpaper.algorithms import get_method
from fedpaper.algorithms import weights as W
from fedpaper.engine import Federation, Pools
from fedpaper.runs.experiment import Execution, RunSpec, default_device, get_pools, pools_key_of
from fedpaper.claims.summaries import seed_summary
from fedpaper.blocks.partition import oracle_partition
from fedpaper.runs.store import spec_json
from fedpaper.blocks.data import load_iwildcam

PACS_LAMBDAS = [0, 12, 42, 93]  # App. A.6 (ESS ~ 15/25/50/75 %)
IWILD_LAMBDAS = [0, 600, 2500, 5800]  # App. A.7 (ESS ~ 8/25/50/75 %)
PACS_BASELINES = ["FedAvg", "FedProx", "SCAFFOLD", "AFL", "FedRS", "Oracle"]
IWILD_BASELINES = ["FedAvg", "FedProx", "SCAFFOLD", "AFL"]
_HYPER = {"mu": 0.01, "fedrs_alpha": 0.5, "afl_step": 0.01}

PROFILES = {
    "pacs": {
        "paper": {"data": {"name": "pacs", "kwargs": {}}, "seeds": 3, "lambdas": PACS_LAMBDAS, "deltas": [1e-3, 1e-2, 0.5],
                  "train": {"model": "resnet50_imagenet", "model_kwargs": {}, "optimizer": "adam", "lr": 5e-5,
                            "batch_size": 32, "local_epochs": 1, "rounds": 50, "participation": 1.0, "eval_every": 1},
                  "val_fraction": 0.1, "small_fraction": 0.1, "hyper": _HYPER, "notes": []},
        "smoke": {"data": {"name": "synthetic-images", "kwargs": {"num_classes": 7, "n_train": 900, "n_test": 210,
                                                                  "shape": (3, 16, 16), "seed": 3}},
                  "seeds": 2, "lambdas": "ess", "ess_fractions": [0.5], "deltas": [0.5],
                  "train": {"model": "lenet", "model_kwargs": {"c2": 16}, "optimizer": "sgd", "lr": 0.1,
                            "batch_size": 32, "local_epochs": 1, "rounds": 2, "participation": 1.0, "eval_every": 1},
                  "val_fraction": 0.1, "small_fraction": 0.1, "hyper": _HYPER,
                  "notes": ["SMOKE: synthetic 7-class 16x16 stand-in for PACS, LeNet instead of ResNet-50, "
                            "lambda grid {0, lambda_50} by ESS, Table 2 delta 0.5 only, 2 seeds, 2 rounds; not a result"]},
    },
    "iwildcam": {
        "paper": {"data": {"name": "iwildcam", "kwargs": {}}, "seeds": 3, "lambdas": IWILD_LAMBDAS, "num_clients": 100,
                  "fig4_lambdas": [600, 2500, 5800], "max_per_split": None,
                  "train": {"model": "resnet50_imagenet", "model_kwargs": {}, "optimizer": "adam", "lr": 3e-5,
                            "batch_size": 16, "local_epochs": 1, "rounds": 80, "participation": 1.0, "eval_every": 1},
                  "hyper": _HYPER, "notes": []},
        "smoke": {"data": {"name": "synthetic-images", "kwargs": {"num_classes": 20, "n_train": 1600, "n_test": 300,
                                                                  "shape": (3, 16, 16), "seed": 4}},
                  "seeds": 2, "lambdas": "ess", "ess_fractions": [0.5], "num_clients": 100, "fig4_lambdas": "ess",
                  "locations": 200,
                  "train": {"model": "lenet", "model_kwargs": {"c2": 16}, "optimizer": "sgd", "lr": 0.1,
                            "batch_size": 16, "local_epochs": 1, "rounds": 2, "participation": 1.0, "eval_every": 1},
                  "hyper": _HYPER,
                  "notes": ["SMOKE: synthetic 20-class 16x16 stand-in for iWildCam with synthetic camera locations, "
                            "100 tiny clients, LeNet instead of ResNet-50, lambda grid {0, lambda_50} by ESS; not a result"]},
    },
}
PROFILES["pacs"]["quick"] = PROFILES["pacs"]["long"] = PROFILES["pacs"]["paper"]
PROFILES["iwildcam"]["quick"] = PROFILES["iwildcam"]["long"] = PROFILES["iwildcam"]["paper"]


def profile(group: str, prof: str) -> dict:
    """The group's profile parameters; p["data"] in RunSpec form {"name", "options", "stands_for"}."""
    p = copy.deepcopy(PROFILES[group][prof])
    d = p["data"]
    p["data"] = {"name": d["name"], "options": {k: list(v) if isinstance(v, tuple) else v for k, v in d["kwargs"].items()},
                 "stands_for": group if d["name"] == "synthetic-images" else None}
    return p


# ============================================================================= shared
def pools(data: dict, data_root=None):
    return get_pools(pools_key_of(data, data_root))


def _labels(data: dict, data_root):
    pl = pools(data, data_root)
    return pl.y_train.cpu().numpy(), pl.y_test.cpu().numpy()


#: Runs per engine call of the PACS and iWildCam sweeps (memory permitting)
MAX_BATCH = 16


def execution(model: str) -> Execution:
    """How runs of `model` execute: the grouped backend for the LeNet stand-ins on CPU (no per-shape
    calibration), else "auto"; FEDPAPER_BACKEND overrides."""
    backend = "grouped" if default_device() == "cpu" and model == "lenet" else "auto"
    return Execution(backend=os.environ.get("FEDPAPER_BACKEND", backend))


def _method(method: str, hyper: dict, lam=None) -> dict:
    """The engine Method's fields of a display name (the Oracle trains FedAvg, App. A.3)."""
    over = dict(hyper)
    if lam is not None:
        over["lam"] = float(lam)
    name = "FedAvg" if method == "Oracle" else method
    return get_method(name, **over).with_(name=method).algorithm().spec()


def marginal(y: np.ndarray, k: int) -> np.ndarray:
    c = np.bincount(y, minlength=k).astype(float)
    return c / c.sum()


def perturb_marginal(T, delta: float, seed: int) -> np.ndarray:
    """App. A.4: T_p = normalise(T + delta * max(eps, 0)), eps ~ N(0, I_K) drawn per seed (vague-15)."""
    eps = np.random.default_rng([int(seed), 4]).standard_normal(len(T))
    tp = np.asarray(T, float) + delta * np.maximum(eps, 0.0)
    return tp / tp.sum()


def ess_lambdas(S, n, T, fractions=(0.25, 0.5, 0.75)) -> list[float]:
    return [0.0] + [round(float(W.lambda_for_ess(S, n, T, f)), 6) for f in fractions]


def ess_pct(S, n, T, lam) -> float:
    return 100 * W.effective_sample_size(W.fedpals_weights(S, n, T, lam), n) / n.sum()


def _client_stats(fed: Federation, y_train, k):
    S = np.stack([marginal(y_train[np.asarray(c)], k) for c in fed.client_indices])
    return S, fed.sizes().astype(float), fed.target_marginal


def _best(result: dict, by: str, report: str) -> tuple[float, int]:
    """(report metric, round) at the round with the best `by` metric (vague-19)."""
    h = [r for r in result["history"] if r.get(by) is not None and r[by] == r[by]]
    if not h:
        return float("nan"), -1
    b = max(h, key=lambda r: r[by])
    return float(b[report]), int(b["round"])


# ============================================================================= PACS
def pacs_split(y_train, y_test, seed: int, val_fraction=0.1, small_fraction=0.1, num_clients=3, drop_label=2):
    """App. A.6 (vague-14): source images minus a random validation share (label 2 removed) go to
    three random, equal thirds; client k drops label k; client 2 keeps a random 10 %; the target
    (test) images lose label 2. Returns clients, val, test (index arrays) and T(Y)."""
    rng = np.random.default_rng([int(seed), 6])
    k = int(max(y_train.max(), y_test.max()) + 1)
    perm = rng.permutation(y_train.size)
    n_val = int(round(val_fraction * y_train.size))
    val = np.sort(perm[:n_val][y_train[perm[:n_val]] != drop_label])
    thirds = np.array_split(perm[n_val:], num_clients)
    clients = [np.sort(t[y_train[t] != i]) for i, t in enumerate(thirds)]
    small = clients[drop_label]
    clients[drop_label] = np.sort(rng.choice(small, size=max(1, int(round(small_fraction * small.size))), replace=False))
    test = np.flatnonzero(y_test != drop_label)
    return {"clients": clients, "val": val, "test": test, "T": marginal(y_test[test], k),
            "pool": np.sort(perm[n_val:])}


def pacs_federation(spec: RunSpec, pools=None, data_root=None) -> Federation:
    q, seed = spec.partition, spec.seed
    y_tr, y_te = _labels(spec.data, data_root)
    sp = pacs_split(y_tr, y_te, seed, q["val_fraction"], q["small_fraction"])
    clients = sp["clients"]
    if q["oracle"]:
        sizes = [c.size for c in clients]
        clients = oracle_partition(y_tr, sp["T"], sizes, seed, pool=sp["pool"], scale_to_fit=True).client_indices
    T = sp["T"] if q["delta"] is None else perturb_marginal(sp["T"], q["delta"], seed)
    return Federation(list(clients), sp["test"], val_indices=sp["val"], target_marginal=T, seed=seed)


_LAMBDAS: dict = {}


def lam_labels(p: dict) -> list:
    """Display labels of the lambda grid: the values, or '0', 'ESS50', ... when set by ESS."""
    if p["lambdas"] != "ess":
        return list(p["lambdas"])
    return ["0"] + [f"ESS{round(100 * f)}" for f in p["ess_fractions"]]


def _pacs_lambdas(p: dict, seed: int, data_root) -> list[float]:
    if p["lambdas"] != "ess":
        return [float(x) for x in p["lambdas"]]
    key = ("pacs", spec_json(p["data"]), spec_json(p["ess_fractions"]), int(seed), str(data_root))
    if key not in _LAMBDAS:
        fed = pacs_federation(_pspec(p, seed, "FedPALS", 0.0), data_root)
        y_tr, _ = _labels(p["data"], data_root)
        _LAMBDAS[key] = ess_lambdas(*_client_stats(fed, y_tr, len(fed.target_marginal)), p["ess_fractions"])
    return _LAMBDAS[key]


def _pspec(p, seed, method, lam=None, delta=None) -> RunSpec:
    return RunSpec(
        paper="fedpals", data=p["data"],
        partition={"layout": "fedpals-pacs", "seed": int(seed), "val_fraction": p["val_fraction"],
                   "small_fraction": p["small_fraction"], "oracle": method == "Oracle", "delta": delta},
        method=_method(method, p["hyper"], lam), training=p["train"],
        tags={"method": method, "lam": lam, "delta": delta})


def pacs_specs(p: dict, data_root=None) -> list[RunSpec]:
    """Every PACS run: FedPALS over the lambda grid, FedProx+FedPALS (lambda=0), the baselines,
    and FedPALS (lambda=0) with the perturbed target marginals of Table 2."""
    specs = []
    for i in range(len(_pacs_lambdas(p, p["seeds"][0], data_root))):
        specs += [_pspec(p, s, "FedPALS", _pacs_lambdas(p, s, data_root)[i]) for s in p["seeds"]]
    specs += [_pspec(p, s, "FedProx+FedPALS", 0.0) for s in p["seeds"]]
    for m in PACS_BASELINES:
        specs += [_pspec(p, s, m) for s in p["seeds"]]
    for d in p["deltas"]:
        specs += [_pspec(p, s, "FedPALS", 0.0, delta=d) for s in p["seeds"]]
    return specs


def is_pacs(spec: RunSpec) -> bool:
    """Whether a run is one of the PACS runs (`pacs_specs`)."""
    return spec.partition.get("layout") == "fedpals-pacs"


def pacs_records(specs: list, results: list, p: dict, data_root=None) -> pd.DataFrame:
    """One row per PACS run (`pacs_specs(p)`) and its result: best source-validation round's target
    accuracy, and its curve."""
    rows = []
    for i, (s, r) in enumerate(zip(specs, results)):
        acc, rnd = _best(r, "val_acc", "test_acc")
        t = s.tags
        lam_idx = None
        if t["method"] == "FedPALS" and t["delta"] is None:
            lam_idx = _pacs_lambdas(p, s.seed, data_root).index(t["lam"])
        rows.append({"method": t["method"], "lam": t["lam"], "lam_index": lam_idx, "delta": t["delta"],
                     "seed": s.seed, "test_acc": 100 * acc, "best_round": rnd,
                     "curve": [100 * h["test_acc"] for h in r["history"]]})
    return pd.DataFrame(rows)


def _lam_label(p, row) -> object:
    if p["lambdas"] == "ess" and row["lam_index"] is not None and row["lam_index"] == row["lam_index"]:
        return lam_labels(p)[int(row["lam_index"])]
    return row["lam"]


def _acc_rows(g: pd.DataFrame, base: dict, metric="accuracy_pct", col="test_acc") -> dict:
    return {**base, **seed_summary(g[col].to_numpy(), metric, n_resamples=200, per_seed=".2f")}


def _lam_key(r: pd.DataFrame) -> pd.Series:
    """Grouping key of a run's lambda: its grid position for FedPALS (ESS-derived lambdas differ
    between seeds), the value otherwise (-1: none)."""
    return r["lam_index"].where(r["method"] == "FedPALS", r["lam"]).fillna(-1)


def table4_table(runs: pd.DataFrame, p: dict) -> pd.DataFrame:
    """Table 4: every FedPALS lambda, FedProx+FedPALS (lambda=0) and the baselines (no FedRS)."""
    r = runs[runs["delta"].isna() & (runs["method"] != "Oracle") & (runs["method"] != "FedRS")]
    rows = []
    for (m, lam), g in r.groupby(["method", _lam_key(r)], sort=False):
        lam_out = _lam_label(p, g.iloc[0]) if m == "FedPALS" else (None if lam == -1 else lam)
        rows.append(_acc_rows(g, {"dataset": "PACS", "clients": 3, "lambda": lam_out, "method": m}))
    return pd.DataFrame(rows)


def table2_table(runs: pd.DataFrame) -> pd.DataFrame:
    r = runs[runs["delta"].notna()]
    return pd.DataFrame([_acc_rows(g, {"dataset": "PACS", "clients": 3, "delta": d, "method": "FedPALS"})
                         for d, g in r.groupby("delta")])


def table1_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 1's PACS row: FedPALS lambda=0 (source-validation selected), baselines and Oracle."""
    r = runs[runs["delta"].isna() & ~runs["method"].isin(["FedProx+FedPALS"])]
    r = r[(r["method"] != "FedPALS") | (r["lam"] == 0)]
    rows = [_acc_rows(g, {"dataset": "PACS", "label_split": "C=6", "clients": 3, "method": m})
            for m, g in r.groupby("method", sort=False)]
    return pd.DataFrame(rows)


def fig3a_table(runs: pd.DataFrame, p: dict, data_root=None) -> pd.DataFrame:
    """Per-round mean target accuracy of every method, plus the ESS (% of N) of each lambda and the
    FedAvg / FedPALS (lambda=0) weight of each client (claims 10, 28)."""
    r = runs[runs["delta"].isna()]
    rows = []
    for (m, lam), g in r.groupby(["method", _lam_key(r)], sort=False):
        curves = np.array(g["curve"].tolist())
        label = _lam_label(p, g.iloc[0]) if m == "FedPALS" else (None if lam == -1 else lam)
        for t in range(curves.shape[1]):
            rows.append({"dataset": "PACS", "clients": 3, "lambda": label, "method": m, "metric": "accuracy_pct",
                         "round": t + 1, "mean": curves[:, t].mean(),
                         "std": curves[:, t].std(ddof=1) if len(curves) > 1 else 0.0, "n_seeds": len(curves)})
    return pd.concat([pd.DataFrame(rows), pacs_weight_rows(p, data_root)], ignore_index=True)


def pacs_weight_rows(p: dict, data_root=None) -> pd.DataFrame:
    rows = []
    y_tr, _ = _labels(p["data"], data_root)
    for s in p["seeds"]:
        fed = pacs_federation(_pspec(p, s, "FedPALS", 0.0), data_root)
        S, n, T = _client_stats(fed, y_tr, len(fed.target_marginal))
        for i, lam in enumerate(_pacs_lambdas(p, s, data_root)):
            label = lam_labels(p)[i] if p["lambdas"] == "ess" else lam
            rows.append({"lambda": label, "metric": "ess_pct_of_N", "seed": s, "value": ess_pct(S, n, T, lam)})
        for i, (a0, afa) in enumerate(zip(W.fedpals_weights(S, n, T, 0.0), W.fedavg_weights(n))):
            rows.append({"metric": "weight_fedpals_lam0", "client": i, "seed": s, "value": a0,
                         "distance_to_T": float(np.linalg.norm(S[i] - T))})
            rows.append({"metric": "weight_fedavg", "client": i, "seed": s, "value": afa,
                         "distance_to_T": float(np.linalg.norm(S[i] - T))})
    df = pd.DataFrame(rows)
    ess = df[df.metric == "ess_pct_of_N"].groupby("lambda", sort=False)["value"].agg(["mean", "std", "count"])
    summ = pd.DataFrame({"dataset": "PACS", "clients": 3, "lambda": ess.index, "method": "FedPALS",
                         "metric": "ess_pct_of_N", "mean": ess["mean"].values, "std": ess["std"].fillna(0).values,
                         "n_seeds": ess["count"].values})
    w = df[df.metric != "ess_pct_of_N"].assign(dataset="PACS", clients=3, mean=lambda d: d["value"])
    return pd.concat([summ, w.drop(columns=["value"])], ignore_index=True)


# ============================================================================= iWildCam
def location_clients(locations: np.ndarray, num_clients: int, seed: int) -> list[np.ndarray]:
    """Bai et al.'s maximal heterogeneity (their lambda=0, vague-16): every camera location goes
    whole to one client; locations (largest first, ties in a seeded random order) are dealt to the
    client with the fewest images so far."""
    locs, counts = np.unique(locations, return_counts=True)
    if locs.size < num_clients:
        raise ValueError(f"num_clients={num_clients} exceeds the {locs.size} camera locations")
    rng = np.random.default_rng([int(seed), 7])
    order = np.lexsort((rng.random(locs.size), -counts))
    load = np.zeros(num_clients)
    owner = {}
    for j in order:
        c = int(np.argmin(load))
        owner[locs[j]] = c
        load[c] += counts[j]
    who = np.array([owner[x] for x in locations])
    return [np.flatnonzero(who == c) for c in range(num_clients)]


def synthetic_locations(y: np.ndarray, num_locations: int, seed: int, classes_per_location=3) -> np.ndarray:
    """Stand-in camera locations: each location hosts a few classes; an image goes to a random
    location hosting its class (smoke only)."""
    rng = np.random.default_rng(seed)
    k = int(y.max() + 1)
    hosts = [[] for _ in range(k)]
    for loc in range(num_locations):
        for c in rng.choice(k, size=classes_per_location, replace=False):
            hosts[c].append(loc)
    for c in range(k):
        if not hosts[c]:
            hosts[c].append(int(rng.integers(num_locations)))
    return np.array([rng.choice(hosts[c]) for c in y])


_IWILD_POOLS: dict = {}


def iwild_pools(p: dict, data_root=None) -> tuple:
    """(pools, split per training-pool row, camera location per training-pool row).

    Real data: the WILDS train split and the OOD val split share the training pool (val rows are
    the model-selection set, vague-16), the OOD test split is the test pool. Stand-in: synthetic
    images with synthetic locations; a random 10 % of the training pool is the validation set."""
    key = (spec_json(p["data"]), str(data_root), p.get("max_per_split"), p.get("locations"))
    if key not in _IWILD_POOLS:
        _IWILD_POOLS[key] = _load_iwild(p, data_root)
    return _IWILD_POOLS[key]


def _load_iwild(p, data_root):
    import torch


    if p["data"]["name"] == "synthetic-images":
        pl = pools(p["data"], data_root)
        y = pl.y_train.cpu().numpy()
        split = np.where(np.random.default_rng(8).random(y.size) < 0.1, "val", "train")
        return pl, split, synthetic_locations(y, p["locations"], p["data"]["options"]["seed"])
    m = p.get("max_per_split")
    a = load_iwildcam(data_root, max_per_split=m)
    b = load_iwildcam(data_root, max_per_split=m, test_split="val")
    x = torch.cat([a.x_train, b.x_test])
    dev = default_device()
    pl = Pools(a.compact(x).to(dev), torch.cat([a.y_train, b.y_test]).to(dev), a.compact(a.x_test).to(dev),
               a.y_test.to(dev), a.num_classes)
    pl.description = dict(a.describe(), validation="WILDS OOD val split")
    split = np.array(["train"] * a.y_train.numel() + ["val"] * b.y_test.numel())
    loc = np.concatenate([a.extra["location_train"].numpy(), b.extra["location_test"].numpy()])
    return pl, split, loc


def iwild_layout(p: dict, seed: int, data_root=None) -> dict:
    """Clients (camera locations, whole), validation rows, test rows and T(Y) (vague-16)."""
    pl, split, loc = iwild_pools(p, data_root)
    y_te = pl.y_test.cpu().numpy()
    train, val = np.flatnonzero(split == "train"), np.flatnonzero(split == "val")
    clients = [train[c] for c in location_clients(loc[train], p["num_clients"], seed)]
    test = np.arange(y_te.size)
    return {"clients": clients, "val": val, "test": test, "T": marginal(y_te, pl.num_classes), "K": pl.num_classes}


_IWILD_KEYS = ("data", "max_per_split", "locations")


def _iwild_run_pools(options: dict, data_root, device):
    """The pools of `iwild_pools` (the options hold the profile's data, max_per_split, locations)."""
    return iwild_pools(options, data_root)[0]


def iwild_federation(spec: RunSpec, pools=None, data_root=None) -> Federation:
    lay = iwild_layout(dict(spec.data["options"], num_clients=spec.partition["num_clients"]), spec.seed, data_root)
    return Federation(lay["clients"], lay["test"], val_indices=lay["val"], target_marginal=lay["T"], seed=spec.seed)


def _iwild_lambdas(p, seed, data_root) -> list[float]:
    if p["lambdas"] != "ess":
        return [float(x) for x in p["lambdas"]]
    key = ("iwild", spec_json(p["data"]), spec_json(p["ess_fractions"]), int(seed), str(data_root))
    if key not in _LAMBDAS:
        _LAMBDAS[key] = ess_lambdas(*iwild_stats(p, seed, data_root), p["ess_fractions"])
    return _LAMBDAS[key]


def iwild_stats(p, seed, data_root=None):
    lay = iwild_layout(p, seed, data_root)
    y_tr = iwild_pools(p, data_root)[0].y_train.cpu().numpy()
    S = np.stack([marginal(y_tr[c], lay["K"]) for c in lay["clients"]])
    return S, np.array([c.size for c in lay["clients"]], float), lay["T"]


def iwild_specs(p: dict, data_root=None) -> list[RunSpec]:
    data = {"name": "fedpals-iwildcam", "options": {k: p.get(k) for k in _IWILD_KEYS}, "stands_for": "iwildcam"}

    def spec(seed, method, lam, lam_index):
        return RunSpec(paper="fedpals", data=data,
                       partition={"layout": "fedpals-iwildcam", "seed": int(seed), "num_clients": p["num_clients"]},
                       method=_method(method, p["hyper"], lam), training=p["train"],
                       tags={"method": method, "lam": lam, "lam_index": lam_index})

    specs = []
    n_lam = len(_iwild_lambdas(p, p["seeds"][0], data_root))
    for i in range(n_lam):
        specs += [spec(s, "FedPALS", _iwild_lambdas(p, s, data_root)[i], i) for s in p["seeds"]]
    specs += [spec(s, "FedProx+FedPALS", _iwild_lambdas(p, s, data_root)[-1], n_lam - 1) for s in p["seeds"]]
    for m in IWILD_BASELINES:
        specs += [spec(s, m, None, None) for s in p["seeds"]]
    return specs


def iwild_records(specs: list, results: list, p: dict) -> pd.DataFrame:
    """One row per iWildCam run (`iwild_specs(p)`) and its result: best validation round's target
    macro F1, and its curve."""
    rows = []
    for s, r in zip(specs, results):
        f1, rnd = _best(r, "val_f1", "test_f1")
        t = s.tags
        label = t["lam"] if p["lambdas"] != "ess" or t["lam_index"] is None else lam_labels(p)[t["lam_index"]]
        rows.append({"method": t["method"], "lambda": label, "seed": s.seed, "f1": f1, "best_round": rnd,
                     "curve": [h["test_f1"] for h in r["history"]]})
    return pd.DataFrame(rows)


def table3_table(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (m, lam), g in runs.groupby(["method", runs["lambda"].astype(str)], sort=False):
        lam_out = None if lam in ("None", "nan") else g["lambda"].iloc[0]
        rows.append(_acc_rows(g, {"dataset": "iWildCam", "clients": 100, "lambda": lam_out, "method": m},
                              metric="f1_macro", col="f1"))
    return pd.DataFrame(rows)


def fig3b_table(runs: pd.DataFrame, p: dict, data_root=None) -> pd.DataFrame:
    rows = []
    for (m, lam), g in runs.groupby(["method", runs["lambda"].astype(str)], sort=False):
        curves = np.array(g["curve"].tolist())
        for t in range(curves.shape[1]):
            rows.append({"dataset": "iWildCam", "clients": 100, "lambda": None if lam in ("None", "nan") else lam,
                         "method": m, "metric": "f1_macro", "round": t + 1, "mean": curves[:, t].mean(),
                         "std": curves[:, t].std(ddof=1) if len(curves) > 1 else 0.0, "n_seeds": len(curves)})
    ess = []
    for s in p["seeds"]:
        S, n, T = iwild_stats(p, s, data_root)
        for i, lam in enumerate(_iwild_lambdas(p, s, data_root)):
            ess.append({"lambda": lam_labels(p)[i] if p["lambdas"] == "ess" else lam,
                        "value": ess_pct(S, n, T, lam)})
    e = pd.DataFrame(ess).groupby("lambda", sort=False)["value"].agg(["mean", "std", "count"])
    rows += [{"dataset": "iWildCam", "clients": 100, "lambda": lam, "method": "FedPALS", "metric": "ess_pct_of_N",
              "mean": v["mean"], "std": 0.0 if v["count"] < 2 else v["std"], "n_seeds": int(v["count"])}
             for lam, v in e.iterrows()]
    return pd.DataFrame(rows)


def fig4_table(p: dict, data_root=None) -> pd.DataFrame:
    """Fig 4 (vague-17): alpha^lambda of the 100 clients (first seed), sorted by size, and n_i/N."""
    seed = p["seeds"][0]
    S, n, T = iwild_stats(p, seed, data_root)
    lams = _iwild_lambdas(p, seed, data_root)[1:] if p["fig4_lambdas"] == "ess" else p["fig4_lambdas"]
    order = np.argsort(-n, kind="stable")
    afa = W.fedavg_weights(n)
    rows = []
    for lam in lams:
        a = W.fedpals_weights(S, n, T, float(lam))
        ess = ess_pct(S, n, T, float(lam))
        for rank, i in enumerate(order):
            rows.append({"lambda": lam, "ess_pct_of_N": ess, "rank": rank, "client": int(i), "n": int(n[i]),
                         "weight_fedpals": a[i], "weight_fedavg": afa[i],
                         "distance_to_T": float(np.sum((S[i] - T) ** 2)), "l1_to_fedavg": float(np.abs(a - afa).sum())})
    return pd.DataFrame(rows)


def add_table1_pacs(p: dict, prof: str) -> dict:
    """Put Table 1's PACS row settings into Table 1's settings `p` (Sec 5.1, Table 1; App. A.6), so
    that the row is built from the same params as the image rows and one override reaches it:
    `p["pacs"]` holds the PACS profile of the same name (its seeds the PACS profile's own, the paper's
    3, unless explicit seeds replace them: parameters.resolve_seeds), without its rounds and baseline
    hyperparameters, which
    Table 1's `rounds["pacs"]` and `hyper` hold (an override `rounds`, `rounds.pacs`, `hyper.mu`...
    then sets them for PACS too). Returns `p`."""
    q = profile("pacs", prof)
    p["rounds"] = {**p["rounds"], "pacs": q["train"].pop("rounds")}
    q.pop("hyper")  # Table 1's `hyper` (the same baseline values) is the row's
    p["pacs"] = q
    return p


def table1_pacs_settings(p: dict) -> dict:
    """The PACS row's run settings from Table 1's settings `p` (see `add_table1_pacs`)."""
    q = copy.deepcopy(p["pacs"])
    q["train"]["rounds"] = int(p["rounds"]["pacs"])
    q["hyper"] = dict(p["hyper"])
    return q


def table1_pacs_specs(p: dict, data_root=None) -> list[RunSpec]:
    """The runs of Table 1's PACS row from Table 1's settings `p` (as the pipeline hands them on:
    `profile`, `missing_datasets`): none at the smoke profile (the pacs notebook exercises that
    path on its stand-in) or without PACS."""
    if p.get("profile") == "smoke" or "pacs" in (p.get("missing_datasets") or []):
        return []
    return pacs_specs(table1_pacs_settings(p), data_root)


def table1_pacs_rows(specs: list, results: list, p: dict, data_root=None) -> pd.DataFrame:
    """Table 1's PACS row from its runs (`table1_pacs_specs(p)`) and their results."""
    return table1_rows(pacs_records(specs, results, table1_pacs_settings(p), data_root))
