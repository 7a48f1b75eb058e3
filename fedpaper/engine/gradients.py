"""Per-run gradients of an algorithm's own loss, computed the way the runs' backend computes
their clients' steps: what an algorithm asks the Context for (`ctx.run_grads`,
`ctx.grouped_forward`) instead of branching on the backend itself (ARCHITECTURE.md)."""
from __future__ import annotations

from typing import Callable, Optional

import torch
from torch.func import vmap

from fedpaper.engine import evaluate
from fedpaper.engine.grouped import GroupedForward
from fedpaper.engine.randomness import global_rng_from


def per_run_grads(backend: str, gfn: Callable, params: dict, args: tuple, masks: Optional[list], gens: list) -> dict:
    """Each run's gradient {name: [R, ...]} of gfn(params_r, *args_r, mask_r) (a torch.func.grad
    of the run's loss), args: tensors [R, ...]. masks None: every run uses its whole batch, one
    vmapped call with the vmap backend (dropout drawn per run), else run by run under its own
    random stream (gens[r]); a list: each run's row mask (the epoch's last, partial batch), run by run."""
    if masks is None and backend == "vmap":
        return vmap(lambda p, *a: gfn(p, *a, slice(None)), randomness="different")(params, *args)
    R = args[0].shape[0]
    masks = [slice(None)] * R if masks is None else masks
    outs = []
    for r in range(R):
        with global_rng_from(gens[r]):
            outs.append(gfn({k: v[r] for k, v in params.items()}, *(a[r] for a in args), masks[r]))
    return {k: torch.stack([o[k] for o in outs]) for k in params}


def grouped_forward(backend: str, template, input_shape: tuple) -> Optional[GroupedForward]:
    """The template's GroupedForward when the runs train with the grouped backend and batching over
    models is on (evaluate.BATCHED_OVER_MODELS, off by default), else None: then an algorithm
    takes its gradients from per_run_grads."""
    if backend != "grouped" or not evaluate.BATCHED_OVER_MODELS:
        return None
    return GroupedForward.build(template, input_shape)
