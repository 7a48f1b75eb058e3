"""Run specs, federations and per-seed results of the private-label-sets experiments.

One run = (data set, method, labels per client L, local epochs E, seed) at a profile's settings.
A spec holds every parameter of the run (it is the cache key), so the bar plots (L = 3, 5), the
accuracy-vs-L plots and the curves over rounds read the SAME cached runs.

Federation of a run (App A; vague-3 to -6): `privlabels_split` (global stratified 80/20 split, the
unlabeled server set drawn from the 80% part), then `private_label_partition(L, samples_per_client)`
on the rest; each seed redraws the split, the label sets, the subsample, the initialisation and the
data order. The quick profile evaluates on per-seed random subsets of the validation split and the
test set (recorded in the spec and the notes).
"""
from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pandas as pd

from fedpaper.algorithms import Method, get_method
from fedpaper.engine import Federation, TrainConfig
from fedpaper.runs.executors import run_specs
from fedpaper.runs.experiment import Execution, RunSpec, get_pools, pools_key_of
from fedpaper.claims.summaries import interval_name
from fedpaper.claims.summaries import group_fields, seed_summary
from fedpaper.blocks.partition import private_label_partition, privlabels_split
from fedpaper.runs.store import spec_json

PUBLIC = ["FedAvg", "FedProx", "FedRS", "Tuning-MSE", "Tuning-Pairwise"]
PRIVATE = ["FedAvg", "FedProx", "Tuning-MSE", "Tuning-Pairwise"]  # FedRS needs the full label set (Sec 5)
PAIRWISE_ALL = "Tuning-Pairwise (all pairs)"  # vague-7
ROUNDS_METHODS = ["FedAvg", "Tuning-MSE", "Tuning-Pairwise"]  # Figs 5-8 (App C.1)
EPOCH_METHODS = ["FedAvg", "Tuning-MSE", "Tuning-Pairwise"]  # Figs 11-13 (App C.3, vague-13)
SETTINGS_ORDER = ["private", "public"]
NUM_CLASSES = 10  # both data sets (CIFAR-10, Fashion-MNIST)
SPLIT_SEED, PARTITION_SEED, EVAL_SEED = 0, 10_000, 20_000  # offsets: independent streams per seed


def method_for(name: str, setting: str, p: dict, *, sgd_tuning: bool = False) -> Method:
    """The engine Method of a display name in a setting (private: Algorithm 1 / adapted FedProx)."""
    private = setting == "private"
    if name == PAIRWISE_ALL:
        m = Method(f"{PAIRWISE_ALL}{' (private)' if private else ''}", private=private, tuning="pairwise_all")
    else:
        m = get_method(f"{name} (private)" if private and name != "FedRS" else name)
    if name == "FedRS" and private:
        raise ValueError("FedRS needs the full label set; it has no private-setting version (Sec 5)")
    m = m.with_(mu=p["mu"], fedrs_alpha=p["fedrs_alpha"], tuning_epochs=p["tuning_epochs"])
    if sgd_tuning and m.tuning:
        m = m.with_(tuning_optimizer=p["epochs"]["tuning_optimizer"], tuning_lr=p["epochs"]["tuning_lr"])
    return m


def data_spec(dataset: str, p: dict) -> dict:
    """Which images: the real data set, or (smoke) its synthetic stand-in."""
    if p["profile"] == "smoke":
        return {"name": "synthetic-images", "options": dict(p["stand_ins"][dataset]), "stands_for": dataset}
    return {"name": dataset, "options": {}, "stands_for": None}


def method_setting(setting: str, L: int) -> str:
    """The setting whose method a run trains. At L = NUM_CLASSES every client holds every label: no
    label set is private, so the private setting is the public one and its runs train the public
    methods. (Sec 4.1 adapts FedAvg and FedProx because the clients' label sets, and so their
    classifier sizes, differ; with full label sets Algorithm 1 is FedAvg exactly, bit for bit in our
    engine, but adapted FedProx would still drop the proximal term on the classifier, which made
    private and public FedProx differ at L = 10 by up to 2.65 points per seed.)"""
    return "public" if int(L) >= NUM_CLASSES else setting


