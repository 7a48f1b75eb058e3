"""FedPALS training runs on label-shifted image federations (Fashion-MNIST, CIFAR-10, stand-ins).

A run is a JSON spec (the results-cache key, see `fedpaper.experiment.run_specs`):

    {"paper": "fedpals", "data": {"name": "cifar10", "kwargs": {}}, "split": {"scheme":
     "sparsity", "C": 3}, "num_clients": 10, "per_client": 120, "test_n": 1000, "seed": 0,
     "method": "FedPALS", "lam": 12.3, "oracle": false, "train": {...TrainConfig fields...},
     "hyper": {"mu": 0.01, "fedrs_alpha": 0.5, "afl_step": 0.01}}

Layout (targets/fedpals.md): `num_clients` partitions are drawn with sparsity (vague-2) or Dirichlet
(vague-11) sampling; partitions 0..M-2 are the training clients and partition M-1 the target
(vague-1). T(Y) = the target partition's label marginal; target validation = the target
partition's own images (drawn from the training split, never trained on); target test = the official
test split resampled to T(Y) (vague-3), capped at `test_n` images. Each seed redraws the partition,
the target, the initialisation and the data order (vague-13). The Oracle (App. A.3, vague-10) trains
FedAvg on clients of the same sizes drawn i.i.d. from T(Y) out of the training split minus the
target partition (`oracle_partition(..., scale_to_fit=True)`; a scale < 1 is recorded).
`per_client` caps the images per client (quick profile): sparsity keeps per_client // C images per
label, Dirichlet draws per_client images per partition.
"""
from __future__ import annotations

import json
import os
import math
from functools import lru_cache

import numpy as np

from fedpaper.algorithms import get_method
from fedpaper.algorithms import weights as W
from fedpaper.engine import Federation, TrainConfig
from fedpaper.experiment import RunSetup, default_device, get_pools, pools_key
from fedpaper.partition import (dirichlet_partition, oracle_partition, resample_to_marginal,
                                sparsity_partition)

#: Display names of the data sets in tables (the reported CSV's spelling).
DISPLAY = {"fashion-mnist": "Fashion-MNIST", "cifar10": "CIFAR-10", "pacs": "PACS", "iwildcam": "iWildCam"}
TABLE1_METHODS = ["FedPALS", "FedAvg", "FedProx", "SCAFFOLD", "AFL", "FedRS", "Oracle"]


# ----------------------------------------------------------------------------- data
def data_spec(dataset: str, p: dict) -> dict:
    """{"name", "kwargs"}: the real data set, or its synthetic stand-in at the smoke profile."""
    stand_in = (p.get("stand_ins") or {}).get(dataset)
    if stand_in is not None:
        return {"name": "synthetic-images", "kwargs": dict(stand_in), "stands_for": dataset}
    return {"name": dataset, "kwargs": {}}


def _pkey(data: dict, data_root) -> tuple:
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in data["kwargs"].items()}
    root = None if data["name"] == "synthetic-images" else data_root
    return pools_key(data["name"], root, **kw)


def pools(data: dict, data_root=None):
    """The standardised pools (loaded once per process)."""
    return get_pools(_pkey(data, data_root))


@lru_cache(maxsize=16)
def _labels(data_json: str, data_root) -> tuple[np.ndarray, np.ndarray]:
    pl = pools(json.loads(data_json), data_root)
    return pl.y_train.cpu().numpy(), pl.y_test.cpu().numpy()


def labels(data: dict, data_root=None) -> tuple[np.ndarray, np.ndarray]:
    """(y_train, y_test) as numpy arrays."""
    return _labels(json.dumps(data, sort_keys=True), None if data_root is None else str(data_root))


def image_shape(data: dict, data_root=None) -> tuple[int, int, int]:
    return tuple(pools(data, data_root).x_train.shape[1:])


# ----------------------------------------------------------------------------- partitions
def partition(data: dict, split: dict, num_clients: int, per_client, seed: int, data_root=None):
    """The seed's partition of the training split (the target is the last partition)."""
    return _partition(json.dumps(data, sort_keys=True), json.dumps(split, sort_keys=True), int(num_clients),
                      per_client, int(seed), None if data_root is None else str(data_root))


