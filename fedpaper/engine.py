"""The batched federated engine: all clients of a round, and several runs, as one computation.

Client state is a dict of stacked parameter tensors whose leading dimension is the slot
(run x participating client). Local training maps one functional SGD/Adam step over all slots
with torch.func (`functional_call`, `grad`, `vmap`); clients with different data sizes are masked
(a slot whose data is used up keeps its parameters), never looped over. Three backends compute
the per-slot gradients: "vmap" (torch.func over slots; the GPU default), "loop" (slot by slot,
torch.func.grad on one slot's parameters) and "grouped" (for CNNs built as `features` +
`classifier` from Conv2d/Linear/ReLU/MaxPool2d/Flatten/Dropout: all slots in one forward and
backward pass, convolutions as one grouped convolution in channels_last layout and linear layers as
batched matmuls). All backends compute the same client objective, `client_loss` (restricted
logits, CE or BCE, mixup, pseudo-labels, the penalties of algorithms.penalties). On a CPU, "auto"
times the candidates once per model and shape and keeps the fastest. The backends compute the
same function; they differ only by float rounding (and by which random numbers dropout draws).

CPU speed notes (benchmarks/results/engine.md): convolutions run in channels_last layout (conv
weights are stacked so that each slot's weight is a channels_last view), and on Linux/glibc the
trainer raises malloc's mmap and trim thresholds once per process, because page faults from
returning large activation buffers to the OS after every step cost up to ~40% of a step on small
CNNs (set FEDPAPER_MALLOC_TUNING=0 to keep the process's malloc settings).

Runs batched together share a method and a TrainConfig and differ in seed and partition; each
run draws its batches from its own seeded generator, so a run's result does not depend on which
other runs it was batched with (except dropout noise under vmap, drawn from the global RNG).
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from .algorithms import penalties as penalties_alg
from .algorithms import semisup
from .algorithms import server as server_alg
from .algorithms.methods import Method
from .errors import BadParameterError
from .models import build_model, classifier_param_names, has_batchnorm


# ----------------------------------------------------------------------------- data layout
@dataclass
class Pools:
    """Standardised float tensors of the training and test pools, on the device, loaded once."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int

    @classmethod
    def from_dataset(cls, ds, device="cpu") -> "Pools":
        to = dict(device=device)
        return cls(ds.standardize(ds.x_train).to(**to), ds.y_train.to(**to),
                   ds.standardize(ds.x_test).to(**to), ds.y_test.to(**to), ds.num_classes)

    @classmethod
    def from_arrays(cls, x_train, y_train, x_test, y_test, num_classes, device="cpu") -> "Pools":
        t = lambda a, dt: torch.as_tensor(a, dtype=dt, device=device)  # noqa: E731
        ydt = torch.float32 if np.ndim(y_train) == 2 else torch.int64  # multi-hot labels: BCE
        return cls(t(x_train, torch.float32), t(y_train, ydt),
                   t(x_test, torch.float32), t(y_test, ydt), num_classes)


@dataclass
class Federation:
    """One run's layout: which pool rows each client holds and what the run is evaluated on.

    client_indices index the training pool; val_indices the training pool (e.g. the FedPALS target
    partition or privlabels' 20% split); test_indices the test pool; server_indices the unlabeled
    server set (training pool, labels unused). label_marginals/target_marginal feed FedPALS.
    client_unlabeled_indices (optional) index the training pool: each client's unlabeled rows,
    trained on with pseudo-labels (Method.pseudo_label_threshold); their labels are never read.
    """

    client_indices: list
    test_indices: np.ndarray
    val_indices: np.ndarray | None = None
    server_indices: np.ndarray | None = None
    client_unlabeled_indices: list | None = None  # per client: rows whose labels are never read
    target_marginal: np.ndarray | None = None
    seed: int = 0
    label_sets: list | None = None  # default: the labels present in each client's data

    def sizes(self) -> np.ndarray:
        return np.array([len(i) for i in self.client_indices])


@dataclass(frozen=True)
class TrainConfig:
    """Training hyperparameters shared by the runs trained together (all go into cache keys)."""

    model: str
    model_kwargs: dict = field(default_factory=dict)
    optimizer: str = "sgd"
    lr: float = 0.1
    batch_size: int = 32
    local_epochs: int = 1
    rounds: int = 10
    participation: float = 1.0
    eval_every: int = 1
    eval_batch: int = 2048
    device: str = "cpu"
    backend: str = "auto"

    def spec(self) -> dict:
        d = asdict(self)
        d.pop("device"), d.pop("backend"), d.pop("eval_batch")  # do not change results
        return d

    def __hash__(self):
        return hash(repr(sorted(self.spec().items(), key=str)))


# ----------------------------------------------------------------------------- optimisers
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


