"""Parameters that never train: a part listing them (the trainer keeps their values through local
steps, and the aggregation copies them from the previous global model, so they stay exactly as
initialised). Used for FedNCA-ML's fixed simplex-ETF classifier and LADM queries (Peng et al.
Sec. 4.2: "we fix the classifier to the global simplex ETF") and SphereFed's fixed classifier."""
from __future__ import annotations

from fedpaper.ground.errors import BadParameterError
from fedpaper.algorithms.base import Part


class FrozenParameters(Part):
    """frozen: the parameter names kept fixed (checked against the model at setup)."""

    key = "frozen"

    def __init__(self, names):
        self.frozen = tuple(names)

    def check(self, ctx):
        known = set(ctx.init_params)
        missing = [n for n in self.frozen if n not in known]
        if missing:
            raise BadParameterError(f"frozen parameter {missing[0]!r} is not a parameter of the model; it has "
                                    f"{sorted(known)[:6]}...")
