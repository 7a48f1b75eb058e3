"""A `rounds` override that reaches none of an artifact's declared runs is bad input (one line naming the
setting the runs take their rounds from), never a provenance that records rounds the runs did not get."""
import pytest

from fedpaper.ground.errors import BadParameterError
from fedpaper.outputs.pipeline import check_rounds_reach
from fedpaper.papers import privlabels


def _specs(job, params):
    return list(job.specs(params))


def test_privlabels_epoch_ablation_names_its_own_rounds_setting(tmp_path):
    """Figs 11-13 train `epochs.rounds` rounds: a plain `rounds` override does not reach them."""
    # the paper's own function (what the pipeline's decorator wraps): its jobs, nothing run
    jobs = privlabels.epochs.__wrapped__(profile="smoke", data_root=None, seeds=None, overrides={"rounds": 7})
    job = jobs[0] if isinstance(jobs, (list, tuple)) else jobs
    specs = _specs(job, job.params)
    assert specs and all(s.training["rounds"] != 7 for s in specs)
    with pytest.raises(BadParameterError, match=r"privlabels/fig1\d: the override rounds=7 reaches none of its runs; "
                                                r"its runs take their rounds from epochs\.rounds; override that instead"):
        check_rounds_reach(job.artifact_id, job.params, specs)


def test_a_rounds_override_that_reaches_a_run_passes():
    check_rounds_reach("x/y", {"overrides": {"rounds": 5}}, [{"training": {"rounds": 5}}, {"training": {"rounds": 2}}])
    check_rounds_reach("x/y", {"overrides": {"rounds": {"cifar10": 5, "fashion-mnist": 3}}}, [{"training": {"rounds": 3}}])
    check_rounds_reach("x/y", {"overrides": {"lr": 0.1}}, [{"training": {"rounds": 9}}])  # no rounds override


def test_a_rounds_override_that_reaches_no_run_is_one_line():
    with pytest.raises(BadParameterError, match="its runs train 9 rounds, set by none of its settings") as e:
        check_rounds_reach("x/y", {"overrides": {"rounds": 5}}, [{"training": {"rounds": 9}}])
    assert "\n" not in str(e.value)