def run_spec(p: dict, dataset: str, name: str, setting: str, L: int, seed: int, *, epochs: int | None = None) -> RunSpec:
    """Every parameter of one run (the cache key)."""
    sgd = epochs is not None
    return RunSpec(
        paper="privlabels", data=data_spec(dataset, p),
        partition={"layout": "privlabels", "seed": int(seed), "L": int(L), "num_clients": p["num_clients"],
                   "samples_per_client": p["samples_per_client"], "val_fraction": p["val_fraction"],
                   "server_size": p["server_size"][dataset]},
        method=method_for(name, method_setting(setting, L), p, sgd_tuning=sgd).algorithm().spec(),
        training={"model": "privlabels_cnn",
                  "model_kwargs": {"num_classes": NUM_CLASSES, "widths": list(p["widths"]), "hidden": p["hidden"],
                                   "dropout": p["dropout"]},
                  "optimizer": p["optimizer"], "lr": p["lr"], "batch_size": p["batch_size"],
                  "local_epochs": int(epochs if sgd else p["local_epochs"]),
                  "rounds": p["epochs"]["rounds"] if sgd else p["rounds"],
                  **({"precision": p["precision"]} if p.get("precision", "fp32") != "fp32" else {})},
        evaluation={"val_eval": p["val_eval"], "test_eval": p["test_eval"]},
        tags={"display": name, "setting": setting})


def pools(data: dict, data_root=None):
    return get_pools(pools_key_of(data, data_root))


@lru_cache(maxsize=64)
def _federation(data_json: str, L, seed, m, spc, val_fraction, server_size, val_eval, test_eval, data_root):
    pl = pools(json.loads(data_json), data_root)
    y = pl.y_train.cpu().numpy()
    client_pool, val, server = privlabels_split(y, val_fraction, server_size, seed=SPLIT_SEED + seed)
    part = private_label_partition(y, m, L, spc, seed=PARTITION_SEED + seed, pool=client_pool)
    rng = np.random.default_rng(EVAL_SEED + seed)
    test = np.arange(len(pl.y_test))
    if val_eval and val_eval < len(val):
        val = np.sort(rng.choice(val, val_eval, replace=False))
    if test_eval and test_eval < len(test):
        test = np.sort(rng.choice(test, test_eval, replace=False))
    fed = Federation(part.client_indices, test, val_indices=val, server_indices=server, seed=seed,
                     label_sets=[list(s) for s in part.meta["label_sets"]])
    return fed, part


def federation(spec: RunSpec, data_root=None):
    """(Federation, Partition) of a spec; cached, identical for every method of a seed."""
    q, e = spec.partition, spec.evaluation
    return _federation(spec_json(spec.data), q["L"], q["seed"], q["num_clients"], q["samples_per_client"],
                       q["val_fraction"], q["server_size"], e["val_eval"], e["test_eval"],
                       None if data_root is None else str(data_root))


def _layout(spec: RunSpec, pools, data_root=None):
    """App A (vague-3 to -6): `privlabels_split`, then `private_label_partition` on the rest."""
    return federation(spec, data_root)[0]


def methods_of(setting: str, p: dict, L: int) -> list[str]:
    names = list(PUBLIC if setting == "public" else PRIVATE)
    if L in p["pairwise_all_labels"]:
        names.append(PAIRWISE_ALL)
    return names


def main_specs(p: dict, dataset: str, labels, methods=None) -> list[dict]:
    """Specs of the main sweep (E = 1, Adam tuning), ordered method > L > seed so that runs of a
    method train as one batch. `methods` limits the display names (e.g. the rounds figures)."""
    out = []
    for setting in SETTINGS_ORDER:
        for name in dict.fromkeys(PUBLIC + [PAIRWISE_ALL]):
            for L in labels:
                if name not in methods_of(setting, p, L) or (methods and name not in methods):
                    continue
                out += [run_spec(p, dataset, name, setting, L, s) for s in p["seeds"]]
    return out


def epoch_specs(p: dict, dataset: str, pairs, seeds) -> list[dict]:
    """Specs of the local-epoch ablation (SGD central tuning, vague-13); pairs = [(E, L), ...]."""
    out = []
    for setting in SETTINGS_ORDER:
        for name in EPOCH_METHODS:
            for E, L in pairs:
                out += [run_spec(p, dataset, name, setting, L, s, epochs=E) for s in seeds]
    return out


