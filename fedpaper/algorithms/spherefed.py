"""SphereFed (Dong et al. 2022, "SphereFed: Hyperspherical Federated Learning", Sec. 3): every
client trains its feature extractor against one fixed classifier whose class vectors are
orthonormal, with features projected onto the unit hypersphere and logits scaled (the model head
nets.etf.SphereClassifier, model "fednca_net" with head="sphere"). The classifier is shared and
never trained (a frozen parameter); aggregation is FedAvg's. Targets vague-10: scale 16; the
paper's closed-form classifier calibration after training is not implemented."""
from __future__ import annotations

from fedpaper.ground.errors import BadParameterError
from fedpaper.algorithms.frozen import FrozenParameters


class SphereFedClassifier(FrozenParameters):
    key = "spherefed"

    def __init__(self):
        super().__init__(("classifier.weight",))

    def check(self, ctx):
        if getattr(ctx.template, "head", None) != "sphere":
            raise BadParameterError("SphereFed needs model 'fednca_net' with head='sphere' (fixed hypersphere "
                                    "classifier)")
        super().check(ctx)
