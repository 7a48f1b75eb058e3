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
