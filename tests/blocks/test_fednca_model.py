"""FedNCA-ML model and losses (Sec. 4): the simplex-ETF Gram structure, LADM shapes and attention
rows, L_Neg / L_Pos on a hand-made example, the ETF staying fixed through federated training, the
warm-up-linear schedule and AdamW betas."""
import math

import numpy as np
import pytest
import torch

from fedpaper.algorithms.base import Algorithm, Objective
from fedpaper.algorithms.fednca_loss import FedNCALoss, negative_rejection, positive_contrast
from fedpaper.algorithms.frozen import FrozenParameters
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig
from fedpaper.engine.optim import OptimSpec
from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.nets.etf import simplex_etf
from fedpaper.blocks.nets.ladm import FedNCANet, sine_cosine_2d


@pytest.mark.parametrize("layout", ["rotated", "code"])
@pytest.mark.parametrize("C", [2, 5, 7])
def test_simplex_etf_gram_structure(layout, C):
    M = simplex_etf(16, C, layout, seed=3)
    G = M.T @ M
    norm2 = 1.0 if layout == "rotated" else 1.0 / C  # code: Frobenius-normalised
    expected = norm2 * (C / (C - 1)) * (torch.eye(C) - torch.ones(C, C) / C)  # diag norm2, off -norm2/(C-1)
    torch.testing.assert_close(G, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(M.sum(1), torch.zeros(16), atol=1e-5, rtol=0)  # columns sum to zero
    assert torch.equal(M, simplex_etf(16, C, layout, seed=3))  # same on every client


def test_etf_needs_enough_dimensions():
    with pytest.raises(BadParameterError, match="d=3"):
        simplex_etf(3, 5)


def test_positional_embedding_is_fixed_and_distinct_per_token():
    P = sine_cosine_2d(3, 4, 16)
    assert P.shape == (12, 16) and torch.equal(P, sine_cosine_2d(3, 4, 16))
    assert torch.cdist(P, P).add(torch.eye(12) * 10).min() > 1e-3  # every token gets its own code
    assert P.abs().max() <= 1.0


def _net(**kw):
    torch.manual_seed(0)
    return FedNCANet(5, backbone="convnet", width=4, dim=16, **kw)


def test_ladm_output_shapes_and_attention_rows_sum_to_one():
    net = _net()
    x = torch.randn(3, 3, 32, 32)
    out = net(x)
    assert out["logits"].shape == (3, 5) and out["features"].shape == (3, 5, 16) and out["pair_logits"].shape == (3, 5, 5)
    torch.testing.assert_close(out["logits"], torch.diagonal(out["pair_logits"], dim1=1, dim2=2))
    h, att, hw = net.ladm(x, need_weights=True)
    assert hw == (4, 4) and att.shape == (3, 4, 5, 16)  # [B, heads, C queries, S tokens]
    torch.testing.assert_close(att.sum(-1), torch.ones(3, 4, 5))
    # the logit of class c is the classifier applied to h_c: s h_c^T m_c + b_c
    w, s, b = net.classifier.weight, net.classifier.scale, net.classifier.bias
    torch.testing.assert_close(out["logits"], s * (h * w).sum(-1) + b)


def test_heads_and_fixed_parameter_names():
    x = torch.randn(2, 3, 32, 32)
    for head in ("etf", "fc", "sphere"):
        out = _net(head=head)(x)
        assert out["logits"].shape == (2, 5) and out["features"].shape == (2, 16)
    assert _net().fixed_parameters() == ("classifier.weight",)
    assert _net(queries="learnable", query_init="random").fixed_parameters() == ()
    assert _net(head="fc").fixed_parameters() == ()
    with pytest.raises(BadParameterError, match="learnable"):
        _net(query_init="random")


def test_negative_rejection_and_positive_contrast_by_hand():
    # one sample, C = 3, positives {0}; z_icr scores of feature c against prototype r
    z = torch.tensor([[[2.0, -1.0, 0.0],
                       [0.5, 1.0, -3.0],
                       [-2.0, 0.2, 0.4]]])
    y = torch.tensor([[1.0, 0.0, 0.0]])
    mask = torch.ones(1)
    sig = torch.sigmoid
    # L_Neg: negatives c = 1, 2; off-diagonal r; only s > 0.3 counts: -log(1 - s)
    def t(v):
        s = sig(torch.tensor(v))
        return float(-torch.log(1 - s)) if s > 0.3 else 0.0
    c1 = (t(0.5) + t(-3.0)) / 2   # s(0.5)=0.62 counts, s(-3)=0.047 does not
    c2 = (t(-2.0) + t(0.2)) / 2   # s(-2)=0.12 no, s(0.2)=0.55 yes
    expected_neg = (c1 + c2) / 2
    assert negative_rejection(z, y, mask, 0.3).item() == pytest.approx(expected_neg, rel=1e-6)
    # L_Pos: -log softmax over prototypes of feature 0 at r = 0
    expected_pos = -math.log(math.exp(2) / (math.exp(2) + math.exp(-1) + math.exp(0)))
    assert positive_contrast(z, y, mask).item() == pytest.approx(expected_pos, rel=1e-6)
    # a padded row (mask 0) and a row without positives add nothing
    z2 = torch.cat([z, torch.zeros(1, 3, 3) + 5]), torch.cat([y, torch.zeros(1, 3)])
    assert positive_contrast(z2[0], z2[1], torch.tensor([1.0, 1.0])).item() == pytest.approx(expected_pos / 2)
    assert negative_rejection(z2[0], z2[1], torch.tensor([1.0, 0.0]), 0.3).item() == pytest.approx(expected_neg)


def test_objective_is_mean_bce_plus_weighted_regularisers():
    net = _net()
    x = torch.randn(4, 3, 32, 32)
    y = torch.tensor([[1, 0, 0, 0, 1], [0, 1, 0, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1]], dtype=torch.float32)
    batch = {"x": x, "y": y, "mask": torch.ones(4)}
    out = net(x)
    params = dict(net.named_parameters())
    part = FedNCALoss(lam_neg=0.5, lam_pos=2.0, tau=0.3)
    loss, _ = Objective((part,))(out, batch, None, params, params)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(out["logits"], y)  # mean over rows and classes
    expected = bce + 0.5 * negative_rejection(out["pair_logits"], y, batch["mask"]) + \
        2.0 * positive_contrast(out["pair_logits"], y, batch["mask"])
    torch.testing.assert_close(loss, expected)
    with pytest.raises(BadParameterError, match="head='ladm'"):
        Objective((part,))(_net(head="etf")(x), batch, None, params, params)


def _multilabel_pools(n=48, C=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, C, generator=g) < 0.4).float()
    y[y.sum(1) == 0, 0] = 1
    x = torch.randn(n, 3, 16, 16, generator=g) + y[:, :3, None, None]
    return Pools(x[:40], y[:40], x[40:], y[40:], C)


