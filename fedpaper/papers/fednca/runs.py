"""FedNCA-ML run specs (tables 1, 2, 5-8), the cached sweep and per-seed / summary tables.

A run = (data set, method or ablation variant, beta, seed) at a profile's settings. Specs are
built so that identical runs share a cache entry: Table 5's "none" row is Table 2's FedAvg run and
its full row Table 2's FedNCA-ML run (beta = 0.1), Table 6's fixed-ETF row is Table 5's
ETF-Clf+LADM row; the Centralized run does not depend on beta (vague-11).

Selection (targets vague-4): each run's reported numbers are the test metrics at the round where
the global model's validation macro-AUC peaks (the first such round). Metrics (vague-5, -6):
macro/micro AUC and F1 (threshold 0.5 on the sigmoid) over the whole test set, and the official
code's average over test batches of 32 as a second column (batch_mean)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fedpaper.runs.executors import run_specs
from fedpaper.runs.experiment import Execution, RunSpec, get_pools, pools_key_of

from fedpaper.papers.fednca.methods import CENTRAL, COMPONENTS, FEDNCA, HEAD, QUERIES, method_dict, model_kwargs

DATASET_LABEL = {"cifar10": "CIFAR-10 multi-label (composite)", "dermamnist": "DermaMNIST multi-label (composite)"}
METRICS = {"macro-AUC": "auc", "macro-F1": "f1", "micro-AUC": "micro_auc", "micro-F1": "micro_f1"}
BATCH = {"macro-AUC": "batch_macro_auc", "macro-F1": "batch_macro_f1", "micro-AUC": "batch_micro_auc",
         "micro-F1": "batch_micro_f1"}
ENGINE_METRICS = ["micro_f1", "micro_auc", "batch_macro_auc", "batch_micro_auc", "batch_macro_f1", "batch_micro_f1"]
SELECT_BY = "val_auc"


def data_spec(p: dict, dataset: str) -> dict:
    opts = dict(p["data"][dataset])
    if opts.get("source") == "synthetic":
        return {"name": "fednca-synthetic", "options": opts, "stands_for": dataset}
    return {"name": f"fednca-{dataset}", "options": {**opts, "seed": 0}, "stands_for": None}


def pools(p: dict, dataset: str, data_root=None):
    return get_pools(pools_key_of(data_spec(p, dataset), data_root))


def _pretrained(p, dataset) -> bool:
    pre = p["model"]["pretrained"]
    return bool(pre[dataset] if isinstance(pre, dict) else pre)


def training(p: dict, dataset: str, head: str, queries="fixed", query_init="etf") -> dict:
    kw = model_kwargs({**p, "model": {**p["model"], "pretrained": _pretrained(p, dataset)}}, head, queries, query_init)
    return {"model": "fednca_net", "model_kwargs": kw, "optimizer": "adamw", "lr": p["lr"],
            "weight_decay": p["weight_decay"], "lr_schedule": p["lr_schedule"], "batch_size": p["batch_size"],
            "local_epochs": p["local_epochs"], "rounds": p["rounds"], "eval_every": p["eval_every"],
            "metrics": list(ENGINE_METRICS)}


def run_spec(p: dict, dataset: str, name: str, beta: float, gamma: float, seed: int, *, head=None,
             lam_neg=None, lam_pos=None, queries="fixed", query_init="etf", kind=None) -> RunSpec:
    """Every parameter of one run (the cache key)."""
    head = head or HEAD[name]
    if lam_neg is None:
        lam_neg = p["lam_neg"][dataset] if name == FEDNCA else 0.0
    if lam_pos is None:
        lam_pos = p["lam_pos"] if name == FEDNCA else 0.0
    m = method_dict(name, p, lam_neg, lam_pos, kind=kind, head=head, queries=queries)
    part = ({"layout": "fednca-central", "seed": int(seed)} if name == CENTRAL else
            {"layout": "fednca", "seed": int(seed), "clients": p["clients"], "beta": float(beta), "gamma": float(gamma),
             "partition_seed": p["partition_seed"]})
    return RunSpec(paper="fednca", data=data_spec(p, dataset), partition=part, method=m,
                   training=training(p, dataset, head, queries, query_init))


def main_specs(p: dict, table: str, methods) -> list[tuple[dict, RunSpec]]:
    """(row keys, spec) of Tables 1-2: every method x beta x seed."""
    st = p["settings"][table]
    out = []
    for beta in st["betas"]:
        for name in methods:
            for seed in p["seeds"]:
                keys = {"dataset": DATASET_LABEL[st["dataset"]], "clients": p["clients"], "beta": beta,
                        "gamma": st["gamma"], "method": name}
                out.append((keys, run_spec(p, st["dataset"], name, beta, st["gamma"], seed)))
    return out


def component_specs(p: dict, table: str) -> list[tuple[dict, RunSpec]]:
    """(row keys, spec) of Tables 5 / 7: the six component variants (methods.COMPONENTS)."""
    st = p["settings"][table]
    ds, out = st["dataset"], []
    for (etf, ladm, neg, pos), label in COMPONENTS:
        head = "ladm" if ladm else ("etf" if etf else "fc")
        for seed in p["seeds"]:
            keys = {"dataset": DATASET_LABEL[ds], "clients": p["clients"], "beta": st["beta"], "gamma": st["gamma"],
                    "etf_clf": etf, "ladm": ladm, "l_neg": neg, "l_pos": pos, "components": label,
                    "method": "FedNCA-ML ablation"}
            if not (etf or ladm or neg or pos):
                spec = run_spec(p, ds, "FedAvg", st["beta"], st["gamma"], seed)  # = the FedAvg run
            elif (etf, ladm, neg, pos) == (1, 1, 1, 1):
                spec = run_spec(p, ds, FEDNCA, st["beta"], st["gamma"], seed)  # = the FedNCA-ML run
            else:
                spec = run_spec(p, ds, label, st["beta"], st["gamma"], seed, head=head, kind="fednca",
                                lam_neg=p["lam_neg"][ds] if neg else 0.0, lam_pos=p["lam_pos"] if pos else 0.0)
            out.append((keys, spec))
    return out


def query_specs(p: dict, table: str) -> list[tuple[dict, RunSpec]]:
    """(row keys, spec) of Tables 6 / 8: LADM + ETF classifier without regularisers, queries
    learnable (random or ETF init) or fixed (the fixed row is the Table 5 / 7 ETF-Clf+LADM run)."""
    st = p["settings"][table]
    ds, out = st["dataset"], []
    for qtype, qinit in QUERIES:
        for seed in p["seeds"]:
            keys = {"dataset": DATASET_LABEL[ds], "clients": p["clients"], "beta": st["beta"], "gamma": st["gamma"],
                    "query_type": qtype, "query_init": qinit, "method": "ETF-Clf+LADM (no regularizers)"}
            name = "ETF-Clf+LADM" if qtype == "fixed" else f"ETF-Clf+LADM (learnable {qinit} queries)"
            out.append((keys, run_spec(p, ds, name, st["beta"], st["gamma"], seed, head="ladm", kind="fednca",
                                       lam_neg=0.0, lam_pos=0.0, queries=qtype, query_init=qinit)))
    return out


def execution(p: dict) -> Execution:
    """How FedNCA-ML's runs execute (outside their cache key)."""
    return Execution(backend="auto", eval_batch=p.get("eval_batch", 512))


