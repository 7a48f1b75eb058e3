"""`fedpaper plan --gpus N` (fedpaper.plan.gpu_wall): the plan's groups of runs packed longest first
onto the least loaded of N GPUs, next to the GPU-hours."""
import json

import pytest

from fedpaper import cli
from fedpaper import plan as P
from fedpaper.runs.model_costs import ModelKey

KEY = ModelKey("lenet", "{}", (1, 28, 28), 32, "sgd", 0.0, "fp32", 10)
OTHER = ModelKey("lenet", "{}", (3, 32, 32), 32, "sgd", 0.0, "fp32", 10)
RATES = {KEY.signature(): {"train_samples_per_s": 1000.0, "eval_samples_per_s": 1e9}}


def run(method: str, seed: int, train_s: float, model=KEY, paper="fedpals") -> P.RunCount:
    """A counted run of `train_s` GPU seconds at RATES (eval negligible), keyed as the store keys it."""
    ident = json.dumps({"paper": paper, "run": {"method": {"name": method}, "training": {"rounds": 2},
                                                "data": {"name": "d"}, "partition": {"seed": seed}},
                        "data_copy": None}, sort_keys=True)
    return P.RunCount(ident, paper, 2, model, train_samples=train_s * 1000.0, eval_samples=0.0)


def test_longest_first_onto_the_least_loaded():
    assert P.pack_longest_first([3, 5, 3, 4, 3], 2) == [8, 10]  # 5 | 4, 3 -> 7 | 5, 3 -> 8 | 7, 3 -> 10
    assert P.pack_longest_first([3, 5, 3, 4, 3], 5) == [5, 4, 3, 3, 3]
    assert P.pack_longest_first([], 3) == [0, 0, 0]
    with pytest.raises(P.BadParameterError, match="--gpus 0"):
        P.pack_longest_first([1.0], 0)


def test_runs_are_grouped_as_the_sweep_groups_them():
    """Runs sharing method, training and data in chunks of max_batch form one group; its time is the
    sum of its runs'. A run without a GPU rate leaves its group out and is counted."""
    runs = [run("FedAvg", s, 10.0) for s in range(3)] + [run("FedProx", s, 20.0) for s in range(3)]
    assert P.gpu_groups(runs, RATES, max_batch=16) == ([30.0, 60.0], 0)
    assert P.gpu_groups(runs, RATES, max_batch=2) == ([20.0, 10.0, 20.0, 40.0], 0)
    assert P.gpu_groups(runs + [run("FedAvg", 9, 1.0, model=OTHER)], RATES, 16) == ([60.0], 1)


def test_wall_time_per_paper_and_of_all_papers():
    plans = [P.ArtifactPlan("fedpals/table1", runs=[run("FedAvg", s, 3600.0) for s in range(3)]
                            + [run("FedProx", s, 1800.0) for s in range(3)]),
             P.ArtifactPlan("fedpals/fig7", runs=[run("FedAvg", 0, 3600.0)]),  # a run of table1's: counted once
             P.ArtifactPlan("fedmt/table2", runs=[run("FedAvg", s, 7200.0, paper="fedmt") for s in range(2)])]
    w = P.gpu_wall(plans, RATES, 2)
    assert w["fedpals"] == {"wall_h": 3.0, "gpu_h": 4.5, "groups": 2, "longest_h": 3.0, "unknown_runs": 0}
    assert w["fedmt"]["wall_h"] == 4.0 and w["fedmt"]["groups"] == 1
    assert w["all"]["wall_h"] == 4.5 and w["all"]["gpu_h"] == 8.5  # 4 h | 3 h + 1.5 h
    line = P.gpu_wall_line(plans, RATES, 2)
    assert "\n" not in line and line.startswith("on 2 GPU(s)")
    assert "fedpals 3.0 h wall (4.5 h GPU, 2 group(s), longest 3.0 h)" in line
    assert "all papers 4.5 h wall (8.5 h GPU" in line


def test_cli_gpus_below_one_is_one_line(capsys):
    assert cli.main(["plan", "--only", "fedpals/table1", "--gpus", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gpus 0 must be a number of GPUs >= 1" in err[0]