def test_etf_weights_stay_fixed_through_federated_training():
    pools = _multilabel_pools()
    feds = [Federation([np.arange(0, 20), np.arange(20, 40)], np.arange(8), seed=0)]
    kw = dict(backbone="convnet", width=4, dim=16)
    cfg = TrainConfig("fednca_net", dict(num_classes=4, **kw), optimizer="adamw", lr=1e-2, weight_decay=0.01,
                      batch_size=8, rounds=2, lr_schedule="warmup-linear", backend="loop")
    torch.manual_seed(0)
    init = FedNCANet(4, **kw).classifier.weight.detach().clone()
    algo = Algorithm("FedNCA-ML", (FedNCALoss(1.0, 1.0), FrozenParameters(("classifier.weight",))))
    res = train(algo, cfg, pools, feds, progress=False)
    assert torch.equal(res.final_params["classifier.weight"][0], init)
    assert not torch.equal(res.final_params["attn.in_proj_weight"][0], FedNCANet(4, **kw).attn.in_proj_weight)
    # without the frozen part the same run moves the ETF: the check above can fail
    res2 = train(Algorithm("learnable", (FedNCALoss(1.0, 1.0),)), cfg, pools, feds, progress=False)
    assert not torch.equal(res2.final_params["classifier.weight"][0], init)


