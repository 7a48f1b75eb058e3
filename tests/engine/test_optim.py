"""Optimisers as data (engine.optim.OptimSpec) against torch.optim on one slot, and schedules."""
import math

import pytest
import torch

from fedpaper.engine.optim import OptimSpec
from fedpaper.ground.errors import BadParameterError


@pytest.mark.parametrize("spec, ref", [
    (OptimSpec("sgd", 0.1, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
    (OptimSpec("sgd", 0.1, momentum=0.9, nesterov=True, weight_decay=5e-4),
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)),
    (OptimSpec("adam", 1e-2, weight_decay=1e-2), lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=1e-2)),
    (OptimSpec("adamw", 1e-2, weight_decay=1e-2), lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=1e-2)),
])
def test_matches_torch_optim(spec, ref):
    torch.manual_seed(0)
    w0 = torch.randn(5)
    target = torch.randn(5)
    w = w0.clone().requires_grad_(True)
    opt = ref([w])
    params = {"w": w0.clone().unsqueeze(0).repeat(2, 1)}  # slot 1 inactive at step 2
    state = spec.init(params)
    for step in range(4):
        opt.zero_grad()
        ((w - target) ** 2).sum().backward()
        opt.step()
        g = {"w": 2 * (params["w"] - target)}
        active = torch.tensor([True, step != 1])
        params, state = spec.step(params, g, state, spec.lr, active)
    torch.testing.assert_close(params["w"][0], w.detach(), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(params["w"][1], params["w"][0])  # the skipped step changes slot 1's path


def test_schedules_and_bad_values():
    s = OptimSpec("sgd", 0.2, schedule="cosine")
    assert s.lr_at(1, 10) == pytest.approx(0.2) and s.lr_at(6, 10) == pytest.approx(0.1)
    assert s.lr_at(10, 10) == pytest.approx(0.1 * (1 + math.cos(math.pi * 0.9)))
    assert OptimSpec("sgd", 0.2).lr_at(7, 10) == 0.2
    for kw in (dict(kind="lion"), dict(schedule="step"), dict(nesterov=True), dict(kind="adam", momentum=0.9)):
        with pytest.raises(BadParameterError):
            OptimSpec(**{"lr": 0.1, **kw})


@pytest.mark.parametrize("consume", [False, True])
@pytest.mark.parametrize("decay", [0.0, 1e-2])
def test_adam_is_torch_fused_adam_per_active_slot(consume, decay):
    """opt_step's Adam/AdamW: every active slot's parameters and moments are those of torch.optim.Adam
    (AdamW with decay) with fused=True on that slot alone, bit for bit, over 3 steps, for a
    channels_last conv weight (the stacked layout) and a linear weight whose gradient comes in another
    layout (transposed); an inactive slot keeps params, moments and step; without `consume` the
    inputs are left as they were."""
    from fedpaper.engine import optim
    from fedpaper.engine.grouped import stacked_layout
    torch.manual_seed(0)
    G = 3
    p0 = {"conv": stacked_layout(torch.randn(G, 4, 3, 3, 3)), "fc": torch.randn(G, 6, 5)}
    grads = [{"conv": torch.randn(G, 4, 3, 3, 3), "fc": torch.randn(G, 5, 6).transpose(1, 2)} for _ in range(3)]
    actives = [torch.tensor([True, True, True]), torch.tensor([True, False, True]), torch.tensor([True, True, False])]
    params, state = {k: v.clone() for k, v in p0.items()}, optim.opt_init(p0, "adam")
    for g, act in zip(grads, actives):
        g_in, st_in = {k: v.clone() for k, v in g.items()}, state
        kept = {k: v.clone() for k, v in params.items()}, {k: v.clone() for k, v in state["m"].items()}
        params_in = params
        params, state = optim.opt_step(params, g_in, st_in, "adam", 1e-2, act, decay=decay, consume=consume)
        assert all(torch.equal(params_in[k], kept[0][k]) for k in p0)  # out of place for the parameters
        if not consume:
            assert all(torch.equal(st_in["m"][k], kept[1][k]) and torch.equal(g_in[k], g[k]) for k in p0)
    assert params["conv"].stride() == p0["conv"].stride()
    assert state["t"].tolist() == [3.0, 2.0, 2.0]
    for i in range(G):
        ref = {k: v[i].clone().requires_grad_(True) for k, v in p0.items()}
        opt = (torch.optim.AdamW if decay else torch.optim.Adam)(list(ref.values()), lr=1e-2, weight_decay=decay,
                                                                  fused=True)
        for g, act in zip(grads, actives):
            if act[i]:
                for k in ref:
                    ref[k].grad = torch.empty_like(ref[k]).copy_(g[k][i])  # its own layout, as autograd gives
                opt.step()
        for k in p0:
            assert torch.equal(params[k][i], ref[k].detach()), (i, k)
            assert torch.equal(state["m"][k][i], opt.state[ref[k]]["exp_avg"]), (i, k)
            assert torch.equal(state["v"][k][i], opt.state[ref[k]]["exp_avg_sq"]), (i, k)


