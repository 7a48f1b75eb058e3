"""Method -> parts: the composition order, and that methods compose (FedProx + FedPALS, FedProx +
private labels, tuning on either)."""
from fedpaper.algorithms import get_method


def names(m):
    return [type(p).__name__ for p in m.algorithm().parts]


def test_compositions():
    assert names(get_method("FedAvg")) == ["FedAvgWeights"]
    assert names(get_method("FedProx+FedPALS")) == ["Penalty", "FedPALSWeights"]
    assert names(get_method("FedProx (private)")) == ["PrivateLabels", "Penalty", "FedAvgWeights"]
    assert names(get_method("SCAFFOLD")) == ["ControlVariates", "FedAvgWeights"]
    assert names(get_method("Tuning-Pairwise (private)")) == ["PrivateLabels", "FedAvgWeights", "CentralTuning"]
    assert names(get_method("FedPALS", tuning="mse")) == ["FedPALSWeights", "CentralTuning"]
    assert names(get_method("FedAvg", mixup_alpha=0.5, pseudo_label_threshold=0.9, server_train_epochs=1)) == [
        "FedAvgWeights", "Mixup", "PseudoLabels", "ServerTraining"]


def test_objective_reads_logits_among_auxiliary_outputs():
    import torch

    from fedpaper.algorithms.base import Objective

    torch.manual_seed(0)
    logits = torch.randn(2, 5, 3)
    batch = {"x": None, "y": torch.randint(0, 3, (2, 5)), "mask": torch.ones(2, 5)}
    present = torch.ones(2, 3, dtype=torch.bool)
    obj = get_method("FedRS").algorithm().objective(("w", "b"))
    assert isinstance(obj, Objective)
    plain = obj(logits, batch, present, {}, {})
    aux = obj({"logits": logits, "features": torch.randn(2, 5, 8)}, batch, present, {}, {})
    assert all(torch.equal(a, b) for a, b in zip(plain, aux))
