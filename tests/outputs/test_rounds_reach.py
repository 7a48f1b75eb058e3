"""A `rounds` override that reaches none of an artifact's declared runs is bad input (one line naming the
setting the runs take their rounds from), never a provenance that records rounds the runs did not get;
privlabels' epoch ablation (Figs 11-13, its own `epochs.rounds`) follows a `rounds` override."""
import pytest

from fedpaper.ground.errors import BadParameterError
from fedpaper.outputs.pipeline import check_rounds_reach, declared_jobs
from fedpaper.papers import privlabels


def _epoch_rounds(overrides) -> dict:
    """{artifact id: the rounds its runs train} of privlabels' epoch ablation at the smoke profile."""
    # its jobs as the pipeline settles them, nothing run
    out = {}
    for job in declared_jobs(privlabels.epochs, profile="smoke", overrides=overrides):
        params = job.params
        specs = list(job.specs(params))
        check_rounds_reach(job.artifact_id, params, specs)
        out[job.artifact_id] = {s.training["rounds"] for s in specs}
    return out


def test_a_rounds_override_reaches_the_epoch_ablation():
    """Figs 11-13 train the main sweep's rounds: a `rounds` override reaches their runs."""
    assert list(_epoch_rounds(None).values()) == [{2}] * 3  # the smoke profile's rounds (rounds = epochs.rounds = 2)
    got = _epoch_rounds({"rounds": 7})
    assert set(got) == {"privlabels/fig11", "privlabels/fig12", "privlabels/fig13"}
    assert list(got.values()) == [{7}] * 3


def test_an_epochs_rounds_override_keeps_its_own_rounds():
    assert list(_epoch_rounds({"rounds": 7, "epochs.rounds": 3}).values()) == [{3}] * 3
    assert list(_epoch_rounds({"epochs.rounds": 3}).values()) == [{3}] * 3
    p = declared_jobs(privlabels.epochs, profile="smoke", overrides={"rounds": 7, "epochs": {"rounds": 4}})[0].params
    assert (p["rounds"], p["epochs"]["rounds"]) == (7, 4)


def test_an_override_that_misses_the_runs_names_the_setting_they_take_their_rounds_from():
    params = {"rounds": 7, "epochs": {"rounds": 2}, "overrides": {"rounds": 7}}
    with pytest.raises(BadParameterError, match=r"x/y: the override rounds=7 reaches none of its runs; "
                                                r"its runs take their rounds from epochs\.rounds; override that instead"):
        check_rounds_reach("x/y", params, [{"training": {"rounds": 2}}])


def test_a_rounds_override_that_reaches_a_run_passes():
    check_rounds_reach("x/y", {"overrides": {"rounds": 5}}, [{"training": {"rounds": 5}}, {"training": {"rounds": 2}}])
    check_rounds_reach("x/y", {"overrides": {"rounds": {"cifar10": 5, "fashion-mnist": 3}}}, [{"training": {"rounds": 3}}])
    check_rounds_reach("x/y", {"overrides": {"lr": 0.1}}, [{"training": {"rounds": 9}}])  # no rounds override


def test_a_rounds_override_that_reaches_no_run_is_one_line():
    with pytest.raises(BadParameterError, match="its runs train 9 rounds, set by none of its settings") as e:
        check_rounds_reach("x/y", {"overrides": {"rounds": 5}}, [{"training": {"rounds": 9}}])
    assert "\n" not in str(e.value)
