"""torchvision's ResNets with ImageNet weights or random initialisation: the one place that loads
torchvision weights, for fedpaper.blocks.models' builders and the backbones of nets.ladm and nets.resnet."""
from __future__ import annotations

from fedpaper.ground.errors import DataMissingError


def torchvision_resnet(arch: str, pretrained: bool):
    """torchvision's `arch` ("resnet18", "resnet50") with its IMAGENET1K_V1 weights (pretrained) or
    random initialisation. The weights come from torchvision's download cache; without internet and
    without cached weights this raises one DataMissingError naming how to fetch them."""
    import torchvision  # a heavy import (seconds), needed only when a ResNet is built

    try:
        return getattr(torchvision.models, arch)(weights="IMAGENET1K_V1" if pretrained else None)
    except Exception as exc:  # no internet and no cached weights
        raise DataMissingError(
            f"ImageNet {arch} weights are not available ({type(exc).__name__}); download them once with "
            f"internet (torchvision.models.{arch}(weights='IMAGENET1K_V1')) into the torch hub cache, or "
            "use random initialisation") from None
