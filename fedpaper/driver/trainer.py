"""The batched federated trainer: all clients of a round, and several runs, as one computation.

Client state is a dict of stacked parameter tensors whose leading dimension is the slot
(run x participating client). Local training maps one functional optimiser step over all slots
(optim.OptimSpec); clients with different data sizes are masked (a slot whose data is used up keeps
its parameters), never looped over. The per-slot gradients come from one of three backends
(backends.py). The trainer knows no method by name: it calls the hooks of an
algorithms.base.Algorithm (client objective, broadcast, batch transforms, gradient correction,
aggregation, server steps, declared state, frozen parameters), giving them an algorithms.base.
Context, never itself.

CPU speed notes (measured by benchmarks/bench_engine.py): convolutions run in channels_last layout, and on
Linux/glibc the trainer raises malloc's mmap and trim thresholds once per process (cpu.py).

Runs batched together share a method and a TrainConfig and differ in seed and partition; each
run draws its batches from its own seeded generator and its dropout masks from a torch generator
of its own (randomness.py), and the grouped backend pads its passes to widths whose kernels give
every slot the same bits (backends.safe_width), so a run's result does not depend on which other
runs it was batched with (tests/engine/test_cpu.py; the loop backend computes slot by slot; vmap,
the GPU default, draws dropout from the global RNG and is not covered).
"""
from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np
import pandas as pd
import torch

from fedpaper.algorithms.base import Aggregation, Context
from fedpaper.engine import evaluate
from fedpaper.engine.backends import choose_backend, make_backend, widest_conv
from fedpaper.engine.batching import epoch_batches, gather
from fedpaper.engine.cpu import _tune_cpu_allocator, allocator_bytes, large_step, release_freed_memory
from fedpaper.engine.evaluate import autocast, predict, split_metrics
from fedpaper.engine.gradients import grouped_forward, per_run_grads
from fedpaper.engine.grouped import GroupedForward, channels_last_ok, per_slot_rule, stacked_layout
from fedpaper.engine.memory import eval_batch_that_fits, slots_of, slots_that_fit, step_memory
from fedpaper.engine.randomness import RunGenerators
from fedpaper.engine.types import Pools, TrainConfig, TrainResult
from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.models import build_model, classifier_param_names, has_batchnorm
from fedpaper.ground.progress import round_done


def as_algorithm(method):
    """The algorithms.base.Algorithm of a Method (Method.algorithm()) or of an Algorithm itself."""
    if not hasattr(method, "algorithm"):
        raise BadParameterError(f"train() needs a Method or an Algorithm, not {type(method).__name__}")
    return method.algorithm()


def device_name(device: torch.device) -> str:
    """'cpu', or 'cuda: NVIDIA H200' (the card), for a run's log and provenance."""
    device = torch.device(device)
    return f"cuda: {torch.cuda.get_device_name(device)}" if device.type == "cuda" else device.type


def check_device(pools: Pools, device: torch.device) -> None:
    """The pools must live on the device the run trains on (they move there once, when built:
    experiment.get_pools; never per batch)."""
    have = torch.device(pools.x_train.device)
    if have.type != device.type or (device.index is not None and have.index not in (None, device.index)):
        raise BadParameterError(f"the data pools are on {have} but the run trains on {device}; build the pools "
                                f"on {device} (experiment.get_pools / Pools.from_dataset(..., device={str(device)!r}))")


def _rows_from(rows: torch.Tensor, source: dict, tensors: dict) -> dict:
    """`tensors` with the leading-dimension rows where `rows` ([n] bool) is True taken from
    `source` (the same names; a name `source` lacks is kept as it is)."""
    return {k: torch.where(rows.view(-1, *[1] * (v.dim() - 1)), source[k].to(v.dtype), v) if k in source else v
            for k, v in tensors.items()}


