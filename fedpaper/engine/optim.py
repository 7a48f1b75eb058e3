"""Optimisers and learning-rate schedules as data, on stacked parameters [slot, ...].

`opt_init` / `opt_step` are the functional SGD and Adam steps every backend shares (a slot whose
`active` flag is False keeps its parameters and state). `OptimSpec` describes an optimiser as data
(kind, lr, momentum, nesterov, weight decay, schedule); its plain forms ("sgd" and "adam" without
momentum or decay, constant lr) run exactly the float operations of `opt_step`, so results made
before OptimSpec existed do not move.

* SGD with momentum/nesterov/weight decay follows torch.optim.SGD (dampening 0): g += wd p;
  b = g on the first step, else mu b + g; d = g + mu b (nesterov) or b; p -= lr d.
* Adam follows torch.optim.Adam (L2 weight decay g += wd p); AdamW decouples it: p *= 1 - lr wd
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

from ..errors import BadParameterError

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

    Adam matches torch.optim.Adam (bias-corrected, eps added after the square root). decay (Adam
    only): AdamW's decoupled weight decay lr * decay, applied to each parameter tensor just before its
    Adam update (p * (1 - lr * decay * active)), one tensor at a time, so that a step never holds a
    decayed copy of every parameter (a whole parameter copy per slot: ~470 MB for 10 ResNet-18 slots).
    consume (Adam only): the step takes `state` and `grads` over: each tensor's old moments and gradient
    leave state["m"], state["v"] and grads (set to None) once its new moments exist, so the step never
    holds two copies of the whole optimiser state next to all gradients (three parameter copies per
    slot less at its peak; the caller must not read `state` or `grads` afterwards: the trainer replaces
    the state with the returned one). The numbers are the same."""
    a = active.to(next(iter(params.values())).dtype)
    if kind == "sgd":
        return {k: p - lr * _bcast(a, p) * grads[k] for k, p in params.items()}, state
    b1, b2 = betas
    t = state["t"] + a
    new_p, m_new, v_new = {}, {}, {}
    tc = t.clamp(min=1)
    bc1, bc2 = 1 - b1 ** tc, 1 - b2 ** tc
    for k, p in params.items():
        if decay:
            p = p * (1 - lr * decay * _bcast(a, p))
        g, am, m0, v0 = grads[k], _bcast(a, p), state["m"][k], state["v"][k]
        c1, c2, s2, s1 = am * (1 - b1), am * (1 - b2), _bcast(bc2.sqrt(), p), am * (lr / _bcast(bc1, p))
        order = _dense_order(p, g, m0, v0) if p.device.type == "cpu" and p[0].numel() > ADAM_PIECE else None
        if order is not None:
            new_p[k], m_new[k], v_new[k] = _adam_in_pieces(p, g, m0, v0, c1, c2, s2, s1, eps, consume, order)
        else:
            m_new[k], v_new[k], upd = _adam_terms(g, m0, v0, c1, c2, s2, s1, eps)
            new_p[k] = torch.sub(p, upd, out=upd)
        if consume:
            state["m"][k] = state["v"][k] = grads[k] = m0 = v0 = g = None
    return new_p, {"m": m_new, "v": v_new, "t": t}


def _adam_terms(g, m0, v0, c1, c2, s2, s1, eps):
    """(m, v, update) of opt_step's Adam, with c1 = am (1 - b1), c2 = am (1 - b2), s2 = sqrt(bc2),
    s1 = am lr / bc1: m = m0 + c1 (g - m0); v = v0 + c2 (g g - v0); update = s1 m / (sqrt(v) / s2 + eps).
    Written with in-place ops on fresh temporaries (4 allocations instead of 13 per tensor); every
    product/sum is the same float operation as in the formula, so the result is bitwise the same."""
    m = torch.sub(g, m0).mul_(c1).add_(m0)
    v = torch.mul(g, g).sub_(v0).mul_(c2).add_(v0)
    denom = v.sqrt().div_(s2).add_(eps)
    return m, v, torch.mul(m, s1).div_(denom)


#: elements of one slot's parameter tensor that opt_step's Adam updates in one piece on CPU (see _adam_in_pieces)
ADAM_PIECE = 1 << 16


def _dense_order(*ts):
    """The order of dimensions in which the tensors `ts`, of one shape, dtype and strides, lie densely
    in memory with the slot dimension outermost (e.g. the grouped backend's linear weights and their
    gradients, stored transposed); None when they differ or are not dense."""
    t = ts[0]
    if any(x.shape != t.shape or x.stride() != t.stride() or x.dtype != t.dtype for x in ts[1:]):
        return None
    order = sorted(range(t.dim()), key=lambda d: -t.stride(d))
    return order if order[0] == 0 and t.permute(order).is_contiguous() else None


def _adam_in_pieces(p, g, m0, v0, c1, c2, s2, s1, eps, consume, order):
    """opt_step's Adam update of one large stacked tensor on CPU, slot by slot in pieces of ADAM_PIECE
    elements: the same float operations (_adam_terms) on each element (bitwise the same result,
    tests/algorithms/test_optim.py), but the ~13 element-wise passes run over a piece that stays in
    the core's cache instead of over the whole tensor (the privlabels paper CNN's 3136 x 512 weight is
    6.4 MB per slot): 177 -> 74 ms for that weight of 10 slots on an Intel Xeon, one thread. The four
    tensors share one dense layout, walked in memory order (`order`, from _dense_order); the results
    keep it, as the whole-tensor update does. With `consume`, the new values overwrite g, m0 and v0
    (taken over by the step) instead of fresh tensors."""
    G = p.shape[0]
    out_p, out_m, out_v = (g, m0, v0) if consume else (torch.empty_like(p) for _ in range(3))
    P, Gr, M0, V0, OP, OM, OV = (x.permute(order).view(G, -1) for x in (p, g, m0, v0, out_p, out_m, out_v))
    C1, C2, S2, S1 = (x.reshape(G, 1) for x in (c1, c2, s2, s1))
    n = P.shape[1]
    for i in range(G):
        c1i, c2i, s2i, s1i = C1[i], C2[i], S2[i], S1[i]
        for lo in range(0, n, ADAM_PIECE):
            hi = min(n, lo + ADAM_PIECE)
            m, v, upd = _adam_terms(Gr[i, lo:hi], M0[i, lo:hi], V0[i, lo:hi], c1i, c2i, s2i, s1i, eps)
            torch.sub(P[i, lo:hi], upd, out=OP[i, lo:hi])
            OM[i, lo:hi].copy_(m)
            OV[i, lo:hi].copy_(v)
    return out_p, out_m, out_v


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
