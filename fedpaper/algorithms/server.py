"""Names kept from before the algorithm seam (issue 13): the server-side pieces now live in one
module per algorithm (fedavg, fedpals, afl, scaffold, privlabels, server_training, tuning)."""
from __future__ import annotations

from . import privlabels
from .tuning import tuning_loss

__all__ = ["tuning_loss", "restrict_classifier"]


def restrict_classifier(ctx, params, slots) -> dict:
    """privlabels Alg. 1 broadcast (privlabels.PrivateLabels.broadcast); `ctx` is an algorithms.
    base.Context or anything holding one as `.ctx` (a FederatedTrainer)."""
    return privlabels.restrict_classifier(getattr(ctx, "ctx", ctx), params, slots)
