"""The "grouped" backend: all slots in one forward and backward pass (grouped.GroupedForward).

For CNNs built as `features` + `classifier` from Conv2d/Linear/ReLU/pooling/Flatten/Dropout (no
BatchNorm), in passes of about GROUPED_SAMPLES samples, each padded to a width whose kernels give every
slot the same bits whatever its batch-mates (safe_width). The slots' losses are independent, so the
gradient of their sum holds each slot's own gradient. Dropout draws from each slot's run generator.
"""
from __future__ import annotations

import torch

from fedpaper.ground.errors import BadParameterError
from fedpaper.engine.backends.base import Backend, ModelFacts, SlotStep
from fedpaper.engine.grouped import GROUPED_SAMPLES, GroupedForward, stacked_layout


class GroupedBackend(Backend):
    """One grouped pass per about GROUPED_SAMPLES samples (see the module docstring); runs the models
    GroupedForward.build accepts, without BatchNorm."""

    name = "grouped"

    def __init__(self, template, grouped: GroupedForward | None = None, channels_last: bool = True,
                 precision: str = "fp32", device=None):
        super().__init__(template, grouped, channels_last, precision, device)
        # skip the inactive slots whenever the forward draws no random numbers (no dropout)
        self.skip_grouped = grouped is not None and not any(op[0] == "dropout" for op in grouped.ops)

    @classmethod
    def supports(cls, facts: ModelFacts, device: torch.device, precision: str) -> bool:
        return facts.grouped_ok and not facts.batchnorm

    @classmethod
    def fallback(cls, facts: ModelFacts, device: torch.device, precision: str) -> tuple:
        """A BatchNorm model trains with "loop" (the grouped forward has no BatchNorm layer); another
        model the grouped forward cannot build is an error."""
        if facts.batchnorm:
            return "loop", "batchnorm model: loop"
        raise BadParameterError(f"backend='grouped' cannot run model {facts.name!r} (it needs `features` + "
                                f"`classifier` built from {GroupedForward.LAYERS}); use 'loop' or 'vmap'")

    def __call__(self, params, batch, present, anchor, objective, buffers=None, active=None, gens=None):
        """Gradients {name: [G, ...]} and per-slot loss sums [G] on `batch` (a dict of [G, B, ...]
        tensors), as a SlotStep. gens: each slot's run generator for dropout. When the model has no
        dropout only the active slots are passed (see _grouped_active). buffers: not used."""
        if active is not None and self.skip_grouped and not bool(active.all()):
            return SlotStep(*self._grouped_active(params, batch, present, anchor, objective, gens, active))
        return SlotStep(*self._grouped(params, batch, present, anchor, objective, gens))

    def _grouped_active(self, params, batch, present, anchor, objective, gens, active):
        """_grouped on the active slots only; the others get zero gradients and a zero loss sum
        (NaN where their parameters are not finite, as their masked rows' sum would be).

        Clients of unequal size finish their local epochs at different steps, and every slot of an
        engine call is padded to the largest one: the finished slots' passes would be wasted (much
        of a FedPALS paper-profile run's compute, whose clients' sizes differ widely). Skipping them changes no bit of the active slots'
        gradients (each slot's are the same whatever its group mates: safe_width), and an inactive
        slot does not step (optim: its parameters and state are kept) whatever its gradient, so a
        run's numbers are unchanged except where a finished slot's masked rows would have given a
        non-finite gradient, which the old pass turned into NaN parameters through lr * 0 * NaN.
        Only without dropout: its masks are drawn per run, and a skipped slot would shift the
        draws of the run's other slots."""
        live = torch.nonzero(active).flatten()
        G = active.shape[0]
        if live.numel() == 0:
            g, l = {k: torch.zeros_like(v) for k, v in params.items()}, None
        else:
            def pick(t):  # the live slots of a per-slot tensor (every batch entry is [G, ...])
                return t.index_select(0, live) if torch.is_tensor(t) and t.dim() and t.shape[0] == G else t
            g_live, l_live = self._grouped({k: pick(v) for k, v in params.items()},
                                           {k: pick(v) for k, v in batch.items()}, pick(present),
                                           {k: pick(v) for k, v in anchor.items()}, objective,
                                           None if gens is None else [gens[i] for i in live.tolist()])
            g = {k: v.new_zeros((G, *v.shape[1:])).index_copy_(0, live, v) for k, v in g_live.items()}
            l = l_live
        dtype = l.dtype if l is not None else torch.float32
        finite = torch.stack([torch.isfinite(v.reshape(G, -1)).all(1) for v in params.values()]).all(0)
        lsum = torch.where(finite, torch.zeros(G, dtype=dtype, device=active.device),
                           torch.full((G,), float("nan"), dtype=dtype, device=active.device))
        if l is not None:
            lsum = lsum.index_copy(0, live, l)
        return g, lsum

    def _grouped(self, params, batch, present, anchor, objective, gens=None):
        G = batch["x"].shape[0]
        width = pass_width(batch["x"].shape[1])
        channels = batch["x"].shape[2] if batch["x"].dim() == 5 else None  # images [G, B, C, H, W]
        grads, lsums = {k: [] for k in params}, []
        for lo in range(0, G, width):
            n = min(G, lo + width) - lo
            w = safe_width(n, channels=channels)
            # slots lo..lo+n-1 (a view), or padded to a safe width by repeating the last one
            idx = slice(lo, lo + n) if w == n else padded_slots(lo, n, channels)
            p = {k: stacked_layout(v[idx]).detach().requires_grad_(True) for k, v in params.items()}
            b = {k: v[idx] for k, v in batch.items()}
            pass_gens = None if gens is None else list(gens[lo:lo + n]) + [None] * (w - n)
            loss, lsum = objective(self.grouped(p, b["x"], gens=pass_gens), b, present[idx], p,
                                   {k: v[idx] for k, v in anchor.items()})
            for k, g in zip(p, torch.autograd.grad(loss[:n].sum(), list(p.values()))):
                grads[k].append(g[:n])
            lsums.append(lsum[:n])
        if len(lsums) == 1:
            return {k: g[0] for k, g in grads.items()}, lsums[0]
        return {k: torch.cat(g) for k, g in grads.items()}, torch.cat(lsums)



