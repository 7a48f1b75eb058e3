"""From run specs to cached results: groups runs that can train together and batches them.

A paper module describes each run as a JSON-able spec dict and gives a `build(spec) -> RunSetup`
function; `run_specs` reads finished runs from the results store and trains the rest, batching
runs that share a method, a TrainConfig and a data pool into one engine call.

    results = run_specs(specs, build, desc="table1")   # one dict per spec, in order
    results[i]["best"]["test_acc"], results[i]["history"]  # tidy per-round records
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import pandas as pd
import torch

from .algorithms.methods import Method
from .engine import Federation, Pools, TrainConfig, train
from .store import run_sweep


@dataclass
class RunSetup:
    """What the engine needs for one run: method, config, pool key (see `pools_for`) and layout."""

    method: Method
    config: TrainConfig
    pools_key: tuple
    federation: Federation


def default_device() -> str:
    """FEDPAPER_DEVICE if set, else cuda when available, else cpu."""
    return os.environ.get("FEDPAPER_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


@lru_cache(maxsize=4)
def pools_for(dataset: str, data_root: str | None, device: str, **synthetic_kwargs) -> Pools:
    """Standardised pools of a data set, loaded once per process (key: name, root, device)."""
    from .data import load_dataset, synthetic_images

    if dataset == "synthetic-images":
        ds = synthetic_images(**synthetic_kwargs)
    else:
        ds = load_dataset(dataset, root=data_root)
    pools = Pools.from_dataset(ds, device=device)
    pools.description = ds.describe()
    return pools


def get_pools(key: tuple) -> Pools:
    """key = (dataset, data_root, device, frozenset of synthetic kwargs items)."""
    dataset, root, device, kw = key
    return pools_for(dataset, root, device, **dict(kw))


def pools_key(dataset: str, data_root=None, device=None, **synthetic_kwargs) -> tuple:
    return (dataset, None if data_root is None else str(data_root), device or default_device(),
            tuple(sorted(synthetic_kwargs.items())))


def _result(res, r: int) -> dict:
    h = res.history[res.history["run"] == r].drop(columns=["run"])
    best = res.best().iloc[r].to_dict()
    best_f1 = res.best(report="test_f1").iloc[r]["test_f1"] if "test_f1" in h else None
    return {"history": h.to_dict("records"),
            "best": {"round": int(best["best_round"]), "test_acc": float(best["test_acc"]),
                     "test_f1": None if best_f1 is None else float(best_f1)},
            "final": {k: float(h[k].iloc[-1]) for k in h.columns if k.endswith(("_acc", "_f1", "_loss"))},
            "log": dict(res.log)}


def _train_group(setups: list[RunSetup], progress: bool) -> list[dict]:
    s0 = setups[0]
    res = train(s0.method, s0.config, get_pools(s0.pools_key), [s.federation for s in setups], progress=progress)
    return [_result(res, r) for r in range(len(setups))]


def run_specs(specs: list[dict], build, *, desc="runs", max_batch=16, progress=True, store=None,
              executor=None) -> list[dict]:
    """Result dict of every spec (history records, best-validation snapshot, final metrics).

    Specs are grouped by (method, config, pools) in their given order, up to `max_batch` runs per
    engine call; every finished run is stored at once, so an interrupted sweep resumes.
    `executor`: "local" (default; trains here), "ray[:ADDRESS]" or an executor object; None reads
    $FEDPAPER_EXECUTOR (see fedpaper.executors)."""
    from .executors import get_executor

    executor = get_executor(executor)
    if not executor.is_local:
        return executor.run_specs(list(specs), build, desc=desc, max_batch=max_batch, progress=progress, store=store)

    def many(chunk):
        setups = [build(s) for s in chunk]
        out = [None] * len(chunk)
        groups: dict = {}
        for i, st in enumerate(setups):
            groups.setdefault((st.method, st.config, st.pools_key), []).append(i)
        for idx in groups.values():
            for j in range(0, len(idx), max_batch):
                part = idx[j:j + max_batch]
                for i, r in zip(part, _train_group([setups[i] for i in part], progress)):
                    out[i] = r
        return out

    return run_sweep(specs, run_fn_many=many, batch_size=max_batch, desc=desc, progress=progress, store=store)


def histories(specs: list[dict], results: list[dict], keys: list[str]) -> pd.DataFrame:
    """Long table of per-round history with the chosen spec keys as columns."""
    rows = []
    for s, r in zip(specs, results):
        for rec in r["history"]:
            rows.append({**{k: s.get(k) for k in keys}, **rec})
    return pd.DataFrame(rows)
