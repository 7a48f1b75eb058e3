"""FedMT's networks: the ResNet-18 of Table 5, a small ResNet and a BatchNorm convnet for the CPU
profiles (chosen by benchmarks/fedmt_backbone_study.py at equal CPU seconds), and a
two-head wrapper (a K-class server head and a J-class client head on one body) for FedRep and
FedTrans (FedMT Sec. 4.1, App. C.1). Every model exposes `classifier` (the K-class head).
TwoHead and WithCorrespondence wrap a network that fedpaper.blocks.models builds by name (two_head,
with_correspondence there).
"""
from __future__ import annotations

import torch
from torch import nn

from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.nets.ladm import ConvNet
from fedpaper.blocks.nets.torchvision_nets import torchvision_resnet

INITS = ("random", "imagenet")


def resnet18_fedmt(num_classes=100, in_channels=3, init="random"):
    """torchvision ResNet-18 as FedMT Table 5: 7x7 stride-2 stem, BN, ReLU, NO max-pool, four stages of
    two basic blocks (64-128-256-512), global average pool, FC(512, K). init "imagenet" loads
    torchvision's IMAGENET1K_V1 weights (DataMissingError when they cannot be had offline)."""
    if init not in INITS:
        raise BadParameterError(f"init={init!r}; choose one of {INITS}")
    net = torchvision_resnet("resnet18", init == "imagenet")
    if in_channels != 3:
        net.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
    net.maxpool = nn.Identity()
    net.fc = nn.Linear(net.fc.in_features, num_classes)
    net.classifier = net.fc
    return net


class SmallResNet(nn.Module):
    """A small ResNet for CPU profiles: conv3x3(w0) + BN + ReLU, then one stage of `blocks` torchvision
    basic blocks per width (stride 2 from the second stage), global average pool, FC(w_last, K)."""

    def __init__(self, num_classes=100, in_channels=3, widths=(16, 32, 64), blocks=1):
        from torchvision.models.resnet import BasicBlock

        super().__init__()
        layers = [nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0]),
                  nn.ReLU(inplace=False)]
        w_in = widths[0]
        for i, w in enumerate(widths):
            for b in range(blocks):
                stride = 2 if (i > 0 and b == 0) else 1
                down = None
                if stride != 1 or w_in != w:
                    down = nn.Sequential(nn.Conv2d(w_in, w, 1, stride=stride, bias=False), nn.BatchNorm2d(w))
                layers.append(BasicBlock(w_in, w, stride, down))
                w_in = w
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.body = nn.Sequential(*layers)
        self.classifier = nn.Linear(w_in, num_classes)

    def forward(self, x):
        return self.classifier(self.body(x))


class BNConvNet(nn.Module):
    """FedNCA-ML's small BatchNorm convnet body (fedpaper.blocks.nets.ladm.ConvNet, norm "batch": widths w, 2w,
    4w, dim with max-pools), global average pooling and a linear K-class `classifier`: the CPU
    profiles' FedMT backbone: at equal CPU seconds it trained FedMT to a higher accuracy than the
    small ResNet and the LeNet (benchmarks/fedmt_backbone_study.py compares them)."""

    def __init__(self, num_classes=100, in_channels=3, width=16, dim=64):
        super().__init__()
        self.body = nn.Sequential(ConvNet(in_channels, width, dim, norm="batch"), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten())
        self.classifier = nn.Linear(dim, num_classes)

    def forward(self, x):
        return self.classifier(self.body(x))


def bn_convnet(num_classes=100, in_channels=3, width=16, dim=64):
    return BNConvNet(num_classes, in_channels, width, dim)


class TwoHead(nn.Module):
    """A backbone's body with two linear heads: `classifier` (K classes, the server's) and
    `coarse_head` (J classes, a client's); forward gives {"logits": K-class, "coarse": J-class,
    "features": body output}. `net` is the K-class backbone network (fedpaper.blocks.models.two_head builds
    it by name); its own classifier is replaced by the identity."""

    def __init__(self, net: nn.Module, num_classes=100, coarse_classes=20):
        super().__init__()
        dim = net.classifier.in_features
        if hasattr(net, "fc"):
            net.fc = nn.Identity()
        net.classifier = nn.Identity()
        self.body = net
        self.classifier = nn.Linear(dim, num_classes)
        self.coarse_head = nn.Linear(dim, coarse_classes)

    def forward(self, x):
        f = self.body(x)
        return {"logits": self.classifier(f), "coarse": self.coarse_head(f), "features": f}


def small_resnet(num_classes=100, in_channels=3, widths=(16, 32, 64), blocks=1):
    return SmallResNet(num_classes, in_channels, tuple(widths), blocks)


class WithCorrespondence(nn.Module):
    """A K-class network plus a learnable J x K correspondence matrix (FedMT App. D.4 "Learnable"):
    free logits m (initialised N(0, 0.01^2), targets vague-16), M = softmax over j of m; forward gives
    {"logits": K-class scores, "M": M}. `net` is the K-class network (fedpaper.blocks.models.with_correspondence
    builds it by name)."""

    def __init__(self, net: nn.Module, num_classes=100, coarse_classes=20, init_scale=0.01):
        super().__init__()
        self.net = net
        self.m_logits = nn.Parameter(torch.randn(coarse_classes, num_classes) * init_scale)

    @property
    def classifier(self):
        return self.net.classifier

    def forward(self, x):
        return {"logits": self.net(x), "M": torch.softmax(self.m_logits, 0)}
