"""Optimisers as data (engine.optim.OptimSpec) against torch.optim on one slot, and schedules."""
import math

import pytest
import torch

from fedpaper.engine.optim import OptimSpec
from fedpaper.errors import BadParameterError


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
def test_adam_in_pieces_is_the_whole_tensor_update_bit_for_bit(monkeypatch, consume, decay):
    """opt_step's CPU Adam on a large tensor (slot by slot, in cache-sized pieces with a ragged last
    one) gives the same bits as one pass over the whole tensor, for params, m and v, with an inactive
    slot; without `consume` the inputs are left as they were; a non-contiguous gradient takes the
    whole-tensor path."""
    from fedpaper.engine import optim

    real = optim._adam_in_pieces
    gen = torch.Generator().manual_seed(0)
    G = 3

    def fresh():
        p = {"w": torch.randn(G, 37, 11, generator=gen), "b": torch.randn(G, 5, generator=gen)}
        g = {k: torch.randn(v.shape, generator=gen) for k, v in p.items()}
        st = {"m": {k: torch.randn(v.shape, generator=gen) * 0.1 for k, v in p.items()},
              "v": {k: torch.rand(v.shape, generator=gen) * 1e-2 for k, v in p.items()}, "t": torch.tensor([3., 0., 5.])}
        return p, g, st

    def clone(d):
        return {k: clone(v) if isinstance(v, dict) else v.clone() for k, v in d.items()}

    active = torch.tensor([True, True, False])
    p, g, st = fresh()
    monkeypatch.setattr(optim, "ADAM_PIECE", 1 << 30)  # one pass over each tensor
    whole = optim.opt_step(clone(p), clone(g), clone(st), "adam", 1e-3, active, decay=decay)
    monkeypatch.setattr(optim, "ADAM_PIECE", 50)  # 407 elements per slot: 9 pieces, the last of 7
    g_in, st_in = clone(g), clone(st)
    pieces = optim.opt_step(p, g_in, st_in, "adam", 1e-3, active, decay=decay, consume=consume)
    for a, b in ((whole[0], pieces[0]), (whole[1]["m"], pieces[1]["m"]), (whole[1]["v"], pieces[1]["v"])):
        assert all(torch.equal(a[k], b[k]) for k in a)
    if not consume:
        assert all(torch.equal(g_in[k], g[k]) and torch.equal(st_in["m"][k], st["m"][k]) for k in g)
    assert not torch.equal(whole[0]["w"][0], p["w"][0]) and torch.equal(whole[0]["w"][2], p["w"][2])
    # the grouped backend's layout (linear weights stored transposed): every tensor in it takes the
    # pieces in memory order and keeps the layout; a gradient alone in it takes the whole-tensor path
    def t(x):
        return x.transpose(1, 2).contiguous().transpose(1, 2) if x.dim() == 3 else x

    calls = []
    monkeypatch.setattr(optim, "_adam_in_pieces", lambda *a: calls.append(a[-1]) or real(*a))
    for p_, st_ in ((p, st), ({k: t(v) for k, v in p.items()}, {"m": {k: t(v) for k, v in st["m"].items()},
                                                                 "v": {k: t(v) for k, v in st["v"].items()}, "t": st["t"]})):
        calls.clear()
        other = optim.opt_step(p_, {k: t(v) for k, v in g.items()}, clone(st_), "adam", 1e-3, active, decay=decay,
                               consume=consume)
        assert all(torch.equal(whole[0][k], other[0][k]) and torch.equal(whole[1]["v"][k], other[1]["v"][k]) for k in p)
        assert calls == ([] if p_ is p else [[0, 2, 1]])
        if p_ is not p:
            assert other[0]["w"].stride() == other[1]["m"]["w"].stride() == p_["w"].stride()
