"""FedNCA-ML's network (Peng et al., Sec. 4.1-4.2): backbone -> label-aware disentanglement module
(LADM) -> fixed simplex-ETF classifier, plus the ablation heads of Tables 5-8 and SphereFed's.

- backbone: a spatial feature map F [B, d, H', W'] flattened to S = H'W' tokens Z [B, S, d]
  (eqs. 3-4). "resnet18" is torchvision's ResNet-18 without pooling and FC (ImageNet stem; ImageNet
  weights with pretrained=True, as the paper for DermaMNIST, VOC and ChestX-ray14), "resnet18_cifar"
  its 3x3-stem variant, and "convnet" a small CPU-sized CNN (four 3x3 conv + ReLU blocks, three
  2x2 max-pools: a 64-px canvas gives an 8x8 grid) for the quick and long profiles.
- positional embedding (eq. 5): a fixed 2-D sine-cosine embedding P added to the tokens used as
  keys and values (DETR-style: d/2 channels encode the row, d/2 the column, sine and cosine
  interleaved, coordinates normalised to (0, 2 pi]; targets vague-8). No parameters.
- LADM (eqs. 6-8): nn.MultiheadAttention(d, 4 heads) with the C class queries m_c (the ETF
  columns, which are also the classifier), keys and values Z + P; output h_ic [B, C, d]; no
  residual, LayerNorm or feed-forward (vague-8).
- prediction (eq. 9): logit_ic = s h_ic^T m_c + b_c (etf.ETFClassifier; s = 1, b = 0 is eq. 9
  exactly). `pair_logits` [B, C, C] scores every class-wise feature against every prototype, the
  input of L_Neg and L_Pos (eqs. 11-13, algorithms.fednca_loss).

Heads: "ladm" (FedNCA-ML), "etf" (Table 5 row 2: pooled feature times the fixed ETF), "fc"
(Table 5 row 1 and the baselines: pooled feature and a learnable nn.Linear), "sphere" (SphereFed).
queries="learnable" with query_init "etf" or "random" is the query ablation (Tables 6, 8): the same
matrix, then trained (algorithms.frozen leaves it out of the frozen set).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.nets.etf import ETFClassifier, SphereClassifier
from fedpaper.blocks.nets.torchvision_nets import torchvision_resnet

HEADS = ("ladm", "etf", "fc", "sphere")
BACKBONES = ("convnet", "resnet18", "resnet18_cifar")


def sine_cosine_2d(h: int, w: int, d: int, temperature: float = 10000.0) -> torch.Tensor:
    """The fixed 2-D sine-cosine positional embedding P [h * w, d] (eq. 5; DETR's
    PositionEmbeddingSine with normalize=True): channels [0, d/2) encode the row, [d/2, d) the
    column; within each half channel 2j is sin(pos / T^(2j/(d/2))), channel 2j+1 its cos."""
    if d % 4:
        raise BadParameterError(f"feature dimension d={d} must be divisible by 4 for the 2-D sine-cosine embedding")
    half = d // 2
    eps, scale = 1e-6, 2 * math.pi
    y = torch.arange(1, h + 1, dtype=torch.float32).view(h, 1).expand(h, w) / (h + eps) * scale
    x = torch.arange(1, w + 1, dtype=torch.float32).view(1, w).expand(h, w) / (w + eps) * scale
    dim_t = temperature ** (2 * (torch.arange(half) // 2) / half)

    def enc(pos):
        p = pos[..., None] / dim_t
        return torch.stack((p[..., 0::2].sin(), p[..., 1::2].cos()), dim=-1).flatten(-2)

    return torch.cat((enc(y), enc(x)), dim=-1).reshape(h * w, d)


NORMS = (None, "batch")


class ConvNet(nn.Module):
    """A small CNN feature extractor: widths (w, 2w, 4w, d), 3x3 convs with ReLU, max-pool after
    the first three blocks (spatial size / 8). norm="batch" puts a BatchNorm2d after every conv
    (as in ResNet-18, the paper's backbone): from scratch on the small composites the plain net
    sits on a plateau for several epochs, the BatchNorm one leaves it in the first."""

    def __init__(self, in_channels=3, width=32, dim=128, norm=None):
        super().__init__()
        if norm not in NORMS:
            raise BadParameterError(f"norm={norm!r}; choose one of {NORMS}")
        w = width
        layers, c = [], in_channels
        for i, out in enumerate((w, 2 * w, 4 * w, dim)):
            layers += [nn.Conv2d(c, out, 3, padding=1)] + ([nn.BatchNorm2d(out)] if norm == "batch" else []) + \
                [nn.ReLU()]
            if i < 3:
                layers.append(nn.MaxPool2d(2))
            c = out
        self.body = nn.Sequential(*layers)
        self.dim = dim

    def forward(self, x):
        return self.body(x)


class ResNetTrunk(nn.Module):
    """torchvision ResNet-18 up to its last stage (no pooling, no FC): d = 512."""

    def __init__(self, in_channels=3, cifar_stem=False, pretrained=False):
        super().__init__()
        net = torchvision_resnet("resnet18", pretrained)
        if cifar_stem:
            net.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
            net.maxpool = nn.Identity()
        self.body = nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool, net.layer1, net.layer2, net.layer3,
                                  net.layer4)
        self.dim = 512

    def forward(self, x):
        return self.body(x)


def build_backbone(name: str, in_channels=3, width=32, dim=128, pretrained=False, norm=None) -> nn.Module:
    if name == "convnet":
        if pretrained:
            raise BadParameterError("backbone='convnet' has no pretrained weights; use pretrained=False")
        return ConvNet(in_channels, width, dim, norm)
    if norm is not None:
        raise BadParameterError(f"norm={norm!r} is a convnet option ({name!r} has its own BatchNorm); drop it")
    if name in ("resnet18", "resnet18_cifar"):
        return ResNetTrunk(in_channels, cifar_stem=name == "resnet18_cifar", pretrained=pretrained)
    raise BadParameterError(f"backbone={name!r}; choose one of {BACKBONES}")


def fixed_parameter_names(head: str, queries: str = "fixed") -> tuple:
    """Names of the parameters of a FedNCANet with this head and queries that must never train: the
    classifier of SphereFed's fixed hypersphere and the fixed ETF (heads "ladm" and "etf", unless
    the queries are learnable: Tables 6, 8). algorithms.frozen keeps them fixed."""
    if head == "sphere" or (head in ("ladm", "etf") and queries == "fixed"):
        return ("classifier.weight",)
    return ()


class FedNCANet(nn.Module):
    """Backbone + head (see the module docstring). forward(x) returns a dict: "logits" [B, C];
    for the LADM head also "features" h [B, C, d] and "pair_logits" [B, C, C]; for the pooled
    heads "features" [B, d] (the pooled image feature)."""

    def __init__(self, num_classes: int, backbone="convnet", head="ladm", in_channels=3, width=32, dim=128,
                 heads=4, queries="fixed", query_init="etf", logit_scale=10.0, bias=True, etf_layout="rotated",
                 etf_seed=0, sphere_scale=16.0, pretrained=False, norm=None):
        super().__init__()
        if head not in HEADS:
            raise BadParameterError(f"head={head!r}; choose one of {HEADS}")
        if queries not in ("fixed", "learnable"):
            raise BadParameterError(f"queries={queries!r}; choose 'fixed' or 'learnable'")
        if queries == "fixed" and query_init != "etf":
            raise BadParameterError("fixed queries are the ETF; query_init='random' needs queries='learnable'")
        self.backbone = build_backbone(backbone, in_channels, width, dim, pretrained, norm)
        d, C = self.backbone.dim, num_classes
        self.head, self.queries, self.num_classes = head, queries, C
        if head == "fc":
            self.classifier = nn.Linear(d, C)
        elif head == "sphere":
            self.classifier = SphereClassifier(d, C, etf_seed, sphere_scale)
        else:
            self.classifier = ETFClassifier(d, C, etf_layout, etf_seed, logit_scale, bias, query_init)
        if head == "ladm":
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)

    #: engine.backends (loop): skip the gradient pass of clients whose epoch has ended. Safe here:
    #: the forward pass draws no random numbers (attention dropout 0), and a finished client's
    #: BatchNorm statistics (norm="batch") are not updated from padding rows.
    skip_inactive_slots = True

    def fixed_parameters(self) -> tuple:
        """Names of the parameters that must never train (fixed_parameter_names of this head)."""
        return fixed_parameter_names(self.head, self.queries)

    def tokens(self, x):
        f = self.backbone(x)
        b, d, h, w = f.shape
        z = f.flatten(2).transpose(1, 2)  # [B, S, d] (eq. 4)
        return z + sine_cosine_2d(h, w, d).to(device=z.device, dtype=z.dtype), (h, w)  # eq. 5 (no state kept)

    def ladm(self, x, need_weights=False):
        """Class-wise features h [B, C, d] (eq. 7) and, with need_weights, per-head attention
        weights [B, heads, C, S] over the tokens."""
        zt, hw = self.tokens(x)
        q = self.classifier.weight.unsqueeze(0).expand(zt.shape[0], -1, -1).to(zt.dtype)
        h, att = self.attn(q, zt, zt, need_weights=need_weights, average_attn_weights=False)
        return h, att, hw

    def forward(self, x):
        if self.head == "ladm":
            h, _, _ = self.ladm(x)
            pair = self.classifier.scores(h)  # [B, C(feature), C(prototype)]
            return {"logits": torch.diagonal(pair, dim1=-2, dim2=-1), "features": h, "pair_logits": pair}
        pooled = self.backbone(x).mean(dim=(2, 3))
        return {"logits": self.classifier(pooled), "features": pooled}
