"""FedMT run specs, sweeps and per-seed tables (Sec. 4.1-4.2, App. C-D; targets/fedmt.md).

Every run is a RunSpec on the "fedmt-cifar100" pools (fine + coarse labels) and the "fedmt" layout;
methods are algorithm families (fedpaper.algorithms.families): Single (FedAvg over the server's rows
alone), FedTrans, FedRep, SemiFL, FedMT (T), FedMT (E), FedMT (E) + Average. Numbers are read from
the global model after the last round (targets vague-6), in percent.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fedpaper.algorithms.base import Algorithm
from fedpaper.algorithms.families import family_algorithm
from fedpaper.algorithms.methods import Method
from fedpaper.algorithms.parts import argument
from fedpaper.runs.executors import run_specs
from fedpaper.runs.experiment import Execution, RunSpec
from fedpaper.claims.summaries import seed_summary


PAPER = "fedmt"
BASELINES = ["Single", "FedTrans", "FedRep", "SemiFL"]
FEDMT = ["FedMT (T)", "FedMT (E)"]
TABLE2_METHODS = BASELINES + FEDMT
ESTIMATORS = {"FedMT (E)": "estimate", "FedMT (E) + Average": "estimate_average", "FedMT (T)": "true",
              "Learnable": "learnable", "Learnable + Average": "learnable_average"}
TABLE9_METHODS = ["FedMT (E)", "FedMT (E) + Average", "Learnable", "Learnable + Average"]
TWO_HEAD = ("FedTrans", "FedRep")


def method(p: dict, name: str, threshold=None, lambda2=None) -> Algorithm:
    thr = p["threshold"] if threshold is None else threshold
    if name == "Single":
        return Method("Single").algorithm()
    if name == "FedTrans":
        return family_algorithm(name, "fedtrans", {"finetune_epochs": p["finetune_epochs"],
                                                   "finetune_lr": p["finetune_lr"], "finetune_batch": p["finetune_batch"]})
    if name == "FedRep":
        return family_algorithm(name, "fedrep", {"server_epochs": p["baseline_epochs"]})
    if name == "SemiFL":
        return family_algorithm(name, "semifl", {"threshold": thr, "mix_alpha": p["mix_alpha"],
                                                 "server_epochs": p["server_epochs"]})
    return family_algorithm(name, "fedmt", {
        "estimator": ESTIMATORS[name], "threshold": thr, "lambda1": p["lambda1"],
        "lambda2": p["lambda2"] if lambda2 is None else lambda2, "mix_alpha": p["mix_alpha"],
        "server_epochs": p["server_epochs"]})


def _training(p: dict, name: str) -> dict:
    kw = dict(p["backbone_kwargs"])
    model = p["backbone"]
    if name in TWO_HEAD or name.startswith("Learnable"):
        kw = {"backbone": model, "coarse_classes": coarse_classes(p), **kw}
        model = "two_head" if name in TWO_HEAD else "with_correspondence"
    epochs = p["local_epochs"] if name in ("SemiFL",) + tuple(ESTIMATORS) else p["baseline_epochs"]
    return {"model": model, "model_kwargs": kw, "optimizer": "sgd", "lr": p["lr"], "momentum": p["momentum"],
            "weight_decay": p["weight_decay"], "lr_schedule": p["lr_schedule"], "batch_size": p["batch_size"],
            "local_epochs": epochs, "rounds": p["single_rounds"] if name == "Single" else p["rounds"],
            "eval_every": p["eval_every"], "precision": p["precision"]}


def coarse_classes(p: dict) -> int:
    return p["stand_in"]["coarse_classes"] if p["stand_in"] else 20


def data_spec(p: dict) -> dict:
    if p["stand_in"]:
        return {"name": "fedmt-cifar100", "options": {"stand_in": p["stand_in"]}, "stands_for": "cifar100"}
    return {"name": "fedmt-cifar100", "options": {}}


def spec(p: dict, name: str, seed: int, *, n=None, C=None, N_c=None, gamma=None, threshold=None,
         lambda2=None) -> RunSpec:
    """One run: method `name` on the split (n, C, N_c, IID or non-IID gamma) with this seed."""
    part = {"layout": "fedmt", "seed": int(seed), "n": int(p["n_default"] if n is None else n),
            "num_clients": int(C or p["num_clients"]), "samples_per_client": int(N_c or p["samples_per_client"]),
            "iid": gamma is None, "gamma": gamma, "role": "single" if name == "Single" else "federated"}
    m = method(p, name, threshold, lambda2)
    tags = {"display": name}  # the settings themselves are in the method's options (shared runs: one key)
    return RunSpec(PAPER, data_spec(p), part, m.spec(), _training(p, name), {"test_cap": p["test_cap"]},
                   {k: v for k, v in tags.items() if v is not None})


#: How FedMT's runs execute (outside their cache key).
EXECUTION = Execution(eval_batch=1024)


def clients_label(s: RunSpec) -> str:
    """What keeps two runs out of one engine call: runs trained together need the same number of clients."""
    return f"C={s.partition['num_clients']}"


def sweep(specs: list, p: dict, data_root, desc: str) -> list:
    out = [None] * len(specs)
    by_clients: dict = {}
    for i, s in enumerate(specs):
        by_clients.setdefault(clients_label(s), []).append(i)
    for c, idx in by_clients.items():
        label = desc if len(by_clients) == 1 else f"{desc} {c}"
        res = run_specs([specs[i] for i in idx], data_root, desc=label, execution=EXECUTION, max_batch=16)
        for i, r in zip(idx, res):
            out[i] = r
    return out


def final_values(result: dict, name: str) -> dict:
    """The last evaluated round's numbers of one run, in percent: 100-class accuracy, and the
    20-class accuracy where the paper reports one (App. D.2: FedTrans's J-class model, FedRep's
    client heads, FedMT's scores projected with the true M (T) or the mean of the clients' last
    estimates (E), targets vague-22); Single and SemiFL have none (Fig. 2a leaves them out)."""
    last = result["history"][-1]
    out = {"test_acc_100class": 100 * last["test_acc"]}
    src = {"FedTrans": "test_acc_coarse", "FedRep": "test_acc_coarse", "FedMT (T)": "test_acc_coarse_true"}.get(
        name, "test_acc_coarse_est" if name.startswith(("FedMT (E)", "Learnable")) else None)
    if src and last.get(src) is not None and np.isfinite(last[src]):
        out["test_acc_20class"] = 100 * last[src]
    if last.get("fix_clients_share") is not None:  # FedMT/SemiFL: did the clients train (Algorithm 1 line 11)?
        out[SFIX_METRICS[0]] = 100 * last["fix_clients_share"]
        out[SFIX_METRICS[1]] = last["fix_rows_mean"]
    return out


#: Last-round client participation of FedMT/SemiFL runs (fedpaper.algorithms.fedmt.fix_stats): the %
#: of clients with a non-empty S_fix, and the mean |S_fix| per client (rows above the threshold).
SFIX_METRICS = ("clients_with_sfix_pct", "sfix_rows_mean")


def options(s: RunSpec) -> dict:
    """The settings a FedMT run is written with (threshold, lambda2) or a SemiFL run (threshold), read
    from its client part's arguments; other methods have none."""
    name = s.tags["display"]
    keys = ("threshold", "lambda2") if name in ESTIMATORS else ("threshold",) if name == "SemiFL" else ()
    return {k: argument(s.method, k) for k in keys}


