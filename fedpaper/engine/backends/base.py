"""What every backend is: an object that owns a whole local step of all slots.

A backend is built once per trainer for one model template (`Backend(template, grouped, channels_last,
precision, device)`) and answers three calls:

- `supports(facts, device, precision)` (class method): whether it can train a model with these
  facts (ModelFacts) on this device at this precision: a rule, never a timing;
- `__call__(params, batch, present, anchor, objective, buffers, active, gens)`: the slots' gradients
  of the client objective, as a SlotStep (the gradient entry, which each backend implements);
- `step(params, opt, batch, ..., optim, lr, corr, frozen)`: one local step (the gradients under the
  run's precision, the algorithm's gradient correction, the optimiser update of engine/optim.py), the
  entry the trainer's round loop calls; a backend may replace it whole (captured.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.func import functional_call

from fedpaper.ground.errors import BadParameterError
from fedpaper.engine.batchnorm import batchnorm_names, mask_batchnorm
from fedpaper.engine.evaluate import autocast
from fedpaper.engine.grouped import fast_layout


@dataclass(frozen=True)
class ModelFacts:
    """What the backend rule reads about a model: its name (for messages), whether it has BatchNorm
    layers, whether the grouped forward can run it (GroupedForward.build is not None) and its widest
    convolution's output channels."""

    name: str
    batchnorm: bool = False
    grouped_ok: bool = False
    conv_width: int = 0


class SlotStep(tuple):
    """What a backend's gradient entry returns: it unpacks as (grads, lsum), and `buffers` holds the
    slots' new BatchNorm statistics {name: [G, ...]} where the backend returns them (vmap), None where
    it updated the given buffers in place (loop) or there are none."""

    def __new__(cls, grads: dict, lsum: torch.Tensor, buffers: dict | None = None):
        step = super().__new__(cls, (grads, lsum))
        step.buffers = buffers
        return step


class Backend:
    """Per-slot gradients of `objective` (algorithms.base.Objective) for one model template, and the
    local step built on them (see the module docstring). Subclasses set `name` and implement
    `supports` and `__call__`."""

    name = ""
    #: whether this backend trains BatchNorm models slot by slot through engine/batchnorm.py's patched
    #: layers (statistics from each slot's real rows only): it then patches the template once here
    masks_batchnorm = False

    def __init__(self, template, grouped=None, channels_last: bool = True, precision: str = "fp32", device=None):
        self.template, self.grouped, self.precision = template, grouped, precision
        self.batchnorm = self.masks_batchnorm and mask_batchnorm(template) > 0
        self.bn_names = batchnorm_names(template) if self.batchnorm else {}
        self.device = torch.device(device) if device is not None else \
            next((p.device for p in template.parameters()), torch.device("cpu"))
        # a slot's layout where the backend computes slot by slot (grouped.channels_last_ok: False for
        # models that must not run channels_last convolutions)
        self.layout = fast_layout if channels_last else (lambda t: t)

    @property
    def backend(self) -> str:
        return self.name

    @classmethod
    def supports(cls, facts: ModelFacts, device: torch.device, precision: str) -> bool:
        raise NotImplementedError

    @classmethod
    def fallback(cls, facts: ModelFacts, device: torch.device, precision: str) -> tuple:
        """(backend, rule) to train with when this backend was asked for but does not support the
        model: by default none (one clear error)."""
        raise BadParameterError(f"backend={cls.name!r} cannot run model {facts.name!r} on {device.type} at "
                                f"{precision}; use 'loop' or 'vmap'")

    def __call__(self, params, batch, present, anchor, objective, buffers=None, active=None, gens=None) -> SlotStep:
        raise NotImplementedError

    def _slot_loss(self, params, buffers, batch, present, anchor, objective):
        """(loss, aux) of one slot: the template's forward on its params and buffers, then the objective."""
        outputs = functional_call(self.template, (params, buffers), (batch["x"],))
        return objective(outputs, batch, present, params, anchor)

    def _autocast(self):
        """The forward's precision (evaluate.autocast: bf16 autocast, or nothing for fp32)."""
        return autocast(self.precision, self.device)

    def grads(self, params, batch, present, anchor, objective, buffers=None, active=None, gens=None):
        """(grads, lsum) of one step under the run's precision (autocast): BatchNorm statistics that
        the backend returns (SlotStep.buffers) are stored into `buffers`, the slots' state, as the
        loop backend's in-place update; below fp32 the gradients and losses come back float32 (fp32
        master weights and optimiser state)."""
        with self._autocast():
            step = self(params, batch, present, anchor, objective, buffers, active=active, gens=gens)
        grads, lsum = step
        for k, v in (step.buffers or {}).items():
            buffers[k].copy_(v)
        if self.precision != "fp32":
            grads, lsum = {k: g.float() for k, g in grads.items()}, lsum.float()
        return grads, lsum

    def step(self, params, opt, batch, present, anchor, objective, *, optim, lr, buffers=None, active=None,
             gens=None, corr=None, frozen=()):
        """One local step of every slot: (new params, new optimiser state, per-slot loss sums [G]).
        The gradients (grads), plus the algorithm's correction `corr` {name: [G, ...]} where given
        (SCAFFOLD's control variates), then `optim` (an engine.optim.OptimSpec) at learning rate `lr`
        on the active slots; parameters named in `frozen` keep their values. The optimiser consumes
        `opt` and the gradients (OptimSpec.step consume=True): the caller must use the returned state."""
        grads, lsum = self.grads(params, batch, present, anchor, objective, buffers, active, gens)
        if corr is not None:
            grads = {k: g + corr[k] for k, g in grads.items()}
        new, opt = optim.step(params, grads, opt, lr, active, consume=True)
        return {k: (params[k] if k in frozen else v) for k, v in new.items()}, opt, lsum
