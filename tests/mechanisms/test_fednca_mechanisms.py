"""FedNCA-ML's mechanisms against hand computations (Peng et al., Sec. 4.2-4.3): each LADM class
query paired with its own ETF prototype (eqs. 7-9), and the L_Neg / L_Pos weights of eq. 14 each
in its own role (eqs. 12-13 written out as loops)."""
import math

import pytest
import torch

from fedpaper.algorithms.fednca_loss import FedNCALoss
from fedpaper.blocks.nets.ladm import FedNCANet

C = 5


def _net(seed=0):
    torch.manual_seed(seed)
    net = FedNCANet(C, backbone="convnet", head="ladm", width=4, dim=16, heads=4).eval()
    with torch.no_grad():
        net.classifier.bias.copy_(torch.linspace(-0.5, 0.5, C))  # distinct biases: pairing errors show
    return net


def test_each_class_logit_is_its_own_query_scored_against_its_own_prototype():
    """logit_c = s h_c^T m_c + b_c with h_c the attention output of query m_c ALONE (eq. 7, 9)."""
    net = _net()
    x = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        out = net(x)
        z, _ = net.tokens(x)
        W, s, b = net.classifier.weight, net.classifier.scale, net.classifier.bias
        for c in range(C):
            q = W[c].view(1, 1, -1).expand(len(x), 1, -1)
            h_c, _ = net.attn(q, z, z, need_weights=False)
            assert torch.allclose(out["features"][:, c], h_c[:, 0], atol=1e-5)
            assert torch.allclose(out["logits"][:, c], s * (h_c[:, 0] @ W[c]) + b[c], atol=1e-4)


def test_permuting_the_etf_rows_permutes_the_class_outputs():
    net = _net(1)
    x = torch.randn(2, 3, 16, 16)
    perm = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        before = net(x)
        net.classifier.weight.copy_(net.classifier.weight[perm])
        net.classifier.bias.copy_(net.classifier.bias[perm])
        after = net(x)
    assert torch.allclose(after["logits"], before["logits"][:, perm], atol=1e-4)
    assert torch.allclose(after["features"], before["features"][:, perm], atol=1e-5)


def _hand_neg(pair, y, mask, tau):
    total, n = 0.0, 0
    for i in range(pair.shape[0]):
        if not mask[i]:
            continue
        n += 1
        negs = [c for c in range(C) if y[i, c] == 0]
        acc = 0.0
        for c in negs:
            inner = 0.0
            for r in range(C):
                if r == c:
                    continue
                sgm = 1 / (1 + math.exp(-float(pair[i, c, r])))
                if sgm > tau:
                    inner += math.log(1 - sgm)
            acc += inner / (C - 1)
        total += -(acc / len(negs)) if negs else 0.0
    return total / n


def _hand_pos(pair, y, mask):
    total, n = 0.0, 0
    for i in range(pair.shape[0]):
        if not mask[i]:
            continue
        n += 1
        pos = [c for c in range(C) if y[i, c] == 1]
        acc = 0.0
        for c in pos:
            row = [float(v) for v in pair[i, c]]
            lse = max(row) + math.log(sum(math.exp(v - max(row)) for v in row))
            acc += row[c] - lse
        total += -(acc / len(pos)) if pos else 0.0
    return total / n


@pytest.mark.parametrize("lam_neg,lam_pos", [(1.0, 0.0), (0.0, 1.0), (0.3, 2.0), (2.0, 0.3)])
def test_l_neg_and_l_pos_weights_each_in_their_own_role(lam_neg, lam_pos):
    g = torch.Generator().manual_seed(7)
    pair = torch.randn(6, C, C, generator=g) * 2
    y = (torch.rand(6, C, generator=g) < 0.4).float()
    y[0] = 0.0  # a row with no positive class
    y[1] = 1.0  # a row with no negative class
    mask = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    got = FedNCALoss(lam_neg, lam_pos, tau=0.3).batch_loss({"pair_logits": pair}, {"y": y, "mask": mask},
                                                           None, None, None)
    want = lam_neg * _hand_neg(pair, y, mask, 0.3) + lam_pos * _hand_pos(pair, y, mask)
    assert float(got) == pytest.approx(want, rel=1e-5)


def test_etf_prototypes_stay_fixed_through_a_federated_run(cache_tmp):
    """A real smoke federated run of full FedNCA-ML (engine, aggregation, best-round selection):
    the global model's classifier (the ETF prototypes, which are also the LADM queries) equals the
    ETF the model was built with, while the rest of the model trained."""
    from fedpaper.blocks.models import build_model
    from fedpaper.papers.fednca import features as F
    from fedpaper.papers.fednca.profiles import settings
    from fedpaper.runs.executors import run_specs
    from fedpaper.runs.experiment import get_pools

    p = settings("smoke")
    p["profile"], p["seeds"], p["rounds"] = "smoke", [0], 2
    spec = F.variant_spec(p, "table5", F.ROWS["c"][0])
    [result] = run_specs([spec])
    setup = spec.build()
    cfg = setup.config
    net = F.model(spec, result, get_pools(setup.pools_key))
    fresh = build_model(cfg.model, **cfg.model_kwargs)
    assert torch.equal(net.classifier.weight, fresh.classifier.weight)
    trained_other = [k for k, v in net.state_dict().items()
                     if k != "classifier.weight" and v.is_floating_point() and not torch.equal(v, fresh.state_dict()[k])]
    assert any(k.startswith("attn.") for k in trained_other) and any(k.startswith("backbone.") for k in trained_other)