@lru_cache(maxsize=512)
def _partition(data_json, split_json, num_clients, per_client, seed, data_root):
    y, _ = _labels(data_json, data_root)
    split = json.loads(split_json)
    if split["scheme"] == "sparsity":
        spl = None if per_client is None else max(1, int(per_client) // int(split["C"]))
        return sparsity_partition(y, num_clients, int(split["C"]), seed, samples_per_label=spl)
    if split["scheme"] == "dirichlet":
        return dirichlet_partition(y, num_clients, float(split["beta"]), seed, samples_per_client=per_client)
    raise ValueError(f"unknown split scheme {split['scheme']!r}; use 'sparsity' or 'dirichlet'")


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
def base_spec(p: dict, dataset: str, split: dict, *, num_clients=None, seed=0, method="FedAvg", lam=None,
              local_epochs=None, rounds=None, participation=1.0) -> dict:
    """One run's spec from the profile parameters `p` (see the module docstring)."""
    data = data_spec(dataset, p)
    train = {"model": "lenet", "lr": p["lr"], "batch_size": p["batch_size"],
             "local_epochs": int(local_epochs or p.get("local_epochs", 1)),
             "rounds": int(rounds or p["rounds"][dataset]), "participation": float(participation),
             "eval_every": int(p.get("eval_every", 1)), "optimizer": "sgd",
             "model_kwargs": {"c2": p["lenet_c2"][dataset]}}
    return {"paper": "fedpals", "data": data, "split": dict(split),
            "num_clients": int(num_clients or p["num_clients"]), "per_client": p["per_client"].get(dataset),
            "test_n": p.get("test_n"), "seed": int(seed), "method": "FedAvg" if method == "Oracle" else method,
            "oracle": method == "Oracle", "lam": lam, "train": train, "hyper": dict(p["hyper"])}


def method_specs(p, dataset, split, methods, seeds, data_root=None, **kw) -> list[dict]:
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
    part = partition(data_spec(dataset, p), split, nc, p["per_client"].get(dataset), seed, data_root)
    return client_stats(part, nc - 1)


# ----------------------------------------------------------------------------- build
def federation(spec: dict, data_root=None) -> Federation:
    """The run's Federation: training clients, target validation and test sets (vague-1, -3, -10)."""
    data, nc, seed = spec["data"], spec["num_clients"], spec["seed"]
    part = partition(data, spec["split"], nc, spec["per_client"], seed, data_root)
    y_train, y_test = labels(data, data_root)
    M = nc - 1
    T = part.marginals[M]
    val = part.client_indices[M]
    clients = part.client_indices[:M]
    if spec["oracle"]:
        pool = np.setdiff1d(np.arange(y_train.size), val)
        clients = oracle_partition(y_train, T, part.sizes[:M], seed, pool=pool, scale_to_fit=True).client_indices
    test = target_test(y_test, T, seed, spec.get("test_n"))
    return Federation(list(clients), test, val_indices=val, target_marginal=T, seed=seed)


def method_of(spec: dict):
    h = spec["hyper"]
    over = {k: h[k] for k in ("mu", "fedrs_alpha", "afl_step") if k in h}
    if spec.get("lam") is not None:
        over["lam"] = float(spec["lam"])
    return get_method(spec["method"], **over).with_(name=spec["method"] + (" (oracle)" if spec["oracle"] else ""))


def train_config(spec: dict, data_root=None) -> TrainConfig:
    t = dict(spec["train"])
    c, h, _ = image_shape(spec["data"], data_root)
    kw = dict(t.pop("model_kwargs"), num_classes=pools(spec["data"], data_root).num_classes)
    if t["model"] == "lenet":
        kw.update(in_channels=c, image_size=h)
    dev = default_device()
    return TrainConfig(model_kwargs=kw, device=dev, backend=os.environ.get("FEDPAPER_BACKEND", "grouped" if dev == "cpu" else "auto"), **t)


def builder(data_root=None):
    """build(spec) -> RunSetup for `run_specs`."""
    def build(spec):
        return RunSetup(method_of(spec), train_config(spec, data_root), _pkey(spec["data"], data_root),
                        federation(spec, data_root))
    return build


# ----------------------------------------------------------------------------- results
def best_val(result: dict) -> float:
    """The run's best target-validation accuracy over the evaluated rounds (vague-19)."""
    vals = [r.get("val_acc") for r in result["history"] if r.get("val_acc") is not None]
    vals = [v for v in vals if not (isinstance(v, float) and math.isnan(v))]
    return max(vals) if vals else float("nan")


def selected(specs: list[dict], results: list[dict], key) -> dict:
    """{(group key, seed): (spec, result)} keeping, per group and seed, the run with the best
    validation accuracy: FedPALS's lambda selection (vague-8); a no-op for single runs."""
    out = {}
    for s, r in zip(specs, results):
        k = (key(s), s["seed"])
        if k not in out or best_val(r) > best_val(out[k][1]):
            out[k] = (s, r)
    return out


def method_label(spec: dict) -> str:
    return "Oracle" if spec["oracle"] else spec["method"]