def safe_width(n: int, threads: int | None = None, channels: int | None = None) -> int:
    """The number of slots a grouped pass of n slots is padded to: at least 2 and a multiple of
    the thread count. oneDNN computes a grouped convolution's weight gradient group by group when
    every thread gets whole groups, and then a slot's gradient is the same bits whatever the other
    groups are and whichever position it holds (measured, 1 and 2 threads, fp32 and bf16:
    tests/engine/test_cpu.py); with one group (an ordinary convolution, another kernel) or with
    fewer groups than it wants to split over threads (e.g. 3, 5 or 7 groups on 2 threads) it sums
    partial gradients in another order, and a run's numbers would depend on its group mates.
    channels: a slot's input channels (images), where known. A pass whose first convolution sees
    exactly 3 channels in all (3 one-channel slots, one thread) is padded to the next width: oneDNN's
    AVX2 kernels treat a 3-channel input as an image's first layer (another kernel, another summation
    order; measured with ONEDNN_MAX_CPU_ISA=AVX2, not on AVX-512: tests/engine/test_cpu.py)."""
    t = max(1, threads or torch.get_num_threads())
    w = max(2, -(-n // t) * t)
    while channels and w * channels == 3:
        w += t
    return w


def pass_width(batch: int) -> int:
    """Slots per grouped pass: GROUPED_SAMPLES / batch, rounded up to a safe width (safe_width)."""
    return safe_width(max(1, GROUPED_SAMPLES // max(1, batch)))


def padded_slots(lo: int, n: int, channels: int | None = None) -> torch.Tensor:
    """Indices of slots lo..lo+n-1, padded to safe_width(n, channels=channels) by repeating the last
    one (whose extra copies' gradients and losses are dropped)."""
    w = safe_width(n, channels=channels)
    return torch.arange(lo, lo + w).clamp(max=lo + n - 1)
