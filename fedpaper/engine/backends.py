"""Per-slot gradients of a client objective, three ways, and the rule that picks one.

"vmap" maps torch.func.grad over the slots (the GPU default; BatchNorm models: each slot's running
statistics are carried as state, computed functionally and returned, batchnorm.returned_stats);
"loop" takes torch.autograd.grad slot by slot (BatchNorm models: their running statistics are
updated in place per slot, batchnorm.real_rows); "grouped" runs all
slots in one forward and backward pass (grouped.GroupedForward; CNNs built as `features` +
`classifier` from Conv2d/Linear/ReLU/pooling/Flatten/Dropout), in passes of about GROUPED_SAMPLES
samples, each padded to a width whose kernels give every slot the same bits whatever its batch-mates
(safe_width). The slots' losses are independent, so the gradient of their sum holds each slot's own
gradient. The backends compute the same function; they differ by float rounding (and by which
random numbers dropout draws), so the choice is made by a fixed rule, never by timing: a rerun of
the same spec on the same machine is bit-identical, and (loop, grouped) so is a run trained in
another group (tests/engine/test_cpu.py).
"""
from __future__ import annotations

import torch
from torch.func import functional_call, grad, vmap

from fedpaper.ground.errors import BadParameterError
from fedpaper.engine.batchnorm import batchnorm_names, input_keep, mask_batchnorm, real_rows, returned_stats, \
    slots_keep
from fedpaper.engine.grouped import GROUPED_SAMPLES, GroupedForward, fast_layout, stacked_layout
from fedpaper.engine.randomness import global_rng_from

BACKENDS = ("auto", "vmap", "loop", "grouped")


#: auto on CPU: the grouped backend for CNNs whose widest convolution has fewer output channels than
#: this (per precision), the loop backend from it on: the grouped backend is used only for the widths
#: of the privlabels CNN at which it measured at least as fast as the loop backend (one CPU thread;
#: benchmarks/bench_backends.py measures both), and it falls behind as the convolutions widen
GROUPED_MAX_CONV = {"fp32": 32, "bf16": 64}


def widest_conv(model: torch.nn.Module) -> int:
    """The most output channels of any Conv2d in `model` (0 without one)."""
    return max((m.out_channels for m in model.modules() if isinstance(m, torch.nn.Conv2d)), default=0)


def choose_backend(requested: str, device: torch.device, batchnorm: bool, grouped_ok: bool, model: str,
                   conv_width: int = 0, precision: str = "fp32") -> tuple:
    """(backend, rule): the backend to train with and the rule that chose it.

    BatchNorm models: "vmap" when asked or (auto) on CUDA, else "loop" (the grouped forward has no
    BatchNorm layer). An explicit backend is used as asked. "auto": "vmap" on CUDA; on CPU "grouped"
    where the model supports it, except for a model whose widest convolution (`conv_width`,
    widest_conv) has GROUPED_MAX_CONV[precision] output channels or more: "loop". A rule on the
    model, the device and the precision, never a timing (see the module docstring)."""
    if requested not in BACKENDS:
        raise BadParameterError(f"backend={requested!r}; choose 'auto', 'vmap', 'loop' or 'grouped'")
    if batchnorm:
        if requested in ("vmap", "loop"):
            return requested, "requested"
        if requested == "auto" and device.type == "cuda":
            return "vmap", "auto: cuda, batchnorm model -> vmap"
        return "loop", "batchnorm model: loop"
    if requested == "grouped" and not grouped_ok:
        raise BadParameterError(f"backend='grouped' cannot run model {model!r} (it needs `features` + "
                                f"`classifier` built from {GroupedForward.LAYERS}); use 'loop' or 'vmap'")
    if requested != "auto":
        return requested, "requested"
    if device.type == "cuda":
        return "vmap", "auto: cuda -> vmap"
    if not grouped_ok:
        return "loop", "auto: cpu, model not grouped-capable -> loop"
    limit = GROUPED_MAX_CONV.get(precision, GROUPED_MAX_CONV["fp32"])
    if conv_width >= limit:
        return "loop", f"auto: cpu, {precision}, widest convolution {conv_width} >= {limit} channels -> loop"
    return "grouped", "auto: cpu, grouped-capable model -> grouped"