def sweep(specs: list[RunSpec], p: dict, data_root=None, desc="fednca") -> list[dict]:
    """Results of the specs (cached; identical specs trained once)."""
    uniq = list(dict.fromkeys(specs))
    res = run_specs(uniq, data_root, execution=execution(p), desc=desc)
    by = dict(zip(uniq, res))
    return [by[s] for s in specs]


def best_round_metrics(result: dict) -> dict:
    """The test metrics (percent) at the first round of peak validation macro-AUC (the last round
    without validation): {metric: (whole-set value, per-batch value)} and the round."""
    h = pd.DataFrame(result["history"])
    if SELECT_BY in h and h[SELECT_BY].notna().any():
        row = h.loc[h[SELECT_BY].idxmax()]
    else:
        row = h.iloc[-1]
    out = {m: (100 * float(row[f"test_{col}"]), 100 * float(row[f"test_{BATCH[m]}"])) for m, col in METRICS.items()}
    out["round"] = int(row["round"])
    return out


def per_seed(rows: list[tuple[dict, RunSpec]], results: list[dict]) -> pd.DataFrame:
    """One row per (run, metric): row keys, seed, value (whole test set), batch_value, best_round."""
    recs = []
    for (keys, spec), res in zip(rows, results):
        b = best_round_metrics(res)
        for metric in METRICS:
            recs.append({**keys, "seed": spec.seed, "metric": metric, "value": b[metric][0],
                         "batch_value": b[metric][1], "best_round": b["round"]})
    return pd.DataFrame(recs)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and sample std over seeds of the whole-set value (mean, std: compared with the paper)
    and of the per-batch value (batch_mean, batch_std)."""
    keys = [c for c in df.columns if c not in ("seed", "value", "batch_value", "best_round")]

    def agg(g):
        n = len(g)
        return pd.Series({"mean": g["value"].mean(), "std": g["value"].std(ddof=1) if n > 1 else np.nan,
                          "n_seeds": n, "batch_mean": g["batch_value"].mean(),
                          "batch_std": g["batch_value"].std(ddof=1) if n > 1 else np.nan,
                          "best_rounds": ";".join(str(int(r)) for r in g["best_round"]),
                          "per_seed": ";".join(f"{v:.2f}" for v in g["value"])})

    return df.groupby(keys, sort=False, dropna=False).apply(agg, include_groups=False).reset_index()