class FederatedTrainer:
    """Trains R runs of one method at once (see the module docstring)."""

    def __init__(self, method, config: TrainConfig, pools: Pools, feds: list, progress=True):
        self.method, self.cfg, self.pools, self.feds = method, config, pools, feds
        self.algo = as_algorithm(method)
        self.progress = progress
        self.device = torch.device(config.device)
        check_device(pools, self.device)
        self.K = pools.num_classes
        # rows per evaluation pass: cfg.eval_batch, capped for large inputs (memory.eval_batch_that_fits)
        step_mem = self.step_mem = step_memory(config, tuple(pools.x_train.shape[1:]))
        self.step_log_extra = {}  # e.g. slot_chunk, when a round's clients trained in parts
        self.eval_rows = eval_batch_that_fits(step_mem, config.eval_batch)
        self.step_bytes = step_mem.activations(config.batch_size)  # saved for backward by one slot's step
        self.R = len(feds)
        self.M = len(feds[0].client_indices)
        if any(len(f.client_indices) != self.M for f in feds):
            raise BadParameterError("runs trained together must have the same number of clients")
        self._layout = lambda t: t  # noqa: E731 - GPU: layouts as they come (not measured here)
        self.template = build_model(config.model, **config.model_kwargs).to(self.device)
        self.channels_last, self.layout_rule = False, "contiguous: not a CPU"
        self.per_run = max(1, int(round(config.participation * self.M)))  # clients per run and round
        G = self.R * self.per_run
        in_parts = self.slot_chunk(G) < G
        self.alloc_bytes = allocator_bytes(self.step_bytes, step_mem.param_bytes, in_parts)
        if self.device.type == "cpu":
            _tune_cpu_allocator(in_parts)  # malloc thresholds: cpu.RAISED_THRESHOLDS, or PARTS_THRESHOLDS
            self.channels_last, self.layout_rule = channels_last_ok(self.template)
            if self.channels_last:
                self._layout = stacked_layout
        self.cls_w, self.cls_b = classifier_param_names(self.template)
        self.buffers = {k: v for k, v in self.template.named_buffers()}
        shape = tuple(pools.x_train.shape[1:])
        per_slot, self.slot_rule = per_slot_rule(shape[0] if len(shape) == 3 else 0, self.device)
        self.grouped = GroupedForward.build(self.template, shape, per_slot)  # None: not supported
        self.calibration = None  # kept for the benchmark's report: the backend is chosen by rule, not timed
        self.global_params, self.global_buffers = self._init_params()
        self._setup_label_info()
        self.backend, self.backend_rule = choose_backend(config.backend, self.device, has_batchnorm(self.template),
                                                         self.grouped is not None, config.model,
                                                         widest_conv(self.template), config.precision)
        # the backend object that owns the local step (engine/backends)
        self.local = make_backend(self.backend, self.template, self.grouped, self.channels_last, config.precision,
                                  self.device)
        # dropout masks from each run's own stream (randomness.py), so batch-mates never shift them
        self.draws = any(isinstance(m, torch.nn.modules.dropout._DropoutNd) for m in self.template.modules())
        self.run_gens = RunGenerators(self.device)
        self.optim = self.algo.optimizer or config.optim()
        self.round_lr = self.optim.lr_at(1, config.rounds)
        # round 0: before the first round (check, init_state); run() makes one Context per round
        self.ctx = Context(cfg=config, pools=pools, feds=feds, R=self.R, M=self.M, K=self.K, device=self.device,
                           counts=self.counts, sizes=self.sizes, present=self.present,
                           classifier=(self.cls_w, self.cls_b), template=self.template, buffers=self.buffers,
                           has_batchnorm=has_batchnorm(self.template), init_params=self.global_params,
                           predict=self.predict, train_slots=self.train_slots, round=0, lr=self.round_lr,
                           run_grads=functools.partial(per_run_grads, self.backend),
                           grouped_forward=lambda: grouped_forward(self.backend, self.template, shape))
        self.algo.check(self.ctx)
        self.objective = self.algo.objective((self.cls_w, self.cls_b))
        self.state = self.algo.init_state(self.ctx)
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

    def _aug_rngs(self) -> list:
        """Per-run generators for augmentation draws (mixup, unlabeled batches), apart from the
        batch-order generators, so that switching augmentation on does not change the batches."""
        return [np.random.default_rng([f.seed, 7919, 1]) for f in self.feds]

    def _setup_label_info(self):
        y = self.pools.label_space(self.algo.client_labels)[0].cpu().numpy()  # the labels clients see
        kk = self.K if self.algo.client_labels == "default" else (y.shape[1] if y.ndim == 2 else int(y.max()) + 1)
        counts = np.zeros((self.R, self.M, kk))
        for r, f in enumerate(self.feds):
            for i, idx in enumerate(f.client_indices):
                yi = y[np.asarray(idx, dtype=np.int64)]
                counts[r, i] = yi.sum(0) if y.ndim == 2 else np.bincount(yi, minlength=kk)
        self.counts = counts
        self.sizes = counts.sum(-1)
        present = counts > 0
        for r, f in enumerate(self.feds):
            if f.label_sets is not None:
                present[r] = False
                for i, s in enumerate(f.label_sets):
                    present[r, i, list(s)] = True
        self.present = torch.as_tensor(present, device=self.device)  # [R, M, K]

    def _autocast(self):
        return autocast(self.cfg.precision, self.device)

    # ---- gradients (kept as a method: tests and benchmarks call it)
    def _grads(self, params, batch, present, anchor, objective, buffers=None, active=None, gens=None):
        """Per-slot gradients of `objective` (an Objective, or a Method/Algorithm whose objective
        is taken) on `batch`: the backend's engine.backends.Backend.grads (active: the slots that
        will step; gens: each slot's run generator for dropout; BatchNorm statistics stored into
        `buffers`, the slots' state)."""
        if hasattr(objective, "algorithm"):
            objective = objective.algorithm().objective((self.cls_w, self.cls_b))
        return self.local.grads(params, batch, present, anchor, objective, buffers, active, gens)

    # ---- local training of all participating slots
    def local_train(self, rnd: int, params: dict, slots: np.ndarray, rngs: list, buffers=None):
        """The round's local training of the participating slots (rows of (run, client))."""
        rows = [np.asarray(self.feds[r].client_indices[c]) for r, c in slots]
        present = self.present[slots[:, 0], slots[:, 1]]
        corr = self.algo.grad_correction(self.ctx, self.state, slots)
        aug = [self.aug_rngs[r] for r in slots[:, 0]]
        bufs = buffers if buffers else {k: v[slots[:, 0]] for k, v in self.global_buffers.items()}
        data = self.algo.prepare_round(self.ctx, self.state, params, slots, bufs)
        rows = self.algo.round_rows(self.ctx, data, slots, rows)
        return self.train_slots(params, rows, present, rngs, self.algo, self.cfg.local_epochs, buffers, corr, aug,
                                data)

    def train_slots(self, params, rows, present, rngs, algo, epochs, buffers=None, corr=None, aug_rngs=None,
                    round_data=None):
        """Train G models (params [G, ...]) for `epochs` epochs over their own rows of the training
        pool with `algo`'s client objective and batch hooks, the clients' optimiser, this round's
        lr and the batch size; returns the new params, the start params (anchor), the steps each
        took and its mean training loss. Used for the clients' local training and for server steps
        (server training). corr: a gradient correction added to every step's gradients;
        round_data: the algorithm's prepare_round output (e.g. pseudo-labelled rows).

        Every epoch's batches are drawn first (each slot's from its run's generator, in the order
        the epochs would draw them: nothing else draws from those generators), then the slots
        train in parts of at most `slot_chunk(G)` (memory.slots_that_fit: all of them unless their
        stacked steps would exceed SLOT_BYTES, e.g. FedMT Fig. 2c's 80 ResNet-18 clients), each
        part holding its own gradients and optimiser state only while it trains. One part is the
        loop as it always was; with several, draws that runs share across their slots (augmentation,
        dropout) come in another order, so such a run's numbers differ from an unchunked one's."""
        cfg, round_data = self.cfg, round_data or {}
        objective = self.objective if algo is self.algo else algo.objective((self.cls_w, self.cls_b))
        steps = algo.min_steps(round_data, cfg.batch_size)
        gens = self.run_gens.of(rngs) if self.draws else None
        plan = [epoch_batches(rows, cfg.batch_size, rngs, steps) for _ in range(epochs)]
        G = len(rows)
        chunk = self.slot_chunk(G)
        if chunk >= G:
            return self._train_part(params, rows, plan, present, algo, objective, buffers, corr, aug_rngs, round_data,
                                    gens)
        self.step_log_extra["slot_chunk"] = chunk
        # in parts, the round holds two [G] parameter sets only: the start (`params`, which is every
        # slot's anchor: a part's anchor is a copy of its start, so the values are the same; views
        # of the global model when the call trains one run, see _slot_starts) and the new parameters,
        # filled part by part
        new, steps_done, loss = None, torch.zeros(G, device=self.device), torch.zeros(G, device=self.device)
        for idx in np.array_split(np.arange(G), -(-G // chunk)):
            t = torch.as_tensor(idx, device=self.device)
            pick = (lambda d: None if d is None else {k: v.index_select(0, t) for k, v in d.items()})  # noqa: E731
            part_bufs = pick(buffers) if buffers else buffers
            p_new, _, p_steps, p_loss = self._train_part(
                pick(params), [rows[i] for i in idx], [(b[idx], m[idx]) for b, m in plan], present.index_select(0, t),
                algo, objective, part_bufs, pick(corr), None if aug_rngs is None else [aug_rngs[i] for i in idx],
                slots_of(round_data, idx, G), None if gens is None else [gens[i] for i in idx])
            if new is None:
                new = {k: v.new_empty((G, *v.shape[1:])) for k, v in p_new.items()}
            for k, v in p_new.items():
                new[k].index_copy_(0, t, v)
            steps_done.index_copy_(0, t, p_steps)
            loss.index_copy_(0, t, p_loss)
            del p_new
            for k, v in (part_bufs or {}).items():  # BatchNorm statistics, updated in place per slot
                buffers[k].index_copy_(0, t, v)
        return new, dict(params), steps_done, loss

    def _slot_starts(self, slots: np.ndarray) -> dict:
        """Every slot's start: its run's global parameters ([G, ...]). Copies, except when the
        call trains one run whose round trains in parts (slot_chunk < G): then read-only views of
        the global model (expand: no memory; a part copies its own slots, and an in-place write to
        a view is an error, not a silent change). FedMT Fig. 2c's 80 ResNet-18 clients would
        otherwise hold 80 identical copies of the global model through the round."""
        G = len(slots)
        if self.R == 1 and self.slot_chunk(G) < G:
            return {k: v.expand(G, *v.shape[1:]) for k, v in self.global_params.items()}
        return {k: v[slots[:, 0]].clone() for k, v in self.global_params.items()}

    def slot_chunk(self, slots: int) -> int:
        """How many of `slots` clients train at once (memory.slots_that_fit, from the model's step
        memory and the spec alone: never from the machine's free memory, so a run's numbers do not
        depend on where it runs)."""
        return slots_that_fit(self.step_mem, slots, self.cfg.batch_size)

    def _train_part(self, params, rows, plan, present, algo, objective, buffers, corr, aug_rngs, round_data, gens):
        """train_slots on one part of the slots: `plan` holds each epoch's (rows, mask) batches."""
        cfg = self.cfg
        frozen = algo.frozen
        params = {k: self._layout(v) for k, v in params.items()}
        anchor = {k: v.clone() for k, v in params.items()}
        opt = self.optim.init(params)
        steps_done = torch.zeros(len(rows), device=self.device)
        loss_sum = torch.zeros(len(rows), device=self.device)
        y_pool = self.pools.label_space(algo.client_labels)[0]
        for brows, bmask in plan:
            brows_t = torch.as_tensor(brows, device=self.device)
            bmask_t = torch.as_tensor(bmask, device=self.device)
            epoch = algo.begin_epoch(round_data, brows.shape[1], aug_rngs, cfg.batch_size, self.device)
            for s in range(brows.shape[1]):
                idx, mask = brows_t[:, s], bmask_t[:, s]
                batch = {"x": gather(self.pools.x_train, idx), "y": gather(y_pool, idx), "mask": mask.float()}
                if algo.batch_rows:
                    batch["rows"] = idx
                active = algo.augment(self.ctx, batch, bmask[:, s], aug_rngs, round_data, epoch, s, mask.any(1))
                # the backend's local step: gradients, correction, optimiser update (engine.backends.Backend.step)
                params, opt, lsum = self.local.step(params, opt, batch, present, anchor, objective, optim=self.optim,
                                                    lr=self.round_lr, buffers=buffers, active=active, gens=gens,
                                                    corr=corr, frozen=frozen)
                steps_done += active.float()
                loss_sum += lsum
        n = torch.as_tensor([len(r) for r in rows], device=self.device, dtype=torch.float32)
        train_loss = loss_sum / (n * len(plan)).clamp(min=1)
        return params, anchor, steps_done, train_loss

    # ---- rounds
    def run(self) -> TrainResult:
        from tqdm.auto import tqdm

        cfg = self.cfg
        hist = []
        rngs = [np.random.default_rng([f.seed, 7919]) for f in self.feds]
        self.aug_rngs = self._aug_rngs()
        self.run_gens = RunGenerators(self.device)
        self.diverged = np.zeros(self.R, dtype=np.int64)  # the round each run diverged in (0: it has not)
        t0, c0 = time.perf_counter(), time.process_time()
        n_samples = 0
        best = _BestTracker(cfg.keep_best, self.R) if cfg.keep_best else None
        bar = tqdm(range(1, cfg.rounds + 1), desc=f"{self.algo.name} x{self.R}", disable=not self.progress,
                   leave=False)
        for rnd in bar:
            self.round_lr = self.optim.lr_at(rnd, cfg.rounds)
            self.ctx = dataclasses.replace(self.ctx, round=rnd, lr=self.round_lr)  # what the parts see this round
            part = self._participants(rngs)  # [R, m']
            slots = np.array([(r, c) for r in range(self.R) for c in part[r]])
            params = self.algo.broadcast(self.ctx, self.state, self._slot_starts(slots), slots)
            slot_rngs = [rngs[r] for r in slots[:, 0]]
            bufs = {k: v[slots[:, 0]].clone() for k, v in self.global_buffers.items()}
            new, anchor, steps, loss = self.local_train(rnd, params, slots, slot_rngs, bufs)
            self.round_steps = steps  # each slot's steps this round (_evaluate: which slots trained)
            new, loss = self._hold_diverged(rnd, slots, new, anchor, loss)
            prev_params, prev_buffers = self.global_params, self.global_buffers
            self.global_buffers = self._average_buffers(bufs, slots)
            n_samples += int(sum(len(self.feds[r].client_indices[c]) for r, c in slots)) * cfg.local_epochs
            agg = Aggregation(new, anchor, steps, loss, slots, part, self.global_params)
            self.global_params = self.algo.aggregate(self.ctx, self.state, agg)
            self.global_params, self.global_buffers = self.algo.server_steps(
                self.ctx, self.state, self.global_params, self.global_buffers, agg, rngs)
            self._restore_diverged(rnd, prev_params, prev_buffers)
            # the round's per-slot tensors (clients' start and new parameters, their buffers) are dead
            # now: drop them before evaluating and before the next round's copies are made (for large
            # models, such as ResNet-18s at 224 px, they would otherwise be held through evaluation)
            del params, bufs, new, anchor, agg, prev_params, prev_buffers
            if rnd % cfg.eval_every == 0 or rnd == cfg.rounds:
                rows = self._evaluate(rnd, loss, slots)
                for row, extra in zip(rows, self.algo.round_metrics(self.ctx, self.state, self.global_params,
                                                                    self.global_buffers)):
                    row.update(extra)
                live = [row for row in rows if not self.diverged[row["run"]]]
                hist.extend(live)
                if best is not None:
                    best.update(rnd, rows, self.global_params, self.global_buffers, skip=self.diverged > 0)
            round_done(rnd, cfg.rounds, self.R)  # progress inside the runs (the sweep's bar, if any)
            if self.diverged.all():  # nothing left to train: the remaining rounds count as done
                for later in range(rnd + 1, cfg.rounds + 1):
                    round_done(later, cfg.rounds, self.R)
                break
        # wall and process CPU seconds of this engine call (all its runs: "runs" of them; evaluation included)
        self.step_log = {"train_seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
                         "runs": self.R, "samples": n_samples, "backend": self.backend,
                         "backend_rule": self.backend_rule, "precision": cfg.precision,
                         "layout": self.layout_rule + (f"; {self.slot_rule}" if self.backend == "grouped" else ""), "device": device_name(self.device), **self.step_log_extra}
        final = {k: v.detach().cpu() for k, v in self.global_params.items()}
        diverged = [int(d) if d else None for d in self.diverged]
        return TrainResult(pd.DataFrame(hist), final, self.step_log,
                           None if best is None else best.snapshots(self.global_params, self.global_buffers), diverged)

    # ---- runs that diverge
    def _finite_rows(self, tensors: dict, n: int) -> torch.Tensor:
        """[n] bool: row i of every tensor in `tensors` (leading dimension n) is finite."""
        ok = torch.ones(n, dtype=torch.bool, device=self.device)
        for v in tensors.values():
            if v.is_floating_point():
                ok &= torch.isfinite(v.reshape(n, -1)).all(1)
        return ok

    def _hold_diverged(self, rnd, slots, new, anchor, loss):
        """A run diverges in the first round in which one of its clients' training ends with a
        non-finite loss or parameter (e.g. a learning rate too large for a seed: it happened to
        FedPALS Table 1's Fashion-MNIST runs at the paper's 150 rounds). From then on the run is
        held: its clients' updates are replaced by their start parameters and their losses by 0, so
        the aggregation (AFL's loss-weighted step, a QP) sees finite input and the runs batched with
        it go on unchanged (each run's aggregation is its own); its history stops at the last round
        before it diverged and TrainResult.diverged names the round."""
        ok = self._finite_rows(new, len(slots)) & torch.isfinite(loss)
        bad = np.unique(slots[~ok.cpu().numpy(), 0])
        self.diverged[bad[self.diverged[bad] == 0]] = rnd
        held = self.diverged[slots[:, 0]] > 0
        if not held.any():
            return new, loss
        h = torch.as_tensor(held, device=self.device)
        return _rows_from(h, anchor, new), torch.where(h, torch.zeros_like(loss), loss)

    def _restore_diverged(self, rnd, prev_params, prev_buffers):
        """A run whose global model is non-finite after aggregation and server steps diverged in
        this round too; every diverged run keeps its last finite global model (and buffers), which
        is what TrainResult.final_params holds for it."""
        ok = self._finite_rows(self.global_params, self.R) & self._finite_rows(self.global_buffers, self.R)
        bad = np.flatnonzero(~ok.cpu().numpy())
        self.diverged[bad[self.diverged[bad] == 0]] = rnd
        if not self.diverged.any():
            return
        h = torch.as_tensor(self.diverged > 0, device=self.device)
        self.global_params = _rows_from(h, prev_params, self.global_params)
        self.global_buffers = _rows_from(h, prev_buffers, self.global_buffers)

    def _participants(self, rngs) -> np.ndarray:
        k = self.per_run
        if k == self.M:
            return np.tile(np.arange(self.M), (self.R, 1))
        return np.stack([np.sort(rngs[r].choice(self.M, size=k, replace=False)) for r in range(self.R)])

    def _average_buffers(self, bufs, slots) -> dict:
        """Average the clients' float buffers (BatchNorm running statistics) with sample-size weights;
        integer buffers (num_batches_tracked) take the first client's value."""
        if not bufs:
            return bufs
        n = torch.as_tensor(self.sizes[slots[:, 0], slots[:, 1]], dtype=torch.float32, device=self.device)
        run = torch.as_tensor(slots[:, 0], device=self.device)
        tot = torch.zeros(self.R, device=self.device).index_add_(0, run, n)
        w = n / tot[run]
        out = {}
        for k, v in bufs.items():
            if v.is_floating_point():
                out[k] = torch.zeros_like(self.global_buffers[k]).index_add_(0, run, w.view(-1, *([1] * (v.dim() - 1))) * v)
            else:
                out[k] = v[np.unique(slots[:, 0], return_index=True)[1]]
        return out

    # ---- evaluation of every run's global model
    def predict(self, params: dict, x_pool: torch.Tensor, rows: list, train=False, buffers=None) -> list:
        """Logits of each model (params [n, ...], buffers [n, ...] or the runs' global buffers) on
        its own rows of x_pool."""
        bufs = self.global_buffers if buffers is None else buffers
        batched = self.backend == "grouped" and evaluate.BATCHED_OVER_MODELS  # off by default: see evaluate.py
        grouped = self.grouped if batched else None
        return predict(self.template, params, bufs, x_pool, rows, self.K, self.eval_rows, self.device, train,
                       self.cfg.precision, grouped)

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
                for name, value in split_metrics(y, lg, self.K, self.cfg.metrics).items():
                    results[(r, f"{split}_{name}")] = value
        loss_r = torch.zeros(self.R, device=self.device).index_add_(0, torch.as_tensor(slots[:, 0], device=self.device), loss)
        # each run's train_loss: the mean over its slots that trained this round (a slot given no rows,
        # e.g. a FedPALS client of weight 0, takes no step and its loss of 0 is not averaged in)
        trained = (self.round_steps > 0).cpu().numpy()
        for r, f in enumerate(self.feds):
            row = {"run": r, "seed": f.seed, "round": rnd,
                   "train_loss": (loss_r[r] / max(1, ((slots[:, 0] == r) & trained).sum())).item()}
            row.update({k: v for (rr, k), v in results.items() if rr == r})
            rows.append(row)
        return rows


class _BestTracker:
    """Each run's global model (parameters and buffers) and round at the first evaluated round
    where the history column `metric` peaks, the round TrainResult.best(by=metric) selects: rounds
    without a value of it are passed over once one has one, and a run with none keeps its last
    evaluated round; a diverged run keeps what it kept before it diverged."""

    def __init__(self, metric: str, R: int):
        self.metric = metric
        self.score = [None] * R  # each run's peak so far (None: no value of the metric yet)
        self.kept = [None] * R

    def update(self, rnd: int, rows: list, params: dict, buffers: dict, skip=None):
        for r, row in enumerate(rows):
            if skip is not None and skip[r]:
                continue
            v = row.get(self.metric)
            valued = v is not None and not np.isnan(v)
            if valued and (self.score[r] is None or v > self.score[r]):
                self.score[r] = v  # a new peak
            elif valued or self.score[r] is not None:
                continue  # not a new peak, or no value after one was seen
            self.kept[r] = _snapshot(rnd, params, buffers, r)

    def snapshots(self, params: dict, buffers: dict) -> list:
        """Per run, what it kept; a run that kept nothing (diverged before its first evaluation)
        its last finite model, with round None."""
        return [kept if kept is not None else _snapshot(None, params, buffers, r) for r, kept in enumerate(self.kept)]


def _snapshot(rnd, params: dict, buffers: dict, r: int) -> dict:
    """Run r's global model, copied to the CPU in contiguous layout: {"round", "params", "buffers"}."""
    copy = lambda d: {k: v[r].detach().cpu().clone(memory_format=torch.contiguous_format)  # noqa: E731
                      for k, v in d.items()}
    return {"round": rnd, "params": copy(params), "buffers": copy(buffers)}


def train(method, config: TrainConfig, pools: Pools, feds: list, progress=True) -> TrainResult:
    """Train len(feds) runs of `method` (a Method or an algorithms.base.Algorithm) at once and
    return their per-round history."""
    trainer = FederatedTrainer(method, config, pools, feds, progress=progress)
    release = trainer.device.type == "cpu" and large_step(trainer.alloc_bytes)
    try:
        return trainer.run()
    finally:  # CPU, large step: the run's memory goes back before the next call (cpu.release_freed_memory)
        del trainer
        if release:
            release_freed_memory()
