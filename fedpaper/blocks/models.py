"""The papers' networks, each a plain nn.Module whose last layer is `self.classifier`, and the
registry that builds them by name (MODELS, build_model). The larger networks are built from the
blocks of fedpaper.blocks.nets, which never import this module.

The engine treats every model functionally (torch.func.functional_call over stacked
parameters), so models must not keep state outside parameters and buffers.
"""
from __future__ import annotations

import torch
from torch import nn

from fedpaper.ground.errors import UnknownNameError
from fedpaper.blocks.nets.ladm import FedNCANet
from fedpaper.blocks.nets.resnet import TwoHead, WithCorrespondence, bn_convnet, resnet18_fedmt, small_resnet
from fedpaper.blocks.nets.torchvision_nets import torchvision_resnet


def logits_of(outputs):
    """The logits among a model's outputs: the tensor itself, or outputs["logits"]."""
    return outputs["logits"] if isinstance(outputs, dict) else outputs


class LeNet(nn.Module):
    """FedPALS "small, two-layer convolutional network" (fedpals Sec 5; targets vague-4).

    The authors' public prototype: conv5x5 c_in->c1, ReLU, maxpool2, conv5x5 c1->c2, ReLU,
    maxpool2, FC ->120->84->K. CIFAR-10: c1=6, c2=16 (FC 400); Fashion-MNIST: c1=6, c2=12 (FC 192).
    """

    def __init__(self, in_channels=3, num_classes=10, image_size=32, c1=6, c2=None):
        super().__init__()
        c2 = c2 or (16 if in_channels == 3 else 12)
        side = ((image_size - 4) // 2 - 4) // 2
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(c2 * side * side, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        )
        self.classifier = nn.Linear(84, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


class PrivLabelsCNN(nn.Module):
    """The "simple CNN" of privlabels App A.1, Table 1.

    Conv, Conv, 2x2 max-pool, Conv, Conv, 2x2 max-pool, Flatten, Fully connected, Dropout(0.5),
    then the linear-softmax classifier psi (one row per label, Sec 3). Table 1's "# Filters = 3"
    is read as the 3x3 kernel (targets vague-2); widths default to the Keras example's 32-32-64-64
    with a 512-unit hidden layer, and a quick profile may shrink them (recorded in provenance).
    """

    def __init__(self, in_channels=3, num_classes=10, image_size=32, widths=(32, 32, 64, 64),
                 hidden=512, dropout=0.5):
        super().__init__()
        w1, w2, w3, w4 = widths
        side = image_size // 4
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, w1, 3, padding=1), nn.ReLU(),
            nn.Conv2d(w1, w2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(w2, w3, 3, padding=1), nn.ReLU(),
            nn.Conv2d(w3, w4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(w4 * side * side, hidden), nn.ReLU(), nn.Dropout(dropout),
        )
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


class LogisticRegression(nn.Module):
    """Multinomial logistic regression (fedpals synthetic task, App A.5/B.4)."""

    def __init__(self, in_features=2, num_classes=3):
        super().__init__()
        self.features = nn.Flatten()
        self.classifier = nn.Linear(in_features, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


def resnet18_cifar(num_classes=10, in_channels=3):
    """torchvision ResNet-18, CIFAR variant: 3x3 stride-1 first conv and no first max-pool
    (used by FedMT and FedNCA-ML). Has BatchNorm: train it with the engine's loop backend."""
    import torchvision

    net = torchvision.models.resnet18(num_classes=num_classes)
    net.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
    net.maxpool = nn.Identity()
    net.classifier = net.fc
    return net


def resnet50_imagenet(num_classes, pretrained=True):
    """torchvision ResNet-50 with ImageNet weights and a new head (FedPALS PACS/iWildCam, App A.6-7).

    The weights come from torchvision's download cache; without internet and without cached weights
    this raises a DataMissingError naming the file to fetch."""
    net = torchvision_resnet("resnet50", pretrained)
    net.fc = nn.Linear(net.fc.in_features, num_classes)
    net.classifier = net.fc
    return net


def fednca_net(num_classes, **kwargs):
    """FedNCA-ML's backbone + LADM + fixed ETF classifier, or an ablation / SphereFed head
    (fedpaper.blocks.nets.ladm.FedNCANet; outputs a dict with "logits")."""
    return FedNCANet(num_classes, **kwargs)


def two_head(num_classes=100, coarse_classes=20, backbone="small_resnet", **kw):
    """FedMT's two-head network (fedpaper.blocks.nets.resnet.TwoHead) on the registered model `backbone`."""
    return TwoHead(build_model(backbone, num_classes=num_classes, **kw), num_classes, coarse_classes)


def with_correspondence(num_classes=100, coarse_classes=20, backbone="lenet", init_scale=0.01, **kw):
    """The registered model `backbone` with FedMT's learnable correspondence matrix
    (fedpaper.blocks.nets.resnet.WithCorrespondence)."""
    return WithCorrespondence(build_model(backbone, num_classes=num_classes, **kw), num_classes, coarse_classes,
                              init_scale)


MODELS = {
    "lenet": LeNet,
    "privlabels_cnn": PrivLabelsCNN,
    "logreg": LogisticRegression,
    "resnet18_cifar": resnet18_cifar,
    "resnet50_imagenet": resnet50_imagenet,
    "fednca_net": fednca_net,
    # FedMT's networks (fedpaper.blocks.nets.resnet)
    "resnet18_fedmt": resnet18_fedmt,
    "small_resnet": small_resnet,
    "two_head": two_head,
    "with_correspondence": with_correspondence,
    "bn_convnet": bn_convnet,
}


def build_model(name: str, **kwargs) -> nn.Module:
    """Instantiate a model by name (see MODELS)."""
    if name not in MODELS:
        raise UnknownNameError(f"unknown model {name!r}; known models: {', '.join(MODELS)}")
    return MODELS[name](**kwargs)


def has_batchnorm(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def classifier_param_names(model: nn.Module) -> tuple[str, str]:
    """Names of the classifier's weight and bias in model.named_parameters()."""
    for name, mod in model.named_modules():
        if mod is model.classifier:
            prefix = f"{name}." if name else ""
            return f"{prefix}weight", f"{prefix}bias"
    raise ValueError("model has no `classifier` submodule")
