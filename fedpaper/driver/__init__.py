"""The driver: the round loop that runs an algorithm's parts on the engine.

- trainer: FederatedTrainer and `train` (rounds of broadcast -> local training of all slots at once
  -> aggregation -> server steps -> evaluation, calling the hooks of an algorithms.base.Algorithm;
  it never names a method);
- sequential: the plain one-client-at-a-time reference (imported on use: `fedpaper.driver.sequential`).

It sits above fedpaper.algorithms (the parts) and fedpaper.engine (batching, optimisers, the
grouped forward, precision, per-run gradients), ARCHITECTURE.md.
"""
from fedpaper.driver.trainer import FederatedTrainer, train

__all__ = ["FederatedTrainer", "train"]
