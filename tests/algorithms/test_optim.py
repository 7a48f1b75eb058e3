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


@pytest.mark.parametrize("decay", [0.0, 1e-2])
def test_consuming_adam_in_pieces_writes_into_its_inputs_and_gives_the_same_bits(decay, monkeypatch):
    """opt_step(consume=True) on a tensor above ADAM_PIECE elements updates it slot by slot in pieces,
    in the gradient's and the old moments' buffers (no fresh stacked tensors: above glibc's mmap
    ceiling each one is page-faulted afresh; temporaries of one piece stay in cache); the numbers are
    bitwise those of the whole-tensor functional step, over several steps with an inactive slot (pieces
    that do not divide a slot's size included), and the parameters passed in are never written."""
    from fedpaper.engine import optim

    monkeypatch.setattr(optim, "ADAM_PIECE", 7)
    gen = torch.Generator().manual_seed(3)
    shapes = {"conv": (3, 4, 2, 3, 3), "fc": (3, 7, 5), "b": (3, 2)}  # "b": 6 elements, not in pieces
    p_ref = {k: torch.randn(s, generator=gen) for k, s in shapes.items()}
    p_new = {k: v.clone() for k, v in p_ref.items()}
    s_ref = {"m": {k: torch.zeros(s) for k, s in shapes.items()},
             "v": {k: torch.zeros(s) for k, s in shapes.items()}, "t": torch.zeros(3)}
    s_new = {"m": {k: v.clone() for k, v in s_ref["m"].items()}, "v": {k: v.clone() for k, v in s_ref["v"].items()},
             "t": s_ref["t"].clone()}
    for step in range(4):
        active = torch.tensor([True, step != 2, True])
        g = {k: torch.randn(s, generator=gen) for k, s in shapes.items()}
        g_new = {k: v.clone() for k, v in g.items()}
        ptrs = {k: (g_new[k].data_ptr(), s_new["m"][k].data_ptr(), s_new["v"][k].data_ptr()) for k in shapes}
        kept = {k: v.clone() for k, v in p_new.items()}
        p_ref, s_ref = optim.opt_step(p_ref, g, s_ref, "adam", 1e-2, active, decay=decay)
        out, s_new = optim.opt_step(p_new, g_new, s_new, "adam", 1e-2, active, decay=decay, consume=True)
        for k in shapes:
            assert torch.equal(out[k], p_ref[k]) and torch.equal(s_new["m"][k], s_ref["m"][k]) \
                and torch.equal(s_new["v"][k], s_ref["v"][k])
            assert torch.equal(p_new[k], kept[k])  # the parameters passed in are unchanged
            pieced = (out[k].data_ptr(), s_new["m"][k].data_ptr(), s_new["v"][k].data_ptr()) == ptrs[k]
            assert pieced == (k != "b")  # the buffers were reused exactly for the tensors above ADAM_PIECE
        p_new = out


def test_consuming_adam_falls_back_when_buffers_cannot_be_written(monkeypatch):
    """An expanded (stride-0) gradient or moments sharing memory: the whole-tensor step, same numbers."""
    from fedpaper.engine import optim

    monkeypatch.setattr(optim, "ADAM_PIECE", 4)
    p = {"w": torch.randn(4, 6)}
    g = torch.randn(6).expand(4, 6)
    fresh = lambda: {"m": {"w": torch.zeros(4, 6)}, "v": {"w": torch.zeros(4, 6)}, "t": torch.zeros(4)}  # noqa: E731
    on = torch.ones(4, dtype=torch.bool)
    ref, _ = optim.opt_step(p, {"w": g.clone()}, fresh(), "adam", 1e-2, on)
    out, _ = optim.opt_step(p, {"w": g}, fresh(), "adam", 1e-2, on, consume=True)
    assert torch.equal(out["w"], ref["w"]) and g.stride() == (0, 1)
    shared = torch.zeros(4, 6)
    out2, _ = optim.opt_step(p, {"w": g.clone()}, {"m": {"w": shared}, "v": {"w": shared}, "t": torch.zeros(4)},
                             "adam", 1e-2, on, consume=True)
    assert torch.equal(out2["w"], ref["w"])
