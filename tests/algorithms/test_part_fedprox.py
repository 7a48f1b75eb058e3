"""FedProx (Li et al. 2020 eq. 2): the term's gradient is mu (w - w_t); none on the classifier
with private label sets (privlabels Sec 4.1)."""
import torch

from fedpaper.algorithms import Method
from fedpaper.algorithms.fedprox import Penalty

CLS = ("classifier.weight", "classifier.bias")


def _grad(method, lead):
    torch.manual_seed(0)
    shape = (3, 4, 2) if lead else (4, 2)
    p = {"features.w": torch.randn(shape, requires_grad=True), CLS[0]: torch.randn(shape, requires_grad=True)}
    a = {k: torch.randn(shape) for k in p}
    (prox,) = [q for q in method.algorithm().parts if isinstance(q, Penalty) and q.name == "prox"]
    term = prox.penalty(p, a, lead, CLS)
    assert term.shape == ((3,) if lead else ())
    g = torch.autograd.grad(term.sum(), list(p.values()), allow_unused=True, materialize_grads=True)
    return p, a, dict(zip(p, g))


def test_gradient_is_mu_times_distance_for_one_and_stacked_slots():
    for lead in (0, 1):
        p, a, g = _grad(Method("p", client="fedprox", mu=0.3), lead)
        for k in p:
            torch.testing.assert_close(g[k], 0.3 * (p[k] - a[k]).detach())


def test_no_term_on_classifier_with_private_labels():
    p, a, g = _grad(Method("p", client="fedprox", mu=0.3, private=True), 0)
    assert torch.equal(g[CLS[0]], torch.zeros_like(g[CLS[0]]))
    torch.testing.assert_close(g["features.w"], 0.3 * (p["features.w"] - a["features.w"]).detach())
