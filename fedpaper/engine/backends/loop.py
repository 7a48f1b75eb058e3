"""The "loop" backend: each slot's gradients with torch.autograd.grad, slot by slot.

BatchNorm models: each slot's running statistics are updated in place (its batch statistics from its
real rows only: batchnorm.real_rows), and an inactive slot's are restored after its pass. Dropout draws
from each slot's run generator (randomness.global_rng_from), so a run gives the same bits alone and
in any group (tests/engine/test_cpu.py).
"""
from __future__ import annotations

import torch

from fedpaper.engine.backends.base import Backend, ModelFacts, SlotStep
from fedpaper.engine.batchnorm import input_keep, real_rows
from fedpaper.engine.randomness import global_rng_from


class LoopBackend(Backend):
    """Slot by slot (see the module docstring); runs every model on every device."""

    name = "loop"
    masks_batchnorm = True

    def __init__(self, template, grouped=None, channels_last: bool = True, precision: str = "fp32", device=None):
        super().__init__(template, grouped, channels_last, precision, device)
        # opt-in (model attribute): skip the slots that will not step (see __call__)
        self.skip_inactive = bool(getattr(template, "skip_inactive_slots", False))

    @classmethod
    def supports(cls, facts: ModelFacts, device: torch.device, precision: str) -> bool:
        return True

    def __call__(self, params, batch, present, anchor, objective, buffers=None, active=None, gens=None):
        """Gradients {name: [G, ...]} and per-slot loss sums [G] on `batch` (a dict of [G, B, ...]
        tensors: x, y, mask and the optional entries the objective reads), as a SlotStep. BatchNorm
        buffers {name: [G, ...]} are updated in place per slot (without buffers the template's are
        used, unchanged). active [G] bool (optional): the slots the optimiser will step; for a model
        with `skip_inactive_slots = True` the others are skipped (zero gradients and loss): an
        inactive slot's step leaves its params and optimiser state as they are whatever its
        gradient, so nothing changes but the wasted passes, provided the forward pass draws no
        random numbers (dropout: skipping would shift the random stream of the later slots).
        BatchNorm models take their batch statistics from each slot's real rows only (batchnorm.py),
        and an inactive slot's running statistics are restored after its pass, so a finished
        client's statistics stay as they are (tests/reference/test_reference_batchnorm.py). gens
        (optional): a torch.Generator per slot, its run's (randomness.RunGenerators), for what the
        forward pass draws (dropout)."""
        return SlotStep(*self._loop(params, batch, present, anchor, objective, buffers or {}, active, gens))

    def _loop(self, params, batch, present, anchor, objective, buffers, active, gens):
        gfn = self._slot_grad(objective)
        G = batch["x"].shape[0]
        skip = [not bool(a) for a in active.tolist()] if self.skip_inactive and active is not None else [False] * G
        outs = []
        for g in range(G):
            if skip[g]:
                outs.append(None)
                continue
            slot_bufs = {k: v[g] for k, v in buffers.items()}
            # a slot that will not step (its data used up) keeps its BatchNorm statistics too
            kept = {k: v.clone() for k, v in slot_bufs.items()} if self.batchnorm and active is not None \
                and not bool(active[g]) else None
            with global_rng_from(gens[g] if gens is not None else None), \
                    real_rows(input_keep(batch, g) if self.batchnorm else None):
                outs.append(gfn(self.layout({k: v[g] for k, v in params.items()}), slot_bufs,
                                self.layout({k: v[g] for k, v in batch.items()}),
                                present[g], {k: v[g] for k, v in anchor.items()}))
            if kept is not None:
                for k, v in kept.items():
                    slot_bufs[k].copy_(v)
        if any(skip):
            done = next((o for o in outs if o is not None), None)
            zero = ({k: torch.zeros_like(v[0]) for k, v in params.items()},
                    torch.zeros((), device=batch["x"].device) if done is None else torch.zeros_like(done[1]))
            outs = [zero if o is None else o for o in outs]
        grads = {k: torch.stack([o[0][k] for o in outs]) for k in params}
        return grads, torch.stack([o[1] for o in outs])

    def _slot_grad(self, objective):
        """(params, buffers, batch, present, anchor) -> (gradients, aux) of one slot: torch.func.grad's
        function, computed with torch.autograd.grad (the same kernels and bits, without functorch's
        per-operation wrapping, which makes a CPU step faster (benchmarks/micro_loop_backend.py); an
        unused parameter gets a zero gradient, as from torch.func.grad)."""
        def gfn(params, buffers, batch, present, anchor):
            with torch.enable_grad():
                p = {k: v.detach().requires_grad_(True) for k, v in params.items()}
                loss, aux = self._slot_loss(p, buffers, batch, present, anchor, objective)
                gs = torch.autograd.grad(loss, list(p.values()), allow_unused=True) if loss.requires_grad \
                    else [None] * len(p)
            return {k: torch.zeros_like(v) if g is None else g for (k, v), g in zip(p.items(), gs)}, aux
        return gfn
