"""FedPALS training runs on label-shifted image federations (Fashion-MNIST, CIFAR-10, stand-ins).

A run is a `fedpaper.runs.experiment.RunSpec` (the results-cache key): data {"name", "options",
"stands_for"}; partition {"layout": "fedpals-label-shift", "seed", "split": {"scheme": "sparsity",
"C": 3}, "num_clients", "data_fraction", "oracle"}; the engine Method's fields (FedPALS's lambda,
FedProx's mu, ...); the training fields; evaluation {"test_n"}; tags {"method", "lam"} (the
display name and lambda of the tables).

Layout (targets/fedpals.md): `num_clients` partitions are drawn with sparsity (vague-2) or Dirichlet
(vague-11) sampling; partitions 0..M-2 are the training clients and partition M-1 the target
(vague-1). T(Y) = the target partition's label marginal; target validation = the target
partition's own images (drawn from the training split, never trained on); target test = the official
test split resampled to T(Y) (vague-3), capped at `test_n` images. Each seed redraws the partition,
the target, the initialisation and the data order (vague-13). The Oracle (App. A.3, vague-10) trains
FedAvg on clients of the same sizes drawn i.i.d. from T(Y) out of the training split minus the
target partition (`oracle_partition(..., scale_to_fit=True)`; a scale < 1 is recorded).
`data_fraction` (scaled-down profiles; 1 = the paper's partition) keeps that common fraction of every
partition's images of every label (`fedpaper.blocks.partition.thin_partition`), so T(Y), each client's
marginal and the clients' relative sizes (FedAvg's weights n_i/N, eq. 4; the lambda-to-ESS map) stay
those of the full partition up to rounding.
"""
from __future__ import annotations

import json
import os
import math
from functools import lru_cache

import numpy as np

from fedpaper.algorithms import get_method
from fedpaper.algorithms import weights as W
from fedpaper.algorithms.methods import Method
from fedpaper.engine import Federation
from fedpaper.runs.experiment import Execution, RunSpec, default_device, get_pools, pools_key_of
from fedpaper.blocks.partition import (dirichlet_partition, oracle_partition, resample_to_marginal,
                                sparsity_partition, thin_partition)

#: Display names of the data sets in tables (the reported CSV's spelling).
DISPLAY = {"fashion-mnist": "Fashion-MNIST", "cifar10": "CIFAR-10", "pacs": "PACS", "iwildcam": "iWildCam"}
TABLE1_METHODS = ["FedPALS", "FedAvg", "FedProx", "SCAFFOLD", "AFL", "FedRS", "Oracle"]


# ----------------------------------------------------------------------------- data
def data_spec(dataset: str, p: dict) -> dict:
    """{"name", "options", "stands_for"}: the real data set, or its synthetic stand-in (smoke)."""
    stand_in = (p.get("stand_ins") or {}).get(dataset)
    if stand_in is not None:
        return {"name": "synthetic-images", "options": dict(stand_in), "stands_for": dataset}
    return {"name": dataset, "options": {}, "stands_for": None}


def dataset_of(data: dict) -> str:
    """The real data set a spec's data is (or stands in for)."""
    return data["stands_for"] or data["name"]


def pools(data: dict, data_root=None):
    """The standardised pools (loaded once per process)."""
    return get_pools(pools_key_of(data, data_root))


@lru_cache(maxsize=16)
def _labels(data_json: str, data_root) -> tuple[np.ndarray, np.ndarray]:
    pl = pools(json.loads(data_json), data_root)
    return pl.y_train.cpu().numpy(), pl.y_test.cpu().numpy()


def labels(data: dict, data_root=None) -> tuple[np.ndarray, np.ndarray]:
    """(y_train, y_test) as numpy arrays."""
    return _labels(json.dumps(data, sort_keys=True), None if data_root is None else str(data_root))


# ----------------------------------------------------------------------------- partitions
def partition(data: dict, split: dict, num_clients: int, data_fraction, seed: int, data_root=None):
    """The seed's partition of the training split (the target is the last partition), keeping
    `data_fraction` of every partition's images per label (None or 1: the full partition)."""
    frac = 1.0 if data_fraction is None else float(data_fraction)
    return _partition(json.dumps(data, sort_keys=True), json.dumps(split, sort_keys=True), int(num_clients),
                      frac, int(seed), None if data_root is None else str(data_root))


