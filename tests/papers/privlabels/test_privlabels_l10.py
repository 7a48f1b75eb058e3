"""privlabels at L = 10 (issue 26 item 6): every client holds every label, so the private and the
public setting are the same experiment. Both runs are TRAINED here (smoke size, synthetic images,
no share_L10 reuse) and must end with the same parameters and accuracies; at L = 5 the same
comparison tells the settings apart, so it can see a difference."""
import pytest

from fedpaper.driver.trainer import train
from fedpaper.runs.experiment import Execution, get_pools
from fedpaper.papers.privlabels import _settings
from fedpaper.papers.privlabels import runs


def _params_with_local_steps():
    """Smoke settings with 4 local steps per round (64 images per client, batch 16): with a single
    step FedProx's proximal term has no gradient (the step starts at the anchor)."""
    p = _settings("smoke")
    p.update(rounds=2, samples_per_client=64, share_L10=False, widths=[4, 4, 8, 8], hidden=32)
    p["stand_ins"]["cifar10"] = dict(p["stand_ins"]["cifar10"], n_train=1500)
    return p


def _trained(p, name, setting, L):
    setup = runs.run_spec(p, "cifar10", name, setting, L, seed=0).build(None, Execution(backend="loop"))
    return train(setup.method, setup.config, get_pools(setup.pools_key), [setup.federation], progress=False)


def _max_diff(a, b) -> float:
    return max(float((a.final_params[k] - b.final_params[k]).abs().max()) for k in a.final_params)


@pytest.mark.parametrize("name", ["FedProx", "FedAvg"])
def test_private_and_public_runs_at_L10_train_identically(name):
    p = _params_with_local_steps()
    priv, pub = _trained(p, name, "private", 10), _trained(p, name, "public", 10)
    assert _max_diff(priv, pub) == 0.0
    assert priv.history["test_acc"].tolist() == pub.history["test_acc"].tolist()
    assert priv.history["train_loss"].tolist() == pub.history["train_loss"].tolist()


def test_the_comparison_sees_the_private_setting_below_L10():
    p = _params_with_local_steps()
    assert _max_diff(_trained(p, "FedProx", "private", 5), _trained(p, "FedProx", "public", 5)) > 0.0


def test_private_L10_specs_carry_the_public_method_and_share_its_run():
    p = _settings("smoke")
    for name in ("FedAvg", "FedProx", "Tuning-MSE", "Tuning-Pairwise"):
        priv, pub = (runs.run_spec(p, "cifar10", name, s, 10, 0) for s in ("private", "public"))
        assert priv.method == pub.method and "PrivateLabels" not in [k for k, _ in priv.method["parts"]]
        assert priv.tags["setting"] == "private"  # the tables still list it under its setting
        p["share_L10"] = True
        assert runs.canonical(priv, p) == pub
    assert "PrivateLabels" in [k for k, _ in runs.run_spec(p, "cifar10", "FedProx", "private", 5, 0).method["parts"]]
