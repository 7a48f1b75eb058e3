"""The "captured" backend: the vmap backend's whole local step, captured once as a CUDA graph and
replayed at every step of the same shapes.

The step is VmapBackend's (base.Backend.step on vmap.VmapBackend's gradients): torch.func.vmap of
torch.func.grad over the slots, BatchNorm statistics per slot carried as state
(batchnorm.returned_stats), the algorithm's correction, then the optimiser update (engine/optim.py's
SGD; Adam and AdamW as adam_step, below). Its tensors (parameters, optimiser state, batch, present,
anchor, BatchNorm buffers, active, the learning rate as a 0-d tensor, the correction) are copied into
static buffers (torch._foreach_copy_; a tensor the graph only reads is not copied again while it is
the same tensor at the same version, e.g. the anchor), the graph replays, and the new parameters,
optimiser state and loss sums are copied out (BatchNorm statistics into the caller's buffers), so
nothing the caller keeps aliases the graph's memory. One graph per shape signature (a round trained
in parts, or another slot count, captures another); the replay computes the same kernels as the
eager step on the same inputs, so the captured step equals the vmap backend's step on the same
device up to the float rounding of kernels that choose their algorithm per call (tests/test_gpu.py
states the tolerance).

Why torch.cuda.graphs and not torch.compile(mode="reduce-overhead"): the step runs functorch
transforms over a functional_call of the template whose BatchNorm layers read context variables
(batchnorm.returned_stats) and whose objective is an arbitrary algorithm's Python; compile would
trace (and may break the graph at) all of it, recompile per shape and per algorithm, and change the
kernels (fusion) and so the numbers; a CUDA graph records exactly the eager kernels, so its result is
the vmap backend's, and a step that cannot be recorded fails at capture, where it is caught.

Dropout draws from the default CUDA generator inside the graph, whose offset torch advances at every
replay, so each step gets fresh masks (tests/test_gpu.py checks it); as with the vmap backend, a
dropout model's run is then not batch-invariant. The objective must be a function of its arguments
(algorithms.base.Objective is): a tensor it closes over is read at the address it had at capture.

Adam and AdamW: engine/optim.py's step runs torch's fused Adam on the active slots it lists on the
host (torch.nonzero(...).tolist()), which a graph cannot record; the captured step runs adam_step
instead, the same update (Kingma & Ba 2015, Alg. 1; AdamW's decoupled decay, Loshchilov & Hutter
2019, Alg. 2) on every slot at once in tensor operations, an inactive slot's parameters and
moments kept by torch.where: equal to the fused step up to float rounding (tests/engine/test_captured.py
states the tolerance). SGD (plain, momentum, nesterov, weight decay) is engine/optim.py's own step.

It falls back to the eager vmap step, and says why (`fallbacks`: the rule per shape signature), where
the step cannot be captured: not on CUDA; a capture that raises (an objective that reads a tensor on
the host). `supports` is True on CUDA only, and choose_backend's "auto" does not pick it: it is
chosen when asked; "auto" can switch to it once a GPU measurement shows the replay faster than the
eager vmap step for a model.
"""
from __future__ import annotations

import weakref

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from fedpaper.engine.backends.base import ModelFacts
from fedpaper.engine.backends.vmap import VmapBackend

#: eager runs before a capture (on a side stream, as torch.cuda.graphs asks: lazy initialisation,
#: cuDNN/cuBLAS algorithm choice)
WARMUP_STEPS = 2
#: graphs kept at most (each holds its static inputs and its memory pool); the oldest goes first
MAX_GRAPHS = 8


