"""FedMT's client mechanisms against hand computations (Zhang et al. 2024, eq. 5, Algorithm 1):
each loss weight in its own role, and the confidence threshold's selected set S_fix."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fedpaper.algorithms.fedmt import FixMixClient, FixMixObjective


def _hand_ce(logits, y):
    """-log softmax(logits)[y], written out (no torch cross-entropy)."""
    z = logits.double()
    lse = torch.log(torch.exp(z - z.max(-1, keepdim=True).values).sum(-1)) + z.max(-1).values
    return lse - z.gather(-1, y.unsqueeze(-1)).squeeze(-1)


def _batch(B=4, K=6, J=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3 * B, K, generator=g) * 2
    M = torch.zeros(J, K)
    M[torch.arange(K) % J, torch.arange(K)] = 1.0  # fine class k belongs to coarse class k mod J
    batch = {"y": torch.randint(0, J, (B,), generator=g), "yfix": torch.randint(0, K, (B,), generator=g),
             "ymix": torch.randint(0, K, (B,), generator=g), "lam": torch.tensor(0.3), "Mp": M,
             "mask": torch.tensor([1.0, 1.0, 1.0, 0.0])}
    return logits, batch


def _hand_objective(logits, b, wp, l1, l2):
    """eq. (5) per row: wp R_p + l2 (L_fix + l1 L_mix), mean over the real (mask 1) rows."""
    B = b["mask"].numel()
    weak, strong, mix = logits[:B].double(), logits[B:2 * B].double(), logits[2 * B:].double()
    p = torch.softmax(weak, -1) @ b["Mp"].double().T  # projected coarse probabilities M softmax f(x)
    r_p = -torch.log(p.gather(-1, b["y"].unsqueeze(-1)).squeeze(-1))
    l_fix = _hand_ce(strong, b["yfix"])
    lam = float(b["lam"])
    l_mix = lam * _hand_ce(mix, b["yfix"]) + (1 - lam) * _hand_ce(mix, b["ymix"])
    row = wp * r_p + l2 * (l_fix + l1 * l_mix)
    return float((row * b["mask"].double()).sum() / b["mask"].sum())


@pytest.mark.parametrize("wp,l1,l2", [(1.0, 0.3, 2.5), (0.7, 4.0, 0.25), (0.0, 1.5, 1 / 16), (2.0, 0.0, 3.0)])
def test_client_loss_is_the_weighted_sum_of_eq5(wp, l1, l2):
    logits, b = _batch()
    loss, _ = FixMixObjective(wp, l1, l2)(logits, b, None, None, None)
    assert float(loss) == pytest.approx(_hand_objective(logits, b, wp, l1, l2), rel=1e-5)


def test_each_loss_weight_acts_in_its_own_role():
    """Swapping lambda1 and lambda2, or moving w_p, changes the loss as eq. (5) says (not a
    symmetric formula that happens to agree at lambda1 = lambda2)."""
    logits, b = _batch(seed=3)
    f = lambda wp, l1, l2: float(FixMixObjective(wp, l1, l2)(logits, b, None, None, None)[0])  # noqa: E731
    base = f(1.0, 0.3, 2.5)
    assert f(1.0, 2.5, 0.3) != pytest.approx(base, rel=1e-3)
    assert f(1.0, 2.5, 0.3) == pytest.approx(_hand_objective(logits, b, 1.0, 2.5, 0.3), rel=1e-5)
    # lambda1 scales L_mix alone, lambda2 scales L_fix + lambda1 L_mix, w_p scales R_p alone:
    t = FixMixObjective(1.0, 1.0, 1.0).terms(logits, b)
    m = b["mask"]
    mean = lambda v: float((v * m).sum() / m.sum())  # noqa: E731
    assert f(0.0, 0.0, 1.0) == pytest.approx(mean(t["fix"]), rel=1e-5)
    assert f(0.0, 1.0, 1.0) - f(0.0, 0.0, 1.0) == pytest.approx(mean(t["mix"]), rel=1e-4)
    assert f(1.0, 0.0, 0.0) == pytest.approx(mean(t["projected"]), rel=1e-5)
    assert f(0.0, 2.0, 3.0) == pytest.approx(3.0 * (mean(t["fix"]) + 2.0 * mean(t["mix"])), rel=1e-5)


def _ctx(conf_rows, K=4, J=2, device="cpu"):
    """A one-run, one-client context whose broadcast model gives row i the top-class softmax
    confidence conf_rows[i] (class i mod K), for prepare_round."""
    n = len(conf_rows)
    logits = torch.empty(n, K)
    for i, c in enumerate(conf_rows):  # softmax = c on class i % K, (1 - c)/(K - 1) elsewhere
        other = (1 - c) / (K - 1)
        logits[i] = torch.log(torch.full((K,), other))
        logits[i, i % K] = float(np.log(c))
    M = torch.zeros(J, K)
    M[torch.arange(K) % J, torch.arange(K)] = 1.0
    pools = SimpleNamespace(x_train=torch.zeros(n, 1, 2, 2), correspondence=M.numpy(),
                            labels={"coarse": (torch.arange(n) % J, J)})
    fed = SimpleNamespace(client_indices=[np.arange(n)], seed=0)
    ctx = SimpleNamespace(R=1, M=1, pools=pools, feds=[fed], device=device, round=1,
                          predict=lambda params, x, rows, buffers=None: [logits[torch.as_tensor(r)] for r in rows])
    return ctx, logits


@pytest.mark.parametrize("xi", [0.5, 0.7, 0.95])
def test_s_fix_is_the_rows_whose_softmax_confidence_exceeds_xi(xi):
    conf = [0.3, 0.45, 0.55, 0.69, 0.71, 0.9, 0.94, 0.96, 0.99]  # none within float error of a xi
    ctx, logits = _ctx(conf)
    part = FixMixClient(threshold=xi, estimator="estimate")
    state = {part.key: part.init_state(ctx)}
    data = part.prepare_round(ctx, state, None, np.array([[0, 0]]), None)
    got = sorted(data["fix"][0].tolist())
    want = [i for i, c in enumerate(torch.softmax(logits, -1).max(-1).values.tolist()) if c > xi]
    assert got == want and state[part.key]["n_fix"].tolist() == [len(want)]
    assert got == [i for i, c in enumerate(conf) if c > xi]
    assert len(data["mix"][0]) == len(want)  # S_mix: |S_fix| rows drawn from all local data
    # the pseudo-labels are the argmax classes of every local row
    assert data["lookup"][0].tolist() == [i % 4 for i in range(len(conf))]


def test_empty_s_fix_gives_the_client_zero_weight():
    ctx, _ = _ctx([0.3, 0.4, 0.5])
    ctx.sizes = np.array([[3, 5]])
    part = FixMixClient(threshold=0.9)
    state = {part.key: part.init_state(ctx)}
    part.prepare_round(ctx, state, None, np.array([[0, 0]]), None)
    assert state[part.key]["n_fix"].tolist() == [0]
