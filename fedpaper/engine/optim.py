"""Optimisers and learning-rate schedules as data, on stacked parameters [slot, ...].

`opt_init` / `opt_step` are the functional SGD and Adam steps every backend shares (a slot whose
`active` flag is False keeps its parameters and state). `OptimSpec` describes an optimiser as data
(kind, lr, momentum, nesterov, weight decay, schedule); its plain forms ("sgd" and "adam" without
momentum or decay, constant lr) run exactly the float operations of `opt_step`, so results made
before OptimSpec existed do not move.

* SGD with momentum/nesterov/weight decay follows torch.optim.SGD (dampening 0): g += wd p;
  b = g on the first step, else mu b + g; d = g + mu b (nesterov) or b; p -= lr d.
* Adam is torch.optim.Adam's fused kernel (L2 weight decay g += wd p); AdamW decouples it: p *= 1 - lr wd
  before the Adam step (Loshchilov & Hutter 2019, Alg. 2).
* Schedules, per round t = 0..T-1: "constant" lr; "cosine" lr/2 (1 + cos(pi t / T))
  (Loshchilov & Hutter 2017, eq. 5 with eta_min = 0, one cycle over the T rounds); "warmup-linear"
  with W = max(1, round(0.1 T)) warm-up rounds: lr (t + 1) / W for t < W, then lr (T - t) / (T - W)
  (linear decay, FedNCA-ML's official code: 10% warm-up then linear decay; applied per round here,
  not per local step).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.optim.adam import adam

from fedpaper.ground.errors import BadParameterError

OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("constant", "cosine", "warmup-linear")
WARMUP_FRACTION = 0.1  # "warmup-linear": the share of rounds spent warming up (FedNCA-ML's official code)


def opt_init(params: dict, kind: str) -> dict:
    if kind == "sgd":
        return {}
    if kind == "adam":
        return {"m": {k: torch.zeros_like(v) for k, v in params.items()},
                "v": {k: torch.zeros_like(v) for k, v in params.items()},
                "t": torch.zeros(next(iter(params.values())).shape[0], device=next(iter(params.values())).device)}
    raise BadParameterError(f"optimizer={kind!r} is not supported; choose 'sgd' or 'adam'")


def _bcast(vec: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return vec.view(-1, *([1] * (like.dim() - 1)))


def opt_step(params, grads, state, kind, lr, active, betas=(0.9, 0.999), eps=1e-8, decay=0.0, consume=False):
    """One SGD or Adam step on stacked parameters; slots with active=False are left unchanged.

    Adam is torch.optim.Adam's own fused kernel (torch.optim.adam.adam(fused=True): bias-corrected,
    eps added after the square root; Kingma & Ba 2015, Alg. 1), run on every active slot's slice of
    each stacked tensor; decay > 0 makes it AdamW's (decoupled weight decay p (1 - lr decay) before the
    Adam update; Loshchilov & Hutter 2019, Alg. 2; decoupled_weight_decay=True). One pass over each
    tensor instead of an element-wise formula of ~15 passes, so the update is several times faster
    (benchmarks/bench_adam.py measures it). The step is out of place for the
    parameters (new tensors; the caller's are kept); consume: the step takes `state` and `grads` over
    (the moments are updated in place, each gradient is released once its tensor is done), so it
    never holds more than one extra tensor's copy; the caller must not read `state` or `grads`
    afterwards (the trainer replaces the state with the returned one)."""
    a = active.to(next(iter(params.values())).dtype)
    if kind == "sgd":
        return {k: p - lr * _bcast(a, p) * grads[k] for k, p in params.items()}, state
    b1, b2 = betas
    t_old = state["t"]
    live = torch.nonzero(active).flatten().tolist()
    new_p, m_new, v_new = {}, {}, {}
    for k, p in params.items():
        p = new_p[k] = p.clone()  # keeps p's strides (dense layouts: channels_last conv weights too)
        m, v = (state["m"][k], state["v"][k]) if consume else (state["m"][k].clone(), state["v"][k].clone())
        m, v, g = (_like(p, x) for x in (m, v, grads[k]))  # the fused kernel walks memory: one layout for all
        if live:
            adam([p[i] for i in live], [g[i] for i in live], [m[i] for i in live], [v[i] for i in live], [],
                 [t_old[i].clone() for i in live], fused=True, amsgrad=False, beta1=b1, beta2=b2, lr=lr,
                 weight_decay=decay, eps=eps, maximize=False, decoupled_weight_decay=bool(decay))
        m_new[k], v_new[k] = m, v
        if consume:
            state["m"][k] = state["v"][k] = grads[k] = g = None
    return new_p, {"m": m_new, "v": v_new, "t": t_old + a}


def _like(p: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """x with p's strides (itself when it has them): torch's fused Adam reads every operand in the
    memory order of the parameter and gives wrong numbers, silently, for another layout."""
    return x if x.stride() == p.stride() else torch.empty_like(p).copy_(x)


def _sgd_momentum_step(params, grads, state, lr, active, momentum, nesterov, weight_decay):
    """torch.optim.SGD (dampening 0) on stacked slots; inactive slots keep params and buffers."""
    a = active.to(next(iter(params.values())).dtype)
    first = state["t"] == 0
    new_p, bufs = {}, {}
    for k, p in params.items():
        am = _bcast(a, p)
        g = grads[k] + weight_decay * p if weight_decay else grads[k]
        b_old = state["b"][k]
        b = torch.where(_bcast(first, p), g, momentum * b_old + g) if momentum else g
        d = g + momentum * b if nesterov else b
        new_p[k] = p - lr * am * d
        bufs[k] = torch.where(am > 0, b, b_old) if momentum else b_old
    return new_p, {"b": bufs, "t": state["t"] + a}


@dataclass(frozen=True)
class OptimSpec:
    """An optimiser and its schedule as data (see the module docstring)."""

    kind: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    schedule: str = "constant"
    betas: tuple = (0.9, 0.999)  # Adam/AdamW moment decay rates (FedNCA-ML's code: (0.9, 0.98))

    def __post_init__(self):
        if self.kind not in OPTIMIZERS:
            raise BadParameterError(f"optimizer={self.kind!r} is not supported; choose one of {OPTIMIZERS}")
        if self.schedule not in SCHEDULES:
            raise BadParameterError(f"lr_schedule={self.schedule!r} is not supported; choose one of {SCHEDULES}")
        if not (self.lr >= 0 and self.momentum >= 0 and self.weight_decay >= 0):  # lr = 0: no step (checks)
            raise BadParameterError(f"lr={self.lr}, momentum={self.momentum} and weight_decay={self.weight_decay} "
                                    f"must each be >= 0")
        if self.nesterov and not self.momentum:
            raise BadParameterError("nesterov=True needs momentum > 0")
        if self.kind != "sgd" and (self.momentum or self.nesterov):
            raise BadParameterError(f"momentum/nesterov belong to optimizer='sgd', not {self.kind!r}")

    @property
    def plain(self) -> bool:
        """No momentum and no decay: the original "sgd"/"adam" steps of opt_step."""
        return (self.kind in ("sgd", "adam") and not self.momentum and not self.weight_decay
                and tuple(self.betas) == (0.9, 0.999))

    def lr_at(self, rnd: int, rounds: int) -> float:
        """The learning rate of round `rnd` (1-based) of `rounds`."""
        if self.schedule == "constant":
            return self.lr
        if self.schedule == "warmup-linear":
            t, warm = rnd - 1, max(1, int(round(WARMUP_FRACTION * rounds)))
            return self.lr * (t + 1) / warm if t < warm else self.lr * (rounds - t) / max(1, rounds - warm)
        return 0.5 * self.lr * (1 + math.cos(math.pi * (rnd - 1) / max(1, rounds)))

    def init(self, params: dict) -> dict:
        if self.plain:
            return opt_init(params, self.kind)
        lead = next(iter(params.values()))
        t = torch.zeros(lead.shape[0], device=lead.device)
        if self.kind == "sgd":
            return {"b": {k: torch.zeros_like(v) for k, v in params.items()}, "t": t}
        return opt_init(params, "adam")

    def step(self, params, grads, state, lr, active, consume=False):
        """One step at learning rate `lr` (from lr_at) on the active slots. consume: `state` and `grads`
        are taken over by the step (Adam/AdamW: see opt_step); only when neither is read again."""
        if self.plain:
            return opt_step(params, grads, state, self.kind, lr, active, consume=consume)
        if self.kind == "sgd":
            return _sgd_momentum_step(params, grads, state, lr, active, self.momentum, self.nesterov,
                                      self.weight_decay)
        if self.kind == "adamw":
            # decoupled decay p * (1 - lr * wd * active), tensor by tensor inside the Adam step (opt_step)
            return opt_step(params, grads, state, "adam", lr, active, tuple(self.betas), decay=self.weight_decay,
                            consume=consume)
        grads = {k: g + self.weight_decay * params[k] for k, g in grads.items()}  # adam with L2 decay
        return opt_step(params, grads, state, "adam", lr, active, tuple(self.betas), consume=consume)
