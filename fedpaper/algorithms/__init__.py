"""Federated algorithms as compositions of parts (algorithms.base: the seam the trainer calls).

One module per algorithm: fedprox (and penalties), scaffold, fedrs, afl, fedpals (with the QP of
weights), privlabels, tuning, server_training, semisup (mixup, pseudo-labels); FedAvg's weight rule,
every algorithm's default, is base.FedAvgWeights.

A method has one form, the Algorithm: its spec() (parts and their arguments) is a run's method and
results-cache key, and parts.algorithm_of builds it back. `Method` (the fedpals and privlabels
papers' methods by their fields) and families.family_algorithm (FedMT's and FedNCA-ML's methods by a
family name and options) are ways of writing one; legacy.method_spec migrates older cache keys."""
from fedpaper.algorithms.base import Algorithm, Part
from fedpaper.algorithms.methods import Method, get_method, standard_methods
from fedpaper.algorithms.parts import algorithm_of

__all__ = ["Algorithm", "Part", "Method", "algorithm_of", "get_method", "standard_methods"]
