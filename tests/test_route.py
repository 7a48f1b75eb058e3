"""A setting's route from a notebook's call to the round loop enters no module twice: measured by
running one artifact of each paper (smoke) with a `rounds` override under a profiler hook
(tests/route_harness.py), at every call into fedpaper that hands the value on."""
import pytest

from tests import route_harness as H

# the artifacts whose paper-profile dry runs ARCHITECTURE.md times, one per paper
ARTIFACTS = ["fedpals/table1", "privlabels/fig2", "fedmt/table2", "fednca/table1"]
ROUNDS = 7  # no smoke profile trains 7 rounds: an integer equal to it by chance is rare
# Below the round loop, the algorithm parts call back into the trainer through the Context's
# `predict` and `train_slots` (FedMT's pseudo-labels, central tuning, server training) and use the
# slot helpers of algorithms/base.py beside the Algorithm that dispatches to them: the functions a
# module is entered again by, and no others (a backend object owning the client step would take the
# trainer's two off this list).
AGAIN_BELOW_THE_LOOP = {"driver/trainer.py": {"predict", "train_slots", "_train_part"},
                        "algorithms/base.py": {"per_run_weights", "slot_sizes", "augment"}}


@pytest.mark.parametrize("artifact_id", ARTIFACTS)
def test_rounds_reach_the_round_loop_entering_no_module_twice(artifact_id, tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPAPER_PROGRESS", "0")
    stacks = H.route(H.artifact_function(artifact_id), "rounds", ROUNDS, profile="smoke", out_dir=str(tmp_path))
    at_loop = [s for s in stacks if any(m == "driver/trainer.py" and "train" in names for m, names in s)]
    assert at_loop, f"{artifact_id}: rounds={ROUNDS} never reached the round loop"
    assert [m for m, _ in H.to_round_loop(at_loop[0])][:2] == ["notebook.py", "outputs/pipeline.py"]
    twice = {" -> ".join(m for m, _ in H.to_round_loop(s)): H.entered_twice(H.to_round_loop(s)) for s in stacks}
    assert not {k: v for k, v in twice.items() if v}
    for stays in stacks:  # below the loop: only the known callbacks
        for m in H.entered_twice(stays):
            later = [set(names) for mod, names in stays if mod == m][1:]
            assert all(names <= AGAIN_BELOW_THE_LOOP.get(m, set()) for names in later), (m, later, stays)


def test_a_module_left_and_entered_again_is_found():
    """The check itself: a stack that goes out of a module and back into it is caught, one that
    stays in it is not; the stays below the round loop are left out."""
    out_and_back = [("runs/executors.py", ["run_specs"]), ("runs/sweep.py", ["run_sweep"]),
                    ("runs/executors.py", ["many"]), ("driver/trainer.py", ["train"])]
    assert H.entered_twice(H.to_round_loop(out_and_back)) == ["runs/executors.py"]
    straight = [("runs/executors.py", ["run_specs"]), ("runs/sweep.py", ["run_sweep"]),
                ("driver/trainer.py", ["train"]), ("algorithms/base.py", ["aggregate"]),
                ("algorithms/afl.py", ["weights"]), ("algorithms/base.py", ["per_run_weights"])]
    assert H.entered_twice(H.to_round_loop(straight)) == []
    assert H.entered_twice(straight) == ["algorithms/base.py"]