def per_seed(specs: list, results: list, setting: dict) -> pd.DataFrame:
    """One row per (run, metric): setting columns from each spec's partition, method, seed, value."""
    rows = []
    for s, r in zip(specs, results):
        pt = s.partition
        base = {"dataset": "CIFAR-100" if "stand_in" not in s.data["options"] else "stand-in",
                "split": "iid" if pt["iid"] else "non-iid", "gamma": pt["gamma"], "C": pt["num_clients"],
                "N_c": pt["samples_per_client"], "n": pt["n"], "threshold": options(s).get("threshold"),
                "lambda2": options(s).get("lambda2"), "method": s.tags["display"], "seed": s.seed, **setting}
        for metric, v in final_values(r, s.tags["display"]).items():
            rows.append({**base, "metric": metric, "value": v})
    return pd.DataFrame(rows)


def summarise(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """mean, std (ddof 1), n_seeds and the per-seed values of every (keys, method, metric) group."""
    out = []
    for key, g in df.groupby(keys + ["method", "metric"], sort=False, dropna=False):
        row = dict(zip(keys + ["method", "metric"], key))
        row.update(seed_summary(list(g["value"]), row["metric"], per_seed=".2f"))
        out.append(row)
    return pd.DataFrame(out)


def round_errors(specs: list, results: list) -> pd.DataFrame:
    """fig3: per run and round, each client's Frobenius error ||M_hat_c - M||_F."""
    rows = []
    for s, r in zip(specs, results):
        for h in r["history"]:
            errs = [v for k, v in h.items() if k.startswith("m_err_c") and v is not None and np.isfinite(v)]
            if errs:
                rows.append({"N_c": s.partition["samples_per_client"], "seed": s.seed, "round": h["round"],
                             "method": s.tags["display"], "err_mean": float(np.mean(errs)),
                             "err_sd": float(np.std(errs, ddof=1)) if len(errs) > 1 else 0.0, "clients": len(errs)})
    return pd.DataFrame(rows)
