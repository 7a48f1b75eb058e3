"""The batched federated engine's primitives, by concern (the round loop that uses them is
fedpaper.driver, above fedpaper.algorithms; ARCHITECTURE.md):

- types: Pools, Federation, TrainConfig, TrainResult (what the driver takes and returns);
- backends: one class per backend ("loop", "vmap", "grouped", "captured": a CUDA graph of the vmap
  step), each owning a local step, and the fixed rule that picks one;
  batchnorm: BatchNorm statistics from each slot's real rows (loop: updated in place; vmap: returned);
- gradients: per-run gradients of an algorithm's own loss (the Context's `run_grads` service);
- grouped: the grouped forward pass and stacked layouts; batching: minibatches of slots;
- optim: optimisers and lr schedules as data; evaluate: precision (autocast), logits and
  per-split metrics; randomness: per-run random streams; memory: what fits the device;
- cpu: allocator tuning.
"""
from fedpaper.engine.backends import choose_backend
from fedpaper.engine.batching import _gather, epoch_batches, gather
from fedpaper.engine.cpu import _tune_cpu_allocator
from fedpaper.engine.evaluate import _macro_f1, predict, split_metrics
from fedpaper.engine.grouped import GROUPED_SAMPLES, GroupedForward, _fast_layout, _GroupedForward, _stacked_layout, channels_last_ok, \
    fast_layout, stacked_layout
from fedpaper.engine.optim import OptimSpec, opt_init, opt_step
from fedpaper.engine.types import Federation, Pools, TrainConfig, TrainResult

__all__ = ["Federation", "Pools", "TrainConfig", "TrainResult", "OptimSpec",
           "opt_init", "opt_step", "epoch_batches", "gather", "split_metrics", "predict", "choose_backend",
           "GroupedForward", "channels_last_ok", "stacked_layout", "fast_layout", "GROUPED_SAMPLES", "_tune_cpu_allocator", "_gather",
           "_macro_f1", "_fast_layout", "_GroupedForward", "_stacked_layout"]
