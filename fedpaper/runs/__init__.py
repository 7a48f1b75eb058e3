"""Runs: what a run is (`experiment.RunSpec`) and how runs are executed, cached and moved: code
versions (`versions`), the results store (`store`), resumable sweeps (`sweep`), executors and
leases, cache archives and rekeys, run costs (`model_costs`) and provenance. Below the outputs and
the papers, above the driver (ARCHITECTURE.md)."""