class SlotStep(tuple):
    """What SlotGradients returns: it unpacks as (grads, lsum), and `buffers` holds the slots' new
    BatchNorm statistics {name: [G, ...]} where the backend returns them (vmap), None where it
    updated the given buffers in place (loop) or there are none."""

    def __new__(cls, grads: dict, lsum: torch.Tensor, buffers: dict | None = None):
        step = super().__new__(cls, (grads, lsum))
        step.buffers = buffers
        return step


class SlotGradients:
    """Per-slot gradients of `objective` (algorithms.base.Objective) for one model template."""

    def __init__(self, template, grouped: GroupedForward | None, backend: str, channels_last: bool = True):
        self.template, self.grouped, self.backend = template, grouped, backend
        # the loop backend's layout of each slot (grouped.channels_last_ok: False for models that
        # must not run channels_last convolutions)
        self.layout = fast_layout if channels_last else (lambda t: t)
        # opt-in (model attribute): the loop backend skips the slots that will not step (see __call__)
        self.skip_inactive = bool(getattr(template, "skip_inactive_slots", False))
        # the grouped backend skips them whenever its forward draws no random numbers (no dropout)
        self.skip_grouped = grouped is not None and not any(op[0] == "dropout" for op in grouped.ops)
        # BatchNorm (loop and vmap backends): statistics from each slot's real rows only (batchnorm.py)
        self.batchnorm = backend in ("loop", "vmap") and mask_batchnorm(template) > 0
        self.bn_names = batchnorm_names(template) if self.batchnorm else {}

    def _slot_loss(self, params, buffers, batch, present, anchor, objective):
        outputs = functional_call(self.template, (params, buffers), (batch["x"],))
        return objective(outputs, batch, present, params, anchor)

    def __call__(self, params, batch, present, anchor, objective, buffers=None, active=None, gens=None):
        """Gradients {name: [G, ...]} and per-slot loss sums [G] on `batch` (a dict of [G, B, ...]
        tensors: x, y, mask and the optional entries the objective reads), as a SlotStep. BatchNorm
        buffers {name: [G, ...]}: the loop backend updates them in place per slot; the vmap backend
        leaves them as they are and returns the new statistics (SlotStep.buffers: the caller stores
        them), computed as the loop backend's (batchnorm.returned_stats), an inactive slot's kept;
        without buffers it uses the template's, unchanged. active [G] bool (optional): the slots the
        optimiser will step; for a model with `skip_inactive_slots = True` the loop backend skips
        the others (zero gradients and loss): an inactive slot's step leaves its params and
        optimiser state as they are whatever its gradient, so nothing changes but the wasted passes,
        provided the forward pass draws no random numbers (dropout: skipping would shift the
        random stream of the later slots). BatchNorm models (loop backend) take their batch
        statistics from each slot's real rows only (batchnorm.py), and an inactive slot's running
        statistics are restored after its pass, so a finished client's statistics stay as they are
        (tests/reference/test_reference_batchnorm.py). gens (optional): a torch.Generator per slot, its run's
        (randomness.RunGenerators), for what the forward pass draws (dropout) in the loop and grouped
        backends; vmap draws from the global RNG. The grouped backend passes only the active slots
        when its model has no dropout (see _grouped_active)."""
        if self.backend == "grouped":
            if active is not None and self.skip_grouped and not bool(active.all()):
                return SlotStep(*self._grouped_active(params, batch, present, anchor, objective, gens, active))
            return SlotStep(*self._grouped(params, batch, present, anchor, objective, gens))
        buffers = buffers or {}
        if self.backend == "vmap":
            if self.batchnorm:
                return self._vmap_batchnorm(params, batch, present, anchor, objective, buffers, active)
            gfn = grad(lambda *a: self._slot_loss(*a, objective), has_aux=True)
            return SlotStep(*vmap(gfn, randomness="different")(params, buffers, batch, present, anchor))
        return SlotStep(*self._loop(params, batch, present, anchor, objective, buffers, active, gens))

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

    def _loop(self, params, batch, present, anchor, objective, buffers, active, gens):
        """The loop backend (see __call__): slot by slot, BatchNorm statistics updated in place."""
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