def opt_step(params, grads, state, kind, lr, active, betas=(0.9, 0.999), eps=1e-8):
    """One SGD or Adam step on stacked parameters; slots with active=False are left unchanged.

    Adam matches torch.optim.Adam (bias-corrected, eps added after the square root)."""
    a = active.to(next(iter(params.values())).dtype)
    if kind == "sgd":
        return {k: p - lr * _bcast(a, p) * grads[k] for k, p in params.items()}, state
    b1, b2 = betas
    t = state["t"] + a
    new_p, m_new, v_new = {}, {}, {}
    tc = t.clamp(min=1)
    bc1, bc2 = 1 - b1 ** tc, 1 - b2 ** tc
    for k, p in params.items():
        # m = m0 + am*(1-b1)*(g - m0); v = v0 + am*(1-b2)*(g*g - v0); denom = sqrt(v)/sqrt(bc2) + eps;
        # p - am*(lr/bc1)*m/denom. Written with in-place ops on fresh temporaries (4 allocations instead
        # of 13 per tensor); every product/sum is the same float operation as in the formula, so the
        # result is bitwise the same.
        g, am, m0, v0 = grads[k], _bcast(a, p), state["m"][k], state["v"][k]
        m = torch.sub(g, m0).mul_(am * (1 - b1)).add_(m0)
        v = torch.mul(g, g).sub_(v0).mul_(am * (1 - b2)).add_(v0)
        denom = v.sqrt().div_(_bcast(bc2.sqrt(), p)).add_(eps)
        upd = torch.mul(m, am * (lr / _bcast(bc1, p))).div_(denom)
        new_p[k] = torch.sub(p, upd, out=upd)
        m_new[k], v_new[k] = m, v
    return new_p, {"m": m_new, "v": v_new, "t": t}


