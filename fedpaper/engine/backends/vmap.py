"""The "vmap" backend: torch.func.vmap of torch.func.grad over the slots (the CUDA default).

BatchNorm models: each slot's running statistics are carried as state, computed functionally and
returned (batchnorm.returned_stats, SlotStep.buffers), its batch statistics from its real rows only
(batchnorm.slots_keep), an inactive slot's kept. Dropout draws from the global generator
(randomness="different"): not batch-invariant for dropout models.
"""
from __future__ import annotations

import torch
from torch.func import grad, vmap

from fedpaper.engine.backends.base import Backend, ModelFacts, SlotStep
from fedpaper.engine.batchnorm import returned_stats, slots_keep


class VmapBackend(Backend):
    """All slots in one vmapped gradient call (see the module docstring); runs every model."""

    name = "vmap"
    masks_batchnorm = True

    @classmethod
    def supports(cls, facts: ModelFacts, device: torch.device, precision: str) -> bool:
        return True

    def __call__(self, params, batch, present, anchor, objective, buffers=None, active=None, gens=None):
        """Gradients {name: [G, ...]} and per-slot loss sums [G] on `batch` (a dict of [G, B, ...]
        tensors), as a SlotStep. BatchNorm buffers {name: [G, ...]} are left as they are and the new
        statistics returned (SlotStep.buffers: the caller stores them), computed as the loop
        backend's (batchnorm.returned_stats), an inactive slot's kept; without buffers the
        template's are used, unchanged. gens is not used (dropout draws from the global RNG)."""
        buffers = buffers or {}
        if self.batchnorm:
            return self._vmap_batchnorm(params, batch, present, anchor, objective, buffers, active)
        gfn = grad(lambda *a: self._slot_loss(*a, objective), has_aux=True)
        return SlotStep(*vmap(gfn, randomness="different")(params, buffers, batch, present, anchor))

    def _vmap_batchnorm(self, params, batch, present, anchor, objective, buffers, active):
        """The vmap backend for a BatchNorm model: each slot's forward under batchnorm.returned_stats
        with its own keep mask (slots_keep), its new running statistics returned as grad's aux and
        taken where the slot is active (an inactive slot keeps its own, as in the loop backend)."""
        names = self.bn_names

        def slot_loss(p, b, bt, pr, an, keep):
            with returned_stats(keep, names) as new:
                loss, lsum = self._slot_loss(p, b, bt, pr, an, objective)
            return loss, (lsum, dict(new))

        gfn = grad(slot_loss, has_aux=True)
        grads, (lsum, new) = vmap(gfn, randomness="different")(params, buffers, batch, present, anchor,
                                                               slots_keep(batch))
        if not buffers:  # the template's own statistics: nothing per slot to carry
            return SlotStep(grads, lsum)
        if active is not None:
            new = {k: torch.where(active.view(-1, *[1] * (v.dim() - 1)), v, buffers[k]) for k, v in new.items()}
        return SlotStep(grads, lsum, new)