@lru_cache(maxsize=512)
def _partition(data_json, split_json, num_clients, data_fraction, seed, data_root):
    y, _ = _labels(data_json, data_root)
    split = json.loads(split_json)
    if split["scheme"] == "sparsity":
        full = sparsity_partition(y, num_clients, int(split["C"]), seed)
    elif split["scheme"] == "dirichlet":
        full = dirichlet_partition(y, num_clients, float(split["beta"]), seed)
    else:
        raise ValueError(f"unknown split scheme {split['scheme']!r}; use 'sparsity' or 'dirichlet'")
    return thin_partition(y, full, data_fraction, seed)


def data_fraction(p: dict, dataset: str):
    """The profile's share of each partition kept for this data set (None: all of it)."""
    return (p.get("data_fraction") or {}).get(dataset)


def target_test(y_test: np.ndarray, T: np.ndarray, seed: int, cap=None) -> np.ndarray:
    """Official test split resampled to T(Y) (vague-3): the largest such subsample, capped at `cap`."""
    idx = resample_to_marginal(y_test, T, seed)
    if cap is not None and idx.size > cap:
        idx = resample_to_marginal(y_test, T, seed, n=int(cap))
    return idx


def label_setting(split: dict) -> str:
    """'C=3' or 'beta=0.1' (the reported CSV's label_split column)."""
    if split["scheme"] == "sparsity":
        return f"C={split['C']}"
    return f"beta={split['beta']:g}"


