"""Federated algorithms as compositions of parts (algorithms.base: the seam the trainer calls).

One module per algorithm: fedprox (and penalties), scaffold, fedrs, afl, fedpals (with the QP of
weights), privlabels, tuning, server_training, semisup (mixup, pseudo-labels); FedAvg's weight rule,
every algorithm's default, is base.FedAvgWeights. `Method` is
the user-facing description of the papers' methods (its spec() is the cache key); Method.algorithm()
maps its fields to parts (methods.method_parts)."""
from .base import Algorithm, Part
from .methods import Method, get_method, standard_methods

__all__ = ["Algorithm", "Part", "Method", "get_method", "standard_methods"]
