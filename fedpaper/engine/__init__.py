"""The batched federated engine, by concern:

- types: Pools, Federation, TrainConfig, TrainResult (what the engine takes and returns);
- trainer: FederatedTrainer and `train` (rounds of broadcast -> local training of all slots at once
  -> aggregation -> server steps -> evaluation, calling the hooks of an algorithms.base.Algorithm);
- backends: per-slot gradients ("vmap", "loop", "grouped") and the fixed rule that picks one;
- grouped: the grouped forward pass and stacked layouts; batching: minibatches of slots;
- optim: optimisers and lr schedules as data; evaluate: logits and per-split metrics;
- cpu: allocator tuning; sequential: the plain one-client-at-a-time reference (imported on use).
"""
from .backends import choose_backend
from .batching import _gather, epoch_batches, gather
from .cpu import _tune_cpu_allocator
from .evaluate import _macro_f1, predict, split_metrics
from .grouped import GROUPED_SAMPLES, GroupedForward, _fast_layout, _GroupedForward, _stacked_layout, channels_last_ok, \
    fast_layout, stacked_layout
from .optim import OptimSpec, opt_init, opt_step
from .trainer import FederatedTrainer, train
from .types import Federation, Pools, TrainConfig, TrainResult

__all__ = ["Federation", "Pools", "TrainConfig", "TrainResult", "FederatedTrainer", "train", "OptimSpec",
           "opt_init", "opt_step", "epoch_batches", "gather", "split_metrics", "predict", "choose_backend",
           "GroupedForward", "channels_last_ok", "stacked_layout", "fast_layout", "GROUPED_SAMPLES", "_tune_cpu_allocator", "_gather",
           "_macro_f1", "_fast_layout", "_GroupedForward", "_stacked_layout"]
