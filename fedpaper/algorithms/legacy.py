"""The one-time migration of run specs cached before a method had one form.

Until code version 8208da88b14132f6 a RunSpec's method (and so its results-cache key) was written in
one of three ways: the fields of a flat `Method` (less the fields that held their defaults), the same
with `family`/`options` (FedMT and its baselines), or a `{"builder": "fednca", ...}` dict (FedNCA-ML).
Now it is always `Algorithm.spec()`: the parts with their constructor arguments. `method_spec` turns an
old method dict into the new one by building its algorithm the way the old code did (Method's fields,
algorithms.families) and taking its spec; `fedpaper cache rekey` applies it to every cached run it
rekeys, after retraining the cheapest runs to check the results are the same bit for bit.
"""
from __future__ import annotations

from fedpaper.algorithms.families import family_algorithm
from fedpaper.algorithms.methods import Method


def is_legacy(method: dict) -> bool:
    """Whether a RunSpec method dict is in an old form (not Algorithm.spec())."""
    return isinstance(method, dict) and "parts" not in method


def method_spec(method: dict) -> dict:
    """The Algorithm.spec() of a RunSpec method dict in any form (a new one is returned as it is)."""
    if not is_legacy(method):
        return method
    d = dict(method)
    if d.get("builder") == "fednca":
        d.pop("builder")
        return family_algorithm(d.pop("name"), "fednca", d).spec()
    if d.get("family") is not None:
        return family_algorithm(d["name"], d["family"], {k: v for k, v in d.get("options") or ()}).spec()
    d.pop("family", None), d.pop("options", None)
    return Method(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}).algorithm().spec()


def run_spec(spec: dict) -> dict:
    """A stored run's key dict ({"paper", "run": RunSpec fields, "data_copy"}) with its method migrated."""
    run = spec.get("run")
    if not isinstance(run, dict) or not is_legacy(run.get("method")):
        return spec
    return {**spec, "run": {**run, "method": method_spec(run["method"])}}