# ----------------------------------------------------------------------------- FedPALS lambda grid
def client_stats(part, num_train: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(S [M, K], n [M], T [K]) of the training clients and the target partition."""
    S = part.marginals[:num_train]
    return S, part.sizes[:num_train].astype(float), part.marginals[num_train]


def lambda_grid(S, n, T, ess_fractions) -> list[tuple[str, float]]:
    """[(label, lambda)]: lambda=0 and the lambda giving ESS = f * N for each f (App. A.1, vague-8).

    Duplicates (e.g. lambda_25 = 0 when alpha^0 already has ESS >= 25% N) are dropped."""
    out, seen = [("lambda=0", 0.0)], {0.0}
    for f in ess_fractions:
        lam = float(W.lambda_for_ess(S, n, T, f))
        lam = round(lam, 6) if math.isfinite(lam) else lam
        if lam not in seen:
            out.append((f"ESS {round(100 * f)}%", lam))
            seen.add(lam)
    return out


# ----------------------------------------------------------------------------- specs
def method_of(name: str, hyper: dict, lam=None, oracle=False) -> Method:
    """The engine Method of a display name (the Oracle trains FedAvg, App. A.3)."""
    over = {k: hyper[k] for k in ("mu", "fedrs_alpha", "afl_step") if k in hyper}
    if lam is not None:
        over["lam"] = float(lam)
    return get_method(name, **over).with_(name=name + (" (oracle)" if oracle else ""))


def base_spec(p: dict, dataset: str, split: dict, *, num_clients=None, seed=0, method="FedAvg", lam=None,
              local_epochs=None, rounds=None, participation=1.0) -> RunSpec:
    """One run's spec from the profile parameters `p` (see the module docstring); a method named in
    `p["method_lr"]` trains at that local learning rate instead of `p["lr"]` (vague-5)."""
    oracle = method == "Oracle"
    name = "FedAvg" if oracle else method
    training = {"model": "lenet", "model_kwargs": {"c2": p["lenet_c2"][dataset]}, "optimizer": "sgd",
                "lr": (p.get("method_lr") or {}).get(method, p["lr"]), "batch_size": p["batch_size"], "local_epochs": int(local_epochs or p.get("local_epochs", 1)),
                "rounds": int(rounds or p["rounds"][dataset]), "participation": float(participation),
                "eval_every": int(p.get("eval_every", 1))}
    return RunSpec(
        paper="fedpals", data=data_spec(dataset, p),
        partition={"layout": "fedpals-label-shift", "seed": int(seed), "split": dict(split),
                   "num_clients": int(num_clients or p["num_clients"]), "data_fraction": data_fraction(p, dataset),
                   "oracle": oracle},
        method=method_of(name, p["hyper"], lam, oracle).algorithm().spec(), training=training,
        evaluation={"test_n": p.get("test_n")}, tags={"method": name, "lam": lam})


def method_specs(p, dataset, split, methods, seeds, data_root=None, **kw) -> list[RunSpec]:
    """Specs of every (method, seed); FedPALS expands into its per-seed lambda grid (vague-8).

    Seeds are innermost so runs sharing a method and config train as one batch. A fixed lambda
    (`kw["lam"]`, Fig 8a) replaces the grid."""
    specs = []
    for m in methods:
        if m in ("FedPALS", "FedProx+FedPALS") and kw.get("lam") is None:
            for s in seeds:
                for _, lam in lambda_grid(*stats_for(p, dataset, split, s, data_root, kw.get("num_clients")),
                                          p["ess_grid"]):
                    specs.append(base_spec(p, dataset, split, seed=s, method=m, **dict(kw, lam=lam)))
        else:
            specs += [base_spec(p, dataset, split, seed=s, method=m, **kw) for s in seeds]
    return specs


def stats_for(p, dataset, split, seed, data_root=None, num_clients=None):
    nc = int(num_clients or p["num_clients"])
    part = partition(data_spec(dataset, p), split, nc, data_fraction(p, dataset), seed, data_root)
    return client_stats(part, nc - 1)


def execution() -> Execution:
    """The grouped backend on CPU (FEDPAPER_BACKEND overrides)."""
    return Execution(backend=os.environ.get("FEDPAPER_BACKEND", "grouped" if default_device() == "cpu" else "auto"))


# ----------------------------------------------------------------------------- build
def federation(spec: RunSpec, pools=None, data_root=None) -> Federation:
    """The run's Federation: training clients, target validation and test sets (vague-1, -3, -10)."""
    q, data, seed = spec.partition, spec.data, spec.seed
    nc = q["num_clients"]
    part = partition(data, q["split"], nc, q["data_fraction"], seed, data_root)
    y_train, y_test = labels(data, data_root)
    M = nc - 1
    T = part.marginals[M]
    val = part.client_indices[M]
    clients = part.client_indices[:M]
    if q["oracle"]:
        pool = np.setdiff1d(np.arange(y_train.size), val)
        clients = oracle_partition(y_train, T, part.sizes[:M], seed, pool=pool, scale_to_fit=True).client_indices
    test = target_test(y_test, T, seed, spec.evaluation.get("test_n"))
    return Federation(list(clients), test, val_indices=val, target_marginal=T, seed=seed)


# ----------------------------------------------------------------------------- results
def best_val(result: dict) -> float:
    """The run's best target-validation accuracy over the evaluated rounds (vague-19)."""
    vals = [r.get("val_acc") for r in result["history"] if r.get("val_acc") is not None]
    vals = [v for v in vals if not (isinstance(v, float) and math.isnan(v))]
    return max(vals) if vals else float("nan")


def setting_key(spec: RunSpec) -> tuple:
    """What the runs of one table cell share apart from their seed and lambda: data set, split,
    clients, local epochs, rounds, participation and method label."""
    t, q = spec.training, spec.partition
    return (dataset_of(spec.data), json.dumps(q["split"], sort_keys=True),
            q["num_clients"], t["local_epochs"], t["rounds"], t["participation"], method_label(spec))


def selected(specs: list[RunSpec], results: list[dict]) -> dict:
    """{(setting_key, seed): (spec, result)} keeping, per setting and seed, the run with the best
    validation accuracy: FedPALS's lambda selection (vague-8); a no-op for single runs."""
    out = {}
    for s, r in zip(specs, results):
        k = (setting_key(s), s.seed)
        if k not in out or best_val(r) > best_val(out[k][1]):
            out[k] = (s, r)
    return out


def method_label(spec: RunSpec) -> str:
    return "Oracle" if spec.partition["oracle"] else spec.tags["method"]