def canonical(spec: RunSpec, p: dict) -> RunSpec:
    """The run that actually trains for `spec`. At L = 10 a private run trains the public method
    (method_setting), so with p["share_L10"] it is the public run of the same seed and method; FedRS
    restricts nothing when every client holds every label (targets section 2, implementation checks),
    so it is the public FedAvg run. Without share_L10 (the paper profile) they are trained as runs of
    their own, the same computation under another key."""
    if not p.get("share_L10") or spec.partition["L"] != NUM_CLASSES:
        return spec
    if spec.tags["display"] == "FedRS":
        return spec.with_(replace_method=method_for("FedAvg", "public", p).algorithm().spec(),
                          tags={"display": "FedAvg", "setting": "public"})
    return spec.with_(tags={"setting": "public"})


def execution(p: dict) -> Execution:
    """How this paper's runs execute (outside their cache key)."""
    return Execution(backend=p.get("backend", "auto"), eval_batch=p.get("eval_batch", 1024))


def sweep(specs: list[RunSpec], p: dict, data_root=None, desc="privlabels") -> list[dict]:
    """Results of the specs (cached); with share_L10, identical L = 10 runs are trained once."""
    canon = [canonical(s, p) for s in specs]
    uniq = list(dict.fromkeys(canon))
    res = run_specs(uniq, data_root, execution=execution(p), desc=desc)
    by = dict(zip(uniq, res))
    return [by[c] for c in canon]


def per_seed(specs: list[dict], results: list[dict], dataset_label: str) -> pd.DataFrame:
    """One row per run: dataset, setting, labels_per_client, local_epochs, method, seed, accuracy."""
    return pd.DataFrame([{"dataset": dataset_label, "setting": s.tags["setting"], "labels_per_client": s.partition["L"],
                          "local_epochs": s.training["local_epochs"], "method": s.tags["display"], "seed": s.seed,
                          "accuracy": r["best"]["test_acc"], "best_round": r["best"]["round"]}
                         for s, r in zip(specs, results)])


def per_round(specs: list[dict], results: list[dict], dataset_label: str) -> pd.DataFrame:
    rows = []
    for s, r in zip(specs, results):
        for h in r["history"]:
            rows.append({"dataset": dataset_label, "setting": s.tags["setting"], "labels_per_client": s.partition["L"],
                         "method": s.tags["display"], "seed": s.seed, "round": int(h["round"]),
                         "accuracy": h["test_acc"]})
    return pd.DataFrame(rows)


SUMMARY_COLS = ["metric", "mean", "std", "ci_low", "ci_high", "n_seeds", "interval", "per_seed"]


def summarise(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean, std (ddof=1) and the percentile-bootstrap interval (95%, 1000 resamples, vague-14) over
    seeds; the `interval` column says what ci_low/ci_high are (with 3 seeds: the seeds' min-max,
    claims.summaries.interval_name); `per_seed` the accuracies in seed order, joined by ';'
    (so a check can see one-class models: the same value for 3+ methods on a seed)."""
    rows = []
    for k, g in df.groupby(keys, sort=False):
        g = g.sort_values("seed") if "seed" in g else g
        row = {**group_fields(keys, k), **seed_summary(g["accuracy"].to_numpy(), "accuracy", ci=True, per_seed=".4f")}
        rows.append(dict(row, interval=interval_name(row["n_seeds"])))
    return pd.DataFrame(rows, columns=keys + SUMMARY_COLS)


def missing_labels(p: dict, dataset: str, labels, seeds, data_root=None) -> pd.DataFrame:
    """Labels held by no client, per (L, seed), counted on the runs' own partitions (claim-19)."""
    rows = []
    for L in labels:
        for s in seeds:
            _, part = federation(run_spec(p, dataset, "FedAvg", "public", L, s), data_root)
            held = set().union(*map(set, part.meta["label_sets"]))
            rows.append({"labels_per_client": L, "seed": s, "missing": 10 - len(held),
                         "min_client_size": int(min(len(c) for c in part.client_indices)),
                         "short_clients": len(part.meta["short_clients"])})
    return pd.DataFrame(rows)


def dataset_records(datasets, p: dict, data_root=None) -> list[dict]:
    out = []
    for d in datasets:
        desc = getattr(pools(data_spec(d, p), data_root), "description", None) or {"name": d}
        out.append(dict(desc, name=d))
    return out
