"""The paper profile trains SCAFFOLD at its own local learning rate (vague-5's fallback), every
other method at `lr`; the scaled-down profiles keep one rate; an override reaches it."""
import fedpaper.papers.fedpals as F
from fedpaper.outputs.pipeline import declared_jobs
from fedpaper.papers.fedpals import profiles as P
from fedpaper.papers.fedpals import runs as R

SPLIT = {"scheme": "sparsity", "C": 3}


def _lr(p, method):
    return R.base_spec(p, "cifar10", SPLIT, method=method).training["lr"]


def test_paper_profile_scaffold_lr_and_the_others():
    p = P.runs("paper")
    assert _lr(p, "SCAFFOLD") == 0.01
    assert {_lr(p, m) for m in R.TABLE1_METHODS if m != "SCAFFOLD"} == {0.1}
    assert any("SCAFFOLD local lr 0.01" in n for n in P.notes("paper"))


def test_scaled_down_profiles_keep_one_lr():
    for prof in ("smoke", "quick", "long"):
        p = P.runs(prof)
        assert {_lr(p, m) for m in R.TABLE1_METHODS} == {p["lr"]}, prof


def test_override_reaches_scaffold_lr():
    p = declared_jobs(F.table1, profile="paper", overrides={"method_lr.SCAFFOLD": 0.05})[0].params
    assert _lr(p, "SCAFFOLD") == 0.05 and _lr(p, "FedAvg") == 0.1