def test_warmup_linear_schedule_by_hand():
    spec = OptimSpec("adamw", lr=1.0, weight_decay=0.01, schedule="warmup-linear")
    # T = 20: W = 2 warm-up rounds: 0.5, 1.0, then (20 - t) / 18 for t = 2..19
    got = [spec.lr_at(r, 20) for r in range(1, 21)]
    assert got[:3] == pytest.approx([0.5, 1.0, 1.0]) and got[3] == pytest.approx(17 / 18)
    assert got[-1] == pytest.approx(1 / 18)
    assert [spec.lr_at(r, 3) for r in (1, 2, 3)] == pytest.approx([1.0, 1.0, 0.5])  # W = max(1, round(0.3))


def test_adamw_betas_reach_the_step():
    p = {"w": torch.ones(1, 2)}
    g = {"w": torch.tensor([[1.0, -2.0]])}
    act = torch.ones(1, dtype=torch.bool)
    out = {}
    for betas in ((0.9, 0.999), (0.9, 0.98)):
        spec = OptimSpec("adamw", lr=0.1, weight_decay=0.01, betas=betas)
        st = spec.init(p)
        q = p
        for _ in range(3):
            q, st = spec.step(q, g if _ < 2 else {"w": torch.tensor([[0.5, 0.5]])}, st, 0.1, act)
        ref = torch.nn.Parameter(torch.ones(2))
        opt = torch.optim.AdamW([ref], lr=0.1, weight_decay=0.01, betas=betas)
        for gi in ([1.0, -2.0], [1.0, -2.0], [0.5, 0.5]):
            ref.grad = torch.tensor(gi)
            opt.step()
        torch.testing.assert_close(q["w"][0], ref.detach())
        out[betas] = q["w"]
    assert not torch.equal(out[(0.9, 0.999)], out[(0.9, 0.98)])


def test_convnet_batchnorm_option():
    net = FedNCANet(3, backbone="convnet", head="ladm", width=4, dim=16, norm="batch")
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules()) == 4
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in FedNCANet(3, width=4, dim=16).modules())
    assert net(torch.randn(2, 3, 32, 32))["logits"].shape == (2, 3)
    with pytest.raises(BadParameterError, match="norm='group'"):
        FedNCANet(3, width=4, dim=16, norm="group")
    with pytest.raises(BadParameterError, match="convnet option"):
        FedNCANet(3, backbone="resnet18_cifar", norm="batch")


def test_etf_classifier_bias_default_and_paper_form():
    """The official code's head (the default) has a learnable per-class bias, zero at the start;
    bias=False with logit_scale=None is the paper's eq. 9, logit = h^T m_c, with no bias parameter
    at all (nothing extra to train or average)."""
    from fedpaper.blocks.nets.etf import ETFClassifier

    torch.manual_seed(0)
    h = torch.randn(5, 16)
    M = simplex_etf(16, 4)  # [d, C]
    code = ETFClassifier(16, 4)
    assert set(dict(code.named_parameters())) == {"weight", "scale", "bias"}
    assert torch.equal(code.bias.detach(), torch.zeros(4))
    torch.testing.assert_close(code.scores(h), 10.0 * h @ M)
    paper = ETFClassifier(16, 4, logit_scale=None, bias=False)
    assert set(dict(paper.named_parameters())) == {"weight"} and paper.bias is None
    torch.testing.assert_close(paper.scores(h), h @ M)