# ----------------------------------------------------------------------------- batching
def epoch_batches(client_rows: list, batch_size: int, rngs: list,
                  steps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-slot shuffled minibatches for one epoch, padded: rows [G, S, B] and mask [G, S, B]
    (S: enough steps for the largest slot, or `steps` when that is more).

    Slot g uses rngs[g] (its run's generator), so its order never depends on the other slots."""
    sizes = [len(r) for r in client_rows]
    steps = max(1, math.ceil(max(sizes) / batch_size), steps or 1)
    rows = np.zeros((len(client_rows), steps * batch_size), dtype=np.int64)
    mask = np.zeros_like(rows, dtype=bool)
    for g, (r, rng) in enumerate(zip(client_rows, rngs)):
        rows[g, : len(r)] = r[rng.permutation(len(r))]
        mask[g, : len(r)] = True
    shape = (len(client_rows), steps, batch_size)
    return rows.reshape(shape), mask.reshape(shape)


# ----------------------------------------------------------------------------- engine
class FederatedTrainer:
    """Trains R runs of one method at once (see the module docstring)."""

    def __init__(self, method: Method, config: TrainConfig, pools: Pools, feds: list, progress=True):
        self.method, self.cfg, self.pools, self.feds = method, config, pools, feds
        self.progress = progress
        self.device = torch.device(config.device)
        self.K = pools.num_classes
        self.R = len(feds)
        self.M = len(feds[0].client_indices)
        if any(len(f.client_indices) != self.M for f in feds):
            raise BadParameterError("runs trained together must have the same number of clients")
        self._layout = lambda t: t  # noqa: E731 - GPU: layouts as they come (not measured here)
        if self.device.type == "cpu":
            _tune_cpu_allocator()
            self._layout = _stacked_layout
        self.template = build_model(config.model, **config.model_kwargs).to(self.device)
        self.cls_w, self.cls_b = classifier_param_names(self.template)
        self.buffers = {k: v for k, v in self.template.named_buffers()}
        self.grouped = _GroupedForward.build(self.template, tuple(pools.x_train.shape[1:]))  # None: not supported
        self.calibration = None
        self.global_params, self.global_buffers = self._init_params()
        self._setup_label_info()
        self.backend = self._choose_backend()
        self.server_state = server_alg.init_server_state(method, self)
        self._check_extensions()
        self.aug_rngs = self._aug_rngs()
        self.step_log = {}

    # ---- setup
    def _init_params(self) -> tuple[dict, dict]:
        """Each run's initial model (seeded by the run's seed), stacked: params and buffers [R, ...]."""
        params, bufs = [], []
        for f in self.feds:
            torch.manual_seed(f.seed)
            net = build_model(self.cfg.model, **self.cfg.model_kwargs)
            params.append({k: v.detach().to(self.device) for k, v in net.named_parameters()})
            bufs.append({k: v.detach().to(self.device) for k, v in net.named_buffers()})
        stack = lambda d: {k: self._layout(torch.stack([x[k] for x in d])) for k in d[0]}  # noqa: E731
        return stack(params), stack(bufs)

    def _check_extensions(self):
        m = self.method
        if m.pseudo_label_threshold is not None:
            if any(f.client_unlabeled_indices is None or len(f.client_unlabeled_indices) != self.M for f in self.feds):
                raise BadParameterError("pseudo_label_threshold needs Federation.client_unlabeled_indices "
                                        "(one row list per client)")
            if self.pools.y_train.dim() == 2:
                raise BadParameterError("pseudo-labels need single-label data; these labels are multi-hot")
        if m.server_train_epochs and any(f.server_indices is None or not len(f.server_indices) for f in self.feds):
            raise BadParameterError("server_train_epochs > 0 needs labelled server rows in Federation.server_indices")

    def _aug_rngs(self) -> list:
        """Per-run generators for augmentation draws (mixup, unlabeled batches), apart from the
        batch-order generators, so that switching augmentation on does not change the batches."""
        return [np.random.default_rng([f.seed, 7919, 1]) for f in self.feds]

    def _setup_label_info(self):
        y = self.pools.y_train.cpu().numpy()
        counts = np.zeros((self.R, self.M, self.K))
        for r, f in enumerate(self.feds):
            for i, idx in enumerate(f.client_indices):
                yi = y[np.asarray(idx, dtype=np.int64)]
                counts[r, i] = yi.sum(0) if y.ndim == 2 else np.bincount(yi, minlength=self.K)
        self.counts = counts
        self.sizes = counts.sum(-1)
        present = counts > 0
        for r, f in enumerate(self.feds):
            if f.label_sets is not None:
                present[r] = False
                for i, s in enumerate(f.label_sets):
                    present[r, i, list(s)] = True
        self.present = torch.as_tensor(present, device=self.device)  # [R, M, K]

    def _choose_backend(self) -> str:
        b = self.cfg.backend
        if b not in ("auto", "vmap", "loop", "grouped"):
            raise BadParameterError(f"backend={b!r}; choose 'auto', 'vmap', 'loop' or 'grouped'")
        if has_batchnorm(self.template):
            if self.method.tuning:
                raise BadParameterError("central tuning of a BatchNorm model is not supported; use a model without BatchNorm")
            return "loop"  # BatchNorm running statistics are updated in place: not vmap-safe
        if b == "grouped" and self.grouped is None:
            raise BadParameterError(f"backend='grouped' cannot run model {self.cfg.model!r} (it needs `features` + "
                                    f"`classifier` built from {_GroupedForward.LAYERS}); use 'loop' or 'vmap'")
        if b != "auto":
            return b
        if self.device.type == "cuda":
            return "vmap"
        return _calibrate_backend(self)

    # ---- one client step (functional, for a single slot)
    def _slot_loss(self, params, buffers, batch, present, anchor, method):
        logits = functional_call(self.template, (params, buffers), (batch["x"],))
        return client_loss(logits, batch, present, params, anchor, method, (self.cls_w, self.cls_b))

    def _grads_grouped(self, params, batch, present, anchor, method):
        """Per-slot gradients ("grouped" backend): the sum over slots of `client_loss` for all slots
        in one pass, over chunks of at most ~_GROUPED_SAMPLES samples. The slots' losses are
        independent, so the gradient of their sum holds each slot's own gradient."""
        G = batch["x"].shape[0]
        chunk = max(1, _GROUPED_SAMPLES // max(1, batch["x"].shape[1]))
        grads, lsums = {k: [] for k in params}, []
        for lo in range(0, G, chunk):
            sl = slice(lo, min(G, lo + chunk))
            p = {k: v[sl].detach().requires_grad_(True) for k, v in params.items()}
            b = {k: v[sl] for k, v in batch.items()}
            loss, lsum = client_loss(self.grouped(p, b["x"]), b, present[sl], p,
                                     {k: v[sl] for k, v in anchor.items()}, method, (self.cls_w, self.cls_b))
            for k, g in zip(p, torch.autograd.grad(loss.sum(), list(p.values()))):
                grads[k].append(g)
            lsums.append(lsum)
        if len(lsums) == 1:
            return {k: g[0] for k, g in grads.items()}, lsums[0]
        return {k: torch.cat(g) for k, g in grads.items()}, torch.cat(lsums)

    def _grads(self, params, batch, present, anchor, method, buffers=None):
        """Per-slot gradients of `method`'s client loss on `batch` (a dict of [G, B, ...] tensors:
        x, y, mask and the optional entries `client_loss` reads). BatchNorm buffers (loop backend
        only) are updated in place per slot."""
        if self.backend == "grouped":
            return self._grads_grouped(params, batch, present, anchor, method)
        gfn = grad(functools.partial(self._slot_loss, method=method), has_aux=True)
        buffers = buffers or {}
        if self.backend == "vmap":
            return vmap(gfn, randomness="different")(params, buffers, batch, present, anchor)
        outs = [gfn(_fast_layout({k: v[g] for k, v in params.items()}), {k: v[g] for k, v in buffers.items()},
                    _fast_layout({k: v[g] for k, v in batch.items()}), present[g],
                    {k: v[g] for k, v in anchor.items()})
                for g in range(batch["x"].shape[0])]
        grads = {k: torch.stack([o[0][k] for o in outs]) for k in params}
        return grads, torch.stack([o[1] for o in outs])

    # ---- local training of all participating slots
    def local_train(self, rnd: int, params: dict, slots: np.ndarray, rngs: list, buffers=None):
        """The round's local training of the participating slots (rows of (run, client))."""
        m = self.method
        rows = [np.asarray(self.feds[r].client_indices[c]) for r, c in slots]
        present = self.present[slots[:, 0], slots[:, 1]]
        corr = server_alg.scaffold_correction(self, slots) if m.client == "scaffold" else None
        aug = [self.aug_rngs[r] for r in slots[:, 0]]
        unl = None if m.pseudo_label_threshold is None else self._pseudo_labelled(params, slots, buffers)
        return self.train_slots(params, rows, present, rngs, m, self.cfg.local_epochs, buffers, corr, aug, unl)

    def _pseudo_labelled(self, params, slots, buffers) -> dict:
        """Each slot's unlabeled rows with pseudo-labels from the broadcast model (semisup.pseudo_labels),
        once per round as in FedMT Alg. 1 line 9 and SemiFL: the broadcast model is fixed during the
        round, so per-batch labelling would give the same labels at a forward pass per batch and
        epoch. Eval mode (no dropout, BatchNorm running statistics). Padded to [G, N]: rows, y, keep."""
        urows = [np.asarray(self.feds[r].client_unlabeled_indices[c], dtype=np.int64) for r, c in slots]
        bufs = buffers if buffers else {k: v[slots[:, 0]] for k, v in self.global_buffers.items()}
        logits = self.predict(params, self.pools.x_train, urows, buffers=bufs)
        G, N = len(urows), max(1, max(len(u) for u in urows))
        out = {"rows": torch.zeros(G, N, dtype=torch.int64), "y": torch.zeros(G, N, dtype=torch.int64),
               "keep": torch.zeros(G, N, dtype=torch.bool)}
        for g, (u, lg) in enumerate(zip(urows, logits)):
            y_hat, keep = semisup.pseudo_labels(lg, self.method.pseudo_label_threshold)
            out["rows"][g, :len(u)], out["y"][g, :len(u)], out["keep"][g, :len(u)] = torch.as_tensor(u), y_hat, keep
        out = {k: v.to(self.device) for k, v in out.items()}
        out["sizes"] = [len(u) for u in urows]
        return out

    def _add_unlabeled(self, batch, unl, pos, valid) -> torch.Tensor:
        """Append the unlabeled batch at positions pos [G, B] (valid: real rows) to `batch`; returns
        which slots have unlabeled rows in it."""
        batch["x"] = torch.cat([batch["x"], _gather(self.pools.x_train, torch.gather(unl["rows"], 1, pos))], 1)
        batch["yu"] = torch.gather(unl["y"], 1, pos)
        batch["ukeep"] = (torch.gather(unl["keep"], 1, pos) & valid).float()
        batch["umask"] = valid.float()
        return valid.any(1)

    def train_slots(self, params, rows, present, rngs, method, epochs, buffers=None, corr=None, aug_rngs=None,
                    unlabeled=None):
        """Train G models (params [G, ...]) for `epochs` epochs over their own rows of the training
        pool with `method`'s client objective, the clients' optimiser and batch size; returns the
        new params, the start params (anchor), the steps each took and its mean training loss.
        Used for the clients' local training and for the server's own training (server_train).
        unlabeled (from _pseudo_labelled): each step also trains on a batch of the slot's
        pseudo-labelled rows (an epoch is then one pass over both, the longer one setting the steps);
        their order and mixup's draws come from aug_rngs."""
        cfg = self.cfg
        params = {k: self._layout(v) for k, v in params.items()}
        anchor = {k: v.clone() for k, v in params.items()}
        opt = opt_init(params, cfg.optimizer)
        steps_done = torch.zeros(len(rows), device=self.device)
        loss_sum = torch.zeros(len(rows), device=self.device)
        steps = None if unlabeled is None else math.ceil(max(unlabeled["sizes"]) / cfg.batch_size)
        for _ in range(epochs):
            brows, bmask = epoch_batches(rows, cfg.batch_size, rngs, steps)
            brows_t = torch.as_tensor(brows, device=self.device)
            bmask_t = torch.as_tensor(bmask, device=self.device)
            if unlabeled is not None:
                upos, umask = epoch_batches([np.arange(n) for n in unlabeled["sizes"]], cfg.batch_size, aug_rngs,
                                            brows.shape[1])
                upos, umask = torch.as_tensor(upos, device=self.device), torch.as_tensor(umask, device=self.device)
            for s in range(brows.shape[1]):
                idx, mask = brows_t[:, s], bmask_t[:, s]
                active = mask.any(1)
                batch = {"x": _gather(self.pools.x_train, idx), "y": _gather(self.pools.y_train, idx),
                         "mask": mask.float()}
                if method.mixup_alpha > 0:
                    batch.update(semisup.mixup(batch["x"], batch["y"], bmask[:, s], method.mixup_alpha, aug_rngs))
                if unlabeled is not None:
                    active = active | self._add_unlabeled(batch, unlabeled, upos[:, s], umask[:, s])
                grads, lsum = self._grads(params, batch, present, anchor, method, buffers)
                if corr is not None:
                    grads = {k: g + corr[k] for k, g in grads.items()}
                params, opt = opt_step(params, grads, opt, cfg.optimizer, cfg.lr, active)
                steps_done += active.float()
                loss_sum += lsum
        n = torch.as_tensor([len(r) for r in rows], device=self.device, dtype=torch.float32)
        train_loss = loss_sum / (n * epochs).clamp(min=1)
        return params, anchor, steps_done, train_loss

    # ---- rounds
    def run(self) -> "TrainResult":
        from tqdm.auto import tqdm

        cfg = self.cfg
        hist = []
        rngs = [np.random.default_rng([f.seed, 7919]) for f in self.feds]
        self.aug_rngs = self._aug_rngs()
        t0 = time.perf_counter()
        n_samples = 0
        bar = tqdm(range(1, cfg.rounds + 1), desc=f"{self.method.name} x{self.R}", disable=not self.progress,
                   leave=False)
        for rnd in bar:
            part = self._participants(rngs)  # [R, m']
            slots = np.array([(r, c) for r in range(self.R) for c in part[r]])
            params = {k: v[slots[:, 0]].clone() for k, v in self.global_params.items()}
            if self.method.private:
                params = server_alg.restrict_classifier(self, params, slots)
            slot_rngs = [rngs[r] for r in slots[:, 0]]
            bufs = {k: v[slots[:, 0]].clone() for k, v in self.global_buffers.items()}
            new, anchor, steps, loss = self.local_train(rnd, params, slots, slot_rngs, bufs)
            self.global_buffers = server_alg.aggregate_buffers(self, bufs, slots, part)
            n_samples += int(sum(len(self.feds[r].client_indices[c]) for r, c in slots)) * cfg.local_epochs
            self.global_params = server_alg.aggregate(self, new, anchor, steps, loss, slots, part)
            if self.method.server_train_epochs:
                self.global_params = server_alg.server_train(self, rngs)
            if self.method.tuning:
                self.global_params = server_alg.central_tuning(self, new, slots, part, rngs)
            if rnd % cfg.eval_every == 0 or rnd == cfg.rounds:
                hist.extend(self._evaluate(rnd, loss, slots))
        self.step_log = {"train_seconds": time.perf_counter() - t0, "samples": n_samples, "backend": self.backend}
        if self.calibration:
            self.step_log["calibration_samples_per_s"] = self.calibration
        return TrainResult(pd.DataFrame(hist), {k: v.detach().cpu() for k, v in self.global_params.items()},
                           self.step_log)

    def _participants(self, rngs) -> np.ndarray:
        k = max(1, int(round(self.cfg.participation * self.M)))
        if k == self.M:
            return np.tile(np.arange(self.M), (self.R, 1))
        return np.stack([np.sort(rngs[r].choice(self.M, size=k, replace=False)) for r in range(self.R)])

    # ---- evaluation of every run's global model
    def predict(self, params: dict, x_pool: torch.Tensor, rows: list, train=False, buffers=None) -> list:
        """Logits of each model (params [n, ...], buffers [n, ...] or the runs' global buffers) on
        its own rows of x_pool."""
        self.template.train(train)
        bufs = self.global_buffers if buffers is None else buffers
        fwd = lambda p, x: functional_call(self.template, (p, b), (x,))  # noqa: E731
        out = []
        for r, rr in enumerate(rows):
            p = {k: v[r] for k, v in params.items()}
            b = {k: v[r] for k, v in bufs.items()}
            rr = torch.as_tensor(np.asarray(rr), device=self.device)
            with torch.no_grad():
                out.append(torch.cat([fwd(p, x_pool[rr[i:i + self.cfg.eval_batch]])
                                      for i in range(0, len(rr), self.cfg.eval_batch)]) if len(rr) else
                           torch.zeros(0, self.K, device=self.device))
        self.template.train(True)
        return out

    def _evaluate(self, rnd, loss, slots) -> list:
        rows = []
        splits = {"test": (self.pools.x_test, self.pools.y_test, [f.test_indices for f in self.feds])}
        if all(f.val_indices is not None for f in self.feds):
            splits["val"] = (self.pools.x_train, self.pools.y_train, [f.val_indices for f in self.feds])
        results = {}
        for split, (xp, yp, idx) in splits.items():
            logits = self.predict(self.global_params, xp, idx)
            for r, (lg, ii) in enumerate(zip(logits, idx)):
                y = yp[torch.as_tensor(np.asarray(ii), device=self.device)]
                for name, value in split_metrics(y, lg, self.K).items():
                    results[(r, f"{split}_{name}")] = value
        loss_r = torch.zeros(self.R, device=self.device).index_add_(0, torch.as_tensor(slots[:, 0], device=self.device), loss)
        for r, f in enumerate(self.feds):
            row = {"run": r, "seed": f.seed, "round": rnd,
                   "train_loss": (loss_r[r] / max(1, (slots[:, 0] == r).sum())).item()}
            row.update({k: v for (rr, k), v in results.items() if rr == r})
            rows.append(row)
        return rows


# ----------------------------------------------------------------------------- the client loss
def client_loss(logits, batch, present, params, anchor, method, classifier):
    """The client objective of `method` for one slot (logits [B, K], params of the slot) or for
    stacked slots (logits [G, B, K], params [G, ...]): the per-slot loss ([] or [G]) and the
    per-slot sum of the rows' losses (reported as the training loss).

    batch: x, y (class indices [.., B] or multi-hot [.., B, K]), mask ([.., B], 1 for real rows);
    with mixup also y2 (the permuted rows' targets) and lam ([] or [G]); with pseudo-labels x has
    B + B_u rows, the last B_u unlabeled, with yu (pseudo-labels), ukeep (kept and real) and umask
    (real) [.., B_u], and the loss adds pseudo_label_weight * the FixMatch loss on them.
    The loss is the mean over real rows of CE (BCE summed over classes for multi-hot labels,
    FedNCA-ML's loss), with the client's logits restricted as the method says (`_restrict`),
    plus the method's penalties (algorithms.penalties). present: [K] or [G, K], the client's labels."""
    logits = _restrict(logits, present, method)
    if "yu" in batch:  # rows after the B labelled ones are the unlabeled batch
        logits, logits_u = logits[..., :batch["mask"].shape[-1], :], logits[..., batch["mask"].shape[-1]:, :]
    ce = _row_loss(logits, batch["y"])
    if "y2" in batch:  # mixup (Zhang et al. 2018): lambda l(y) + (1 - lambda) l(y[pi]), semisup.mixup
        lam = batch["lam"].unsqueeze(-1)
        ce = lam * ce + (1 - lam) * _row_loss(logits, batch["y2"])
    mask = batch["mask"]
    loss = (ce * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    if "yu" in batch:  # FixMatch eq. 4: kept rows' CE over the unlabeled batch size
        lu = (_row_loss(logits_u, batch["yu"]) * batch["ukeep"]).sum(-1) / batch["umask"].sum(-1).clamp(min=1)
        loss = loss + method.pseudo_label_weight * lu
    pen = penalties_alg.total(params, anchor, method, penalties_alg.PenaltyState(logits.dim() - 2, classifier))
    if pen is not None:
        loss = loss + pen
    return loss, (ce * mask).sum(-1).detach()


def _restrict(logits, present, method):
    """private: the client's softmax runs over its own label set only (privlabels Alg. 1); fedrs:
    logits of its missing classes scaled by alpha (FedRS, Li & Zhan 2021 eq. 6)."""
    if method.private:
        return torch.where(present.unsqueeze(-2), logits, torch.full_like(logits, -1e9))
    if method.client == "fedrs":
        return logits * torch.where(present, 1.0, method.fedrs_alpha).unsqueeze(-2)
    return logits


def _row_loss(logits, y):
    """Per-row loss [.., B]: cross-entropy for class indices, BCE summed over classes for multi-hot y."""
    if y.dim() == logits.dim():  # multi-label
        return F.binary_cross_entropy_with_logits(logits, y, reduction="none").sum(-1)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none").view(y.shape)


def _fast_layout(t):
    """channels_last for 4-D tensors (images, conv weights): about 3x faster convolutions on CPU."""
    if isinstance(t, dict):
        return {k: _fast_layout(v) for k, v in t.items()}
    return t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t


def _gather(pool: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """pool[idx] for an index tensor [G, B], as one index_select of whole rows (a plain memcpy
    per row; advanced indexing is several times slower on CPU)."""
    return pool.index_select(0, idx.reshape(-1)).view(*idx.shape, *pool.shape[1:])


def _stacked_layout(t: torch.Tensor) -> torch.Tensor:
    """Stacked conv weights [G, O, I, kh, kw] stored as (G, O, kh, kw, I), so that each slot's
    weight t[g] is a channels_last tensor and a [G*O, I, kh, kw] reshape (grouped backend) is a
    channels_last view; no copy when t already has this layout. Other tensors are returned as they are."""
    if t.dim() != 5:
        return t
    if t.permute(0, 1, 3, 4, 2).is_contiguous():
        return t
    return t.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


_GROUPED_SAMPLES = 640  # the grouped backend trains at most this many samples (slots x batch) per pass
# (smaller passes stay in cache: on the 2-core benchmark CPU, 256-640 was ~25% faster than 2048 for LeNet)


class _GroupedForward:
    """The forward pass of G copies of a model (stacked parameters [G, ...]) on inputs [G, B, ...].

    For models whose forward is `classifier(features(x))` with `features` one of the LAYERS below
    or an nn.Sequential of them, and `classifier` an nn.Linear (LeNet, PrivLabelsCNN, LogisticRegression). Image
    activations are kept as one [B, G*C, H, W] channels_last tensor, so slot g's channels are the
    block g*C..(g+1)*C-1: every Conv2d is one convolution with groups=G (channels_last is ~1.5-3x
    faster than the default layout on CPU), pooling and ReLU act per channel, and Flatten reorders
    to [G, B, C*H*W] in the model's own (C, H, W) order, after which Linear layers are batched
    matmuls. `build` checks the result against functional_call on a random input before use."""

    LAYERS = "Conv2d, Linear, ReLU, MaxPool2d, AvgPool2d, Flatten, Dropout, Identity"

    def __init__(self, ops):
        self.ops = ops  # [(kind, module, weight name, bias name)]

    @classmethod
    def build(cls, model: nn.Module, input_shape: tuple):
        feats, head = getattr(model, "features", None), getattr(model, "classifier", None)
        if not isinstance(feats, nn.Module) or not isinstance(head, nn.Linear) or list(model.buffers()):
            return None
        prefix = {mod: name for name, mod in model.named_modules()}
        ops = []
        for mod in [*(feats if isinstance(feats, nn.Sequential) else [feats]), head]:
            w = f"{prefix[mod]}.weight" if getattr(mod, "weight", None) is not None else None
            b = f"{prefix[mod]}.bias" if getattr(mod, "bias", None) is not None else None
            if isinstance(mod, nn.Conv2d) and mod.padding_mode == "zeros" and not isinstance(mod.padding, str):
                ops.append(("conv", mod, w, b))
            elif isinstance(mod, nn.Linear):
                ops.append(("linear", mod, w, b))
            elif isinstance(mod, nn.Flatten) and mod.start_dim == 1 and mod.end_dim == -1:
                ops.append(("flatten", mod, None, None))
            elif isinstance(mod, (nn.ReLU, nn.MaxPool2d, nn.AvgPool2d, nn.Dropout, nn.Identity)):
                ops.append(("dropout" if isinstance(mod, nn.Dropout) else "per_channel", mod, None, None))
            else:
                return None
        net = cls(ops)
        try:  # the same function as the model itself? (eval mode: no dropout)
            model.eval()
            with torch.no_grad():
                dev = next(model.parameters()).device
                params = {k: _stacked_layout(torch.stack([v, v * 0.5])) for k, v in model.named_parameters()}
                x = torch.randn(2, 3, *input_shape, device=dev)
                out = net(params, x, train=False)
                ref = torch.stack([functional_call(model, {k: v[g] for k, v in params.items()}, (x[g],))
                                   for g in range(2)])
            if out.shape != ref.shape or not torch.allclose(out, ref, rtol=1e-3, atol=1e-4):
                return None
        except Exception:  # noqa: BLE001 - any failure means: not supported, use another backend
            return None
        finally:
            model.train(True)
        return net

    def __call__(self, params: dict, x: torch.Tensor, train: bool = True) -> torch.Tensor:
        G, B = x.shape[:2]
        if x.dim() == 5:  # images [G, B, C, H, W] -> [B, G*C, H, W], channels_last
            C, H, W = x.shape[2:]
            h = x.permute(1, 3, 4, 0, 2).contiguous().view(B, H, W, G * C).permute(0, 3, 1, 2)
        else:
            h = x
        flat = x.dim() != 5
        for kind, mod, wn, bn in self.ops:
            if kind == "conv":
                w = params[wn]
                w = w.reshape(G * w.shape[1], *w.shape[2:])
                b = params[bn].reshape(-1) if bn else None
                h = F.conv2d(h, w.contiguous(memory_format=torch.channels_last), b, mod.stride, mod.padding,
                             mod.dilation, G * mod.groups)
            elif kind == "linear":
                w = params[wn].transpose(1, 2)  # [G, in, out]
                h = torch.baddbmm(params[bn].unsqueeze(1), h, w) if bn else torch.bmm(h, w)
            elif kind == "flatten":
                if not flat:  # [B, G*C, H, W] -> [G, B, C*H*W] in (C, H, W) order per slot
                    h = h.reshape(B, G, -1, *h.shape[2:]).permute(1, 0, 2, 3, 4).reshape(G, B, -1)
                else:
                    h = h.reshape(G, B, -1)
                flat = True
            elif kind == "dropout":
                h = F.dropout(h, mod.p, training=train)
            else:  # "per_channel": ReLU, Identity and pooling act on each channel alone
                h = mod(h)
        return h


_ALLOCATOR_TUNED = False


def _tune_cpu_allocator():
    """glibc only, once per process: keep freed memory in the heap (M_TRIM_THRESHOLD, and
    M_MMAP_THRESHOLD so that large activation buffers come from the heap, not fresh mmaps).
    Otherwise every training step returns its activation buffers to the OS and page-faults them
    back in, which costs up to ~40% of a step for small CNNs on CPU. The process keeps its peak
    heap instead. Results are unchanged. FEDPAPER_MALLOC_TUNING=0 disables it."""
    global _ALLOCATOR_TUNED
    if _ALLOCATOR_TUNED or os.environ.get("FEDPAPER_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return
    _ALLOCATOR_TUNED = True
    try:
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
        if not libc.mallopt(M_MMAP_THRESHOLD, 1 << 30):
            libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)  # the largest value some glibc versions accept
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
        pass


def split_metrics(y, logits, K) -> dict:
    """Single-label: accuracy and macro-F1. Multi-label (y multi-hot [N, K]): per-label accuracy,
    macro-F1 (threshold 0.5 on sigmoid) and macro-AUC over the whole split (fedpaper.metrics)."""
    if len(y) == 0:
        return {"acc": float("nan"), "f1": float("nan")}
    if y.dim() == 1:
        pred = logits.argmax(1)
        return {"acc": (pred == y).float().mean().item(), "f1": _macro_f1(y, pred, K)}
    from .metrics import multilabel_auc, multilabel_f1

    yt, sc = y.cpu().numpy(), logits.cpu().numpy()
    return {"acc": float(((sc > 0) == (yt > 0.5)).mean()),
            "f1": float(multilabel_f1(yt, sc, threshold=0.0, average="macro")),
            "auc": float(multilabel_auc(yt, sc, average="macro"))}


def _macro_f1(y, pred, K) -> float:
    """Macro-F1 over the classes present in y or pred (fedpals iWildCam metric)."""
    if len(y) == 0:
        return float("nan")
    cm = torch.bincount(y * K + pred, minlength=K * K).view(K, K).float()
    tp = cm.diag()
    denom = cm.sum(0) + cm.sum(1)
    seen = denom > 0
    return (2 * tp[seen] / denom[seen]).mean().item()


@dataclass
class TrainResult:
    """history: one row per (run, evaluated round): round, train_loss, test_acc, val_acc, test_f1..."""

    history: pd.DataFrame
    final_params: dict
    log: dict

    def best(self, by="val_acc", report="test_acc") -> pd.DataFrame:
        """Best-validation snapshot per run: the `report` metric at the round where `by` peaks
        (the earliest such round); without a validation split, the last round."""
        h = self.history
        if by not in h or h[by].isna().all():
            idx = h.groupby("run")["round"].idxmax()
        else:
            idx = h.sort_values(["run", "round"]).groupby("run")[by].idxmax()
        out = h.loc[idx, ["run", "seed", "round", report]].rename(columns={"round": "best_round"})
        return out.reset_index(drop=True)


_BACKEND_CHOICE: dict = {}


_CALIBRATION_SLOTS = 16  # calibrate on at most this many slots (per-slot cost is what is compared)


def _calibrate_backend(tr: "FederatedTrainer") -> str:
    """Time local steps of each candidate backend (vmap, loop, and grouped where the model allows)
    on this model/shape and keep the fastest: one warm-up step each, then two timed rounds with the
    backends interleaved, keeping each backend's faster round (robust to a busy machine)."""
    key = (tr.cfg.model, repr(sorted(tr.cfg.model_kwargs.items())), tr.R * tr.M, tr.cfg.batch_size,
           tr.method.client, tr.method.private, torch.get_num_threads())
    if key in _BACKEND_CHOICE:
        choice, tr.calibration = _BACKEND_CHOICE[key]
        return choice
    G, B = min(tr.R * tr.M, _CALIBRATION_SLOTS), tr.cfg.batch_size
    params = {k: _stacked_layout(v[np.zeros(G, dtype=int)].clone()) for k, v in tr.global_params.items()}
    idx = torch.randint(0, len(tr.pools.y_train), (G, B), device=tr.device)
    x, y = tr.pools.x_train[idx], tr.pools.y_train[idx]
    mask = torch.ones(G, B, device=tr.device)
    present = tr.present.reshape(-1, tr.K)[:G]
    candidates = ["vmap", "loop"] + (["grouped"] if tr.grouped is not None else [])
    timings = {b: math.inf for b in candidates}
    for rep in range(3):
        for backend in candidates:
            tr.backend = backend
            t0 = time.perf_counter()
            tr._grads(params, {"x": x, "y": y, "mask": mask}, present, params, tr.method)
            if rep:  # rep 0 is the warm-up
                timings[backend] = min(timings[backend], time.perf_counter() - t0)
    choice = min(timings, key=timings.get)
    tr.calibration = {b: round(G * B / t, 1) for b, t in timings.items()}  # samples/s of the gradient step
    _BACKEND_CHOICE[key] = (choice, tr.calibration)
    return choice


def train(method: Method, config: TrainConfig, pools: Pools, feds: list, progress=True) -> TrainResult:
    """Train len(feds) runs of `method` at once and return their per-round history."""
    return FederatedTrainer(method, config, pools, feds, progress=progress).run()