def adam_step(params, grads, state, lr, active, betas=(0.9, 0.999), eps=1e-8, decay=0.0):
    """Adam (decay > 0: AdamW's decoupled weight decay) on stacked slots as tensor operations only
    (capturable): torch.optim.Adam's update, m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
    p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps), with t each slot's step count after
    this step; AdamW first p *= 1 - lr decay. Slots with active=False keep parameters, moments and
    step count (state as engine.optim.opt_init: m, v {name: [G, ...]}, t [G]). lr: a float or a 0-d
    tensor."""
    b1, b2 = betas
    t_old = state["t"]
    a = active.to(t_old.dtype)
    t = t_old + 1  # the step count of a slot that steps (an inactive slot's result is discarded)
    bc1, bc2_sqrt = 1 - torch.pow(b1, t), torch.sqrt(1 - torch.pow(b2, t))
    step_size = lr / bc1
    new_p, m_new, v_new = {}, {}, {}
    for k, p in params.items():
        lead = (-1, *[1] * (p.dim() - 1))  # a per-slot [G] value against a [G, ...] tensor
        keep = active.view(lead)
        g, m, v = grads[k], state["m"][k], state["v"][k]
        m2 = torch.lerp(m, g, 1 - b1)
        v2 = v * b2 + (1 - b2) * g * g
        q = p * (1 - lr * decay) if decay else p
        q = q - step_size.view(lead) * m2 / (v2.sqrt() / bc2_sqrt.view(lead) + eps)
        new_p[k], m_new[k], v_new[k] = torch.where(keep, q, p), torch.where(keep, m2, m), torch.where(keep, v2, v)
    return new_p, {"m": m_new, "v": v_new, "t": t_old + a}


