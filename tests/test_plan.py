"""`fedpaper plan` (fedpaper.plan): the runs it counts are the runs a real run trains, its MACs
are FlopCounterMode's on the real model (checked against a hand count), bad input is one line."""
import json

import pytest
import torch

from fedpaper import cli
from fedpaper.runs import model_costs as C
from fedpaper import plan as P
from fedpaper.runs.store import ResultStore


def test_plan_counts_exactly_the_runs_a_smoke_run_trains(cache_tmp, tmp_path):
    """fedmt/fig3 at smoke: the store keys the real run records equal the plan's runs, and the
    plan trained nothing (no store entry before the real run)."""
    from fedpaper.papers.fedmt import estimation

    [plan] = P.collect(["fedmt/fig3"], "smoke", None)
    store = ResultStore()
    assert len(store) == 0 and plan.status == "planned" and plan.runs
    planned = {store.key(json.loads(r.ident)) for r in plan.runs}
    estimation(profile="smoke", out_dir=tmp_path / "out")
    trained = set(store.recorded("fedmt/fig3", "smoke"))
    assert trained and planned == trained
    assert len(store) == len(trained)  # every recorded run is stored: they were trained


def test_a_ladder_at_the_paper_profile_is_no_training_not_an_error():
    """A compute ladder has no rungs at the paper profile (reproduce skips it): the plan says so as
    'no training', not as an error line."""
    [plan] = P.collect(["fedpals/scaling"], "paper", None)
    assert plan.status.startswith("no training") and "no rungs at the paper profile" in plan.status
    assert not plan.runs


def test_a_ladder_counts_the_runs_of_its_rungs_as_its_own(cache_tmp, tmp_path):
    """fedmt/scaling at smoke: the plan collects every rung's runs under the ladder's id (so that
    `cache export --only fedmt/scaling` takes them), the rung equal to the profile shares table2's
    runs, and table2's own plan is not inflated by the rungs' runs. Its planned runs are exactly what
    the ladder trains."""
    from fedpaper.papers.fedmt import ladder

    table2, scaling = P.collect(["fedmt/table2", "fedmt/scaling"], "smoke", None)
    [alone] = P.collect(["fedmt/table2"], "smoke", None)
    assert scaling.status == "planned" and table2.status == "planned"
    assert {r.ident for r in table2.runs} == {r.ident for r in alone.runs}
    assert {r.ident for r in table2.runs} < {r.ident for r in scaling.runs}  # r2 = the smoke profile
    assert 0 < len(scaling.new) < len(scaling.runs)
    store = ResultStore()
    assert len(store) == 0  # the plan trained nothing
    ladder.ladder_artifact(profile="smoke", out_dir=tmp_path / "out")
    assert set(store.keys()) == {store.key(json.loads(r.ident)) for r in scaling.runs}


def test_run_peak_counts_every_participating_clients_parameter_copies():
    """run_peak: pools + slots x (the engine's 4 parameter-sized copies + optimiser state) + one
    slot's saved step; the slots are the participating clients (fig8a: 10 of 101)."""
    r = P.RunCount("x", "p", 1, model="m", pools=("id", 100), slots=3)
    costs = {"m": {"step_memory": {"params": 10, "optimizer": 5, "saved": 7, "total": 0}}}
    assert P.run_peak(r, costs) == 100 + 3 * (4 * 10 + 5) + 7
    assert P.run_peak(P.RunCount("y", "p", 1), costs) is None
    [plan] = P.collect(["fedpals/fig8a"], "smoke", None)
    assert plan.runs and all(r.slots == max(1, round(0.1 * r.model.clients)) < r.model.clients for r in plan.runs)


def test_lenet_macs_match_a_hand_count():
    """LeNet (CIFAR-10: conv 3->6 5x5, 6->16 5x5, FC 400-120-84-10) at 32 px, per sample.
    Forward: 6*28*28*75 + 16*10*10*150 + 400*120 + 120*84 + 84*10 = 651,720 MACs. Training adds
    the weight gradients of every layer (651,720) and the input gradients of every layer but the
    first conv, whose input needs none (651,720 - 352,800)."""
    key = C.ModelKey("lenet", json.dumps({"in_channels": 3, "image_size": 32, "num_classes": 10, "c2": 16}),
                     (3, 32, 32), 32, "sgd", 0.0, "fp32")
    train, ev = C.macs(key)
    forward = 6 * 28 * 28 * 75 + 16 * 10 * 10 * 150 + 400 * 120 + 120 * 84 + 84 * 10
    assert ev == forward == 651_720
    assert train == forward + forward + (forward - 6 * 28 * 28 * 75)


def test_step_memory_of_a_linear_layer():
    """Linear(10, 5), batch 4, SGD with momentum: params 55 floats, grads 55, momentum 55; saved:
    the float32 input batch (4x10), counted explicitly; the layer saves nothing else for backward
    (engine.memory.saved_tensor_bytes excludes the input and the parameters)."""
    net = torch.nn.Linear(10, 5)
    m = C.step_memory(net, (10,), 4, lambda n: torch.optim.SGD(n.parameters(), lr=0.1, momentum=0.9))
    assert (m["params"], m["grads"], m["optimizer"]) == (220, 220, 220)
    assert m["saved"] == 4 * 10 * 4
    assert m["total"] == 220 * 3 + 160


@pytest.mark.parametrize("argv, words", [
    (["plan", "--profile", "smoke", "--only", "fedpals/nope"], "fedpals/nope"),
    (["plan", "--profile", "huge"], "unknown profile 'huge'"),
])
def test_bad_input_is_one_line_exit_2(argv, words, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and err.startswith("fedpaper: error:")
