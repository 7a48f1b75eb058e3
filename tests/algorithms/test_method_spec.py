"""One form of a method (issue 33, item 3): an Algorithm whose spec (parts and their constructor
arguments) is the cache key and builds it again; the old three forms migrate to it."""
import importlib
import inspect
import pkgutil

import pytest

import fedpaper.algorithms as A
from fedpaper.algorithms import algorithm_of, get_method, Method
from fedpaper.algorithms.base import Part
from fedpaper.algorithms.families import family_algorithm
from fedpaper.algorithms.legacy import is_legacy, method_spec, run_spec
from fedpaper.algorithms.parts import argument, PARTS
from fedpaper.ground.errors import BadParameterError, UnknownNameError
from fedpaper.runs.experiment import method_of


def test_every_part_type_of_the_package_is_in_the_table():
    found = set()
    for m in pkgutil.iter_modules(A.__path__):
        mod = importlib.import_module(f"fedpaper.algorithms.{m.name}")
        found |= {c for _, c in inspect.getmembers(mod, inspect.isclass)
                  if issubclass(c, Part) and c is not Part and c.__module__.startswith("fedpaper.algorithms")}
    assert {c.__name__ for c in found} == set(PARTS)


def test_a_family_and_a_method_spec_build_the_same_algorithm_again():
    for a in [family_algorithm("FedMT (E)", "fedmt", {"estimator": "estimate", "lambda2": 1 / 16}),
              family_algorithm("SemiFL", "semifl", {"threshold": 0.9}),
              family_algorithm("FedRep", "fedrep", {}), family_algorithm("FedTrans", "fedtrans", {}),
              family_algorithm("FedNCA-ML", "fednca", {"kind": "fedcurv", "fisher_batches": 2, "optim": {
                  "lr": 1e-3, "weight_decay": 0.01, "betas": [0.9, 0.98], "schedule": "warmup-linear"}}),
              get_method("Tuning-Pairwise (private)").algorithm(), get_method("FedProx+FedPALS", lam=2.5).algorithm()]:
        b = algorithm_of(a.spec())
        assert b == a and hash(b) == hash(a) and b.spec() == a.spec() and b.optimizer == a.optimizer
    assert argument(family_algorithm("X", "fedmt", {"threshold": 0.5}).spec(), "threshold") == 0.5


def test_a_bad_spec_says_what_is_wrong_in_one_line():
    with pytest.raises(UnknownNameError, match="unknown algorithm part 'Nope'"):
        algorithm_of({"name": "x", "parts": [["Nope", {}]], "optimizer": None})
    with pytest.raises(BadParameterError, match="part FedPALSWeights"):
        algorithm_of({"name": "x", "parts": [["FedPALSWeights", {"lambda": 1}]], "optimizer": None})
    with pytest.raises(BadParameterError, match="old form"):
        method_of({"name": "FedAvg", "client": "local"})


# Method dicts as the code before one form wrote them (cache keys of code 8208da88b14132f6)
OLD_FEDPROX_PRIVATE = {"name": "FedProx (private)", "client": "fedprox", "server": "fedavg", "private": True,
                       "tuning": None, "mu": 0.01, "fedrs_alpha": 0.5, "lam": 0.0, "afl_step": 0.01,
                       "tuning_epochs": 3, "tuning_optimizer": "adam", "tuning_lr": None}
OLD_FEDMT = {**{k: v for k, v in OLD_FEDPROX_PRIVATE.items() if k != "name"}, "name": "FedMT (E)", "client": "local",
             "private": False, "family": "fedmt",
             "options": [["estimator", "estimate"], ["randaugment", [2, 10]], ["threshold", 0.95]]}
OLD_FEDNCA = {"builder": "fednca", "name": "FedProx", "kind": "fedprox", "bce": "mean", "tau": 0.3, "lam_neg": 0.0,
              "lam_pos": 0.0, "mu": 0.01, "frozen": [],
              "optim": {"lr": 1e-3, "weight_decay": 0.01, "betas": [0.9, 0.98], "schedule": "warmup-linear"}}


def test_old_method_dicts_migrate_to_the_spec_of_the_same_parts():
    assert method_spec(OLD_FEDPROX_PRIVATE) == get_method("FedProx (private)").algorithm().spec()
    assert method_spec(OLD_FEDPROX_PRIVATE)["parts"][1] == ["Penalty", {"name": "prox", "coef": 0.01,
                                                                      "skip_classifier": True}]
    assert method_spec(OLD_FEDMT) == family_algorithm("FedMT (E)", "fedmt", {
        "estimator": "estimate", "randaugment": (2, 10), "threshold": 0.95}).spec()
    new = method_spec(OLD_FEDNCA)
    assert [k for k, _ in new["parts"]] == ["Penalty", "FedAvgWeights", "FedNCALoss"]
    assert new["optimizer"]["kind"] == "adamw" and new["optimizer"]["betas"] == [0.9, 0.98]
    for old in (OLD_FEDPROX_PRIVATE, OLD_FEDMT, OLD_FEDNCA):
        assert is_legacy(old) and not is_legacy(method_spec(old)) and method_spec(method_spec(old)) == method_spec(old)
    key = {"paper": "p", "run": {"method": OLD_FEDNCA, "seed": 1}, "data_copy": None}
    assert run_spec(key)["run"]["method"] == new and run_spec(run_spec(key)) == run_spec(key)
    assert Method("FedAvg").algorithm().spec() == method_spec({"name": "FedAvg"})