class CapturedBackend(VmapBackend):
    """The vmap backend's local step as one CUDA graph per shape signature (see the module docstring)."""

    name = "captured"

    def __init__(self, template, grouped=None, channels_last: bool = True, precision: str = "fp32", device=None,
                 capture: bool | None = None):
        super().__init__(template, grouped, channels_last, precision, device)
        # capture: None = on CUDA; False = always the eager step (what the graph would capture)
        self.capture = (self.device.type == "cuda") if capture is None else capture
        # signature -> (replay, static input leaves, static outputs, objective, what each leaf last copied)
        self.graphs: dict = {}
        self.fallbacks: dict = {}   # signature (or "all") -> why the eager step runs there

    @classmethod
    def supports(cls, facts: ModelFacts, device: torch.device, precision: str) -> bool:
        return torch.device(device).type == "cuda"

    @classmethod
    def fallback(cls, facts: ModelFacts, device: torch.device, precision: str) -> tuple:
        """Not on CUDA: the vmap backend, whose step it would capture."""
        return "vmap", f"captured asked for, {torch.device(device).type}, not CUDA: vmap (the step it captures)"

    def _autocast(self):
        """bf16: autocast without its cache of cast weights (torch.cuda.graphs asks for
        cache_enabled=False under capture); the same casts, so the same numbers."""
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16, cache_enabled=False)
        return super()._autocast()

    def _eager_rule(self, optim) -> str | None:
        """Why this step cannot be captured (None: it can)."""
        if not self.capture:
            return "capture off" if self.device.type == "cuda" else f"{self.device.type}, not CUDA"
        return None

    def eager_step(self, params, opt, batch, present, anchor, objective, *, optim, lr, buffers=None, active=None,
                   gens=None, corr=None, frozen=()):
        """The step the graph captures, run eagerly: the vmap backend's step (base.Backend.step), with
        the learning rate `lr` a float or a 0-d tensor; Adam and AdamW as adam_step (every slot at
        once, no host reads) instead of engine/optim.py's fused step."""
        if optim.kind == "sgd":
            return super().step(params, opt, batch, present, anchor, objective, optim=optim, lr=lr, buffers=buffers,
                                active=active, gens=gens, corr=corr, frozen=frozen)
        grads, lsum = self.grads(params, batch, present, anchor, objective, buffers, active, gens)
        if corr is not None:
            grads = {k: g + corr[k] for k, g in grads.items()}
        if optim.kind == "adam" and optim.weight_decay:  # L2 decay, as OptimSpec.step
            grads = {k: g + optim.weight_decay * params[k] for k, g in grads.items()}
        decay = optim.weight_decay if optim.kind == "adamw" else 0.0
        new, opt = adam_step(params, grads, opt, lr, active, tuple(optim.betas), decay=decay)
        return {k: (params[k] if k in frozen else v) for k, v in new.items()}, opt, lsum

    def step(self, params, opt, batch, present, anchor, objective, *, optim, lr, buffers=None, active=None,
             gens=None, corr=None, frozen=()):
        """One local step of every slot, replayed from its CUDA graph (captured at the first step of
        its shape signature), or the eager vmap step where it cannot be captured (module docstring)."""
        rule = self._eager_rule(optim)
        if rule is not None:
            self.fallbacks.setdefault("all", rule)
            return self.eager_step(params, opt, batch, present, anchor, objective, optim=optim, lr=lr,
                                   buffers=buffers, active=active, gens=gens, corr=corr, frozen=frozen)
        if active is None:
            active = torch.ones(next(iter(params.values())).shape[0], dtype=torch.bool, device=self.device)
        lr_t = torch.full((), float(lr), dtype=torch.float32, device=self.device)
        inputs = (params, opt, batch, present, anchor, buffers or {}, active, lr_t, corr)
        leaves, spec = tree_flatten(inputs)
        sig = (str(spec), id(objective), id(optim), tuple(sorted(frozen)),
               tuple((tuple(t.shape), t.dtype, t.stride()) if torch.is_tensor(t) else repr(t) for t in leaves))
        if sig in self.fallbacks:
            return self.eager_step(params, opt, batch, present, anchor, objective, optim=optim, lr=lr,
                                   buffers=buffers, active=active, gens=gens, corr=corr, frozen=frozen)
        if sig not in self.graphs:
            try:
                if len(self.graphs) >= MAX_GRAPHS:  # the oldest signature's graph and memory go
                    self.graphs.pop(next(iter(self.graphs)))
                # the objective is kept with its graph: its id in the signature is never reused meanwhile
                self.graphs[sig] = (*self._capture(leaves, spec, objective, optim, frozen), objective,
                                    [None] * len(leaves))
            except Exception as e:  # noqa: BLE001 - a step that cannot be recorded runs eagerly
                self.fallbacks[sig] = f"capture failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                return self.eager_step(params, opt, batch, present, anchor, objective, optim=optim, lr=lr,
                                       buffers=buffers, active=active, gens=gens, corr=corr, frozen=frozen)
        replay, static, out, _, seen = self.graphs[sig]
        # copy in: every leaf but those the graph only reads and that are, unchanged, what was copied
        # last time (the same tensor at the same version: the anchor, present, the correction); the
        # BatchNorm buffers, which the graph writes, always
        first_buf = len(tree_flatten(inputs[:5])[0])
        written = range(first_buf, first_buf + len(tree_flatten(inputs[5])[0]))
        dsts, srcs = [], []
        for i, (st, t) in enumerate(zip(static, leaves)):
            last = seen[i]
            if not torch.is_tensor(t):
                continue
            if i not in written and last is not None and last[0]() is t and last[1] == t._version:
                continue
            dsts.append(st)
            srcs.append(t)
            seen[i] = None if i in written else (weakref.ref(t), t._version)
        if dsts:
            torch._foreach_copy_(dsts, srcs)
        replay()
        # copy out (fresh tensors: nothing the caller keeps aliases the graph's outputs)
        flat_out = [t for flat, _ in out for t in flat]
        fresh = [torch.empty_like(t) for t in flat_out]
        if fresh:
            torch._foreach_copy_(fresh, flat_out)
        parts, at = [], 0
        for flat, sp in out:
            parts.append(tree_unflatten(fresh[at:at + len(flat)], sp))
            at += len(flat)
        if buffers:  # BatchNorm statistics: the caller's state, as the vmap backend's copy
            static_bufs = tree_unflatten(static, spec)[5]
            torch._foreach_copy_(list(buffers.values()), [static_bufs[k] for k in buffers])
        return tuple(parts)

    def _capture(self, leaves, spec, objective, optim, frozen):
        """(replay, static input leaves, [(output leaves, spec) x 3]) of one step's signature."""
        static = [t.detach().clone() if torch.is_tensor(t) else t for t in leaves]

        def run():
            params, opt, batch, present, anchor, buffers, active, lr_t, corr = tree_unflatten(static, spec)
            return self.eager_step(params, opt, batch, present, anchor, objective, optim=optim, lr=lr_t,
                                   buffers=buffers or None, active=active, corr=corr, frozen=frozen)

        replay, result = self._record(run)
        return replay, static, [tree_flatten(part) for part in result]

    def _record(self, run):
        """(replay, outputs): `run` recorded as a CUDA graph after WARMUP_STEPS eager runs on a side
        stream; replay() reruns it on the static inputs, writing the same output tensors."""
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                run()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            result = run()
        return graph.replay, result
